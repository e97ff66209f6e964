package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/dashboard"
	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/demo"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// chromium finds Debian's chromium. CI (SEPIPE_REQUIRE_BROWSER=1, set by
// .ci/run, which installs it) fails without it; elsewhere the browser
// tests skip, saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SEPIPE_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH, and SEPIPE_REQUIRE_BROWSER is set (apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH: the browser test needs Debian's chromium (apt-get install -y chromium)")
	return ""
}

// browse loads url in headless chromium, lets its scripts run, and
// returns the DOM they left; with shot set it also saves a screenshot.
func browse(t *testing.T, bin, url, shot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,2200", "--virtual-time-budget=15000"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if shot != "" {
		cmd := exec.CommandContext(ctx, bin, append(args, "--screenshot="+shot, url)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chromium --screenshot: %v\n%s", err, b)
		}
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	return string(dom)
}

var (
	sectionTag = regexp.MustCompile(`<section [^>]*>`)
	attr       = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	valueTag   = regexp.MustCompile(`<div class="value" data-column="([^"]+)" data-value="([^"]*)"`)
)

// panelsIn returns each rendered panel's attributes, by name.
func panelsIn(dom string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, tag := range sectionTag.FindAllString(dom, -1) {
		m := map[string]string{}
		for _, a := range attr.FindAllStringSubmatch(tag, -1) {
			m[a[1]] = a[2]
		}
		out[m["data-name"]] = m
	}
	return out
}

// headline returns the headline panel's numbers as the page shows them.
func headline(t *testing.T, dom string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, m := range valueTag.FindAllStringSubmatch(dom, -1) {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			t.Fatalf("headline %s = %q", m[1], m[2])
		}
		out[m[1]] = n
	}
	return out
}

// sqlHeadline computes the headline numbers with SQL of the test's own.
func sqlHeadline(t *testing.T, out, team string) map[string]int64 {
	t.Helper()
	wh, err := load.OpenReadOnly(context.Background(), filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	var l, a, c, o int64
	err = wh.DB().QueryRow(`SELECT count(DISTINCT userId), count(*), count(*) FILTER (WHERE status = 'Completed'),
		count(*) FILTER (WHERE status = 'Overdue') FROM userCourseProgress
		WHERE ? = '' OR userId IN (SELECT userId FROM "user" WHERE team = ?)`, team, team).Scan(&l, &a, &c, &o)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]int64{"learners": l, "assignments": a, "completed": c, "overdue": o}
}

const brokenPanel = `name: broken
title: A panel with a typo
kind: table
sql: SELECT * FROM no_such_table
`

const customPanel = `name: course_categories
title: Courses by category
question: How many courses does each category hold?
kind: bar
x: category
y: [courses]
sql: SELECT category, count(*) AS courses FROM course GROUP BY 1 ORDER BY 2 DESC
`

// TestDashboardInABrowser loads the dashboard over a demo warehouse in
// headless chromium: every panel draws, the headline numbers equal SQL on
// the same file, a team filter changes them as SQL says, a broken user
// panel shows its error while the rest render, and a screenshot is saved
// (to SEPIPE_DASHBOARD_SHOT if set, which is how docs/dashboard.png is
// made).
func TestDashboardInABrowser(t *testing.T) {
	bin := chromium(t)
	out := filepath.Join(t.TempDir(), "demo")
	if _, err := demo.Run(context.Background(), demo.Config{Out: out, Users: 150, Seed: 1, Days: 4}); err != nil {
		t.Fatal(err)
	}
	panels := t.TempDir()
	for name, body := range map[string]string{"broken.yaml": brokenPanel, "custom.yaml": customPanel, "not-yaml.yaml": "name: [unclosed"} {
		if err := os.WriteFile(filepath.Join(panels, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(dashboard.Handler(dashboard.Config{Out: out, PanelsDir: panels}))
	defer srv.Close()

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if p := os.Getenv("SEPIPE_DASHBOARD_SHOT"); p != "" {
		shot = p
	}
	dom := browse(t, bin, srv.URL+"/", shot)
	if !strings.Contains(dom, `data-ready="true"`) {
		t.Fatalf("the page did not finish loading:\n%.2000s", dom)
	}
	got := panelsIn(dom)
	builtin, err := dashboard.Panels("")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range builtin {
		m, ok := got[p.Name]
		switch {
		case !ok:
			t.Errorf("panel %s is not on the page", p.Name)
		case m["data-state"] != "ok":
			t.Errorf("panel %s: state %q", p.Name, m["data-state"])
		case m["data-marks"] == "" || m["data-marks"] == "0":
			t.Errorf("panel %s drew nothing (rows %s)", p.Name, m["data-rows"])
		}
	}
	if m := got["course_categories"]; m["data-state"] != "ok" || m["data-marks"] == "0" {
		t.Errorf("the user's own panel did not draw: %v", m)
	}
	if m := got["broken"]; m["data-state"] != "error" || !strings.Contains(dom, "no_such_table") {
		t.Errorf("the broken panel does not show its error: %v", m)
	}
	if m := got["not-yaml"]; m["data-state"] != "error" {
		t.Errorf("the unparsable panel file does not show an error: %v", m)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Errorf("no screenshot at %s: %v", shot, err)
	}

	want := sqlHeadline(t, out, "")
	if h := headline(t, dom); fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("headline numbers %v, SQL says %v", h, want)
	}
	// A team filter, as the page's form sets it.
	team := "Mid-Market"
	fdom := browse(t, bin, srv.URL+"/?team="+url.QueryEscape(team), "")
	wantF := sqlHeadline(t, out, team)
	if h := headline(t, fdom); fmt.Sprint(h) != fmt.Sprint(wantF) {
		t.Errorf("headline numbers for team %s: %v, SQL says %v", team, h, wantF)
	}
	if wantF["assignments"] >= want["assignments"] || wantF["assignments"] == 0 {
		t.Errorf("the team filter should narrow the numbers: %v of %v", wantF, want)
	}
}

// TestDashboardBesideASync: a sync commits while the dashboard is open and
// being queried; no request fails, and the dashboard then shows the run.
func TestDashboardBesideASync(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(60))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx := context.Background()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out}); err != nil {
		t.Fatal(err)
	}
	dash := httptest.NewServer(dashboard.Handler(dashboard.Config{Out: out}))
	defer dash.Close()
	runs := func() int {
		resp, err := http.Get(dash.URL + "/api/panels")
		if err != nil {
			t.Error(err)
			return -1
		}
		defer resp.Body.Close()
		var ans dashboard.Answer
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ans) != nil {
			t.Errorf("dashboard answered %s", resp.Status)
			return -1
		}
		for _, p := range ans.Panels {
			if p.Err != "" {
				t.Errorf("panel %s: %s", p.Name, p.Err)
			}
			if p.Name == "pipeline_health" {
				return len(p.Rows)
			}
		}
		return -1
	}
	if n := runs(); n != 1 {
		t.Fatalf("pipeline health shows %d runs, want 1", n)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var asked atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if n := runs(); n < 1 {
					return
				}
				asked.Add(1)
			}
		}()
	}
	srv.Service.Advance(24 * time.Hour)
	_, err = pipeline.Sync(ctx, c, pipeline.Config{Out: out, LockWait: -1})
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("a sync beside an open dashboard: %v", err)
	}
	if asked.Load() == 0 {
		t.Error("the dashboard was not queried during the sync")
	}
	if n := runs(); n != 2 {
		t.Errorf("after the sync the dashboard shows %d runs, want 2", n)
	}
}

// circleTitle is a line chart's point, as its tooltip names it.
var circleTitle = regexp.MustCompile(`<circle [^>]*><title>([^<]*)</title>`)

// panelPage draws one panel file (its YAML) over a warehouse made by setup,
// in a browser, and returns the page's DOM once it has loaded.
func panelPage(t *testing.T, bin, setup, panel string) string {
	t.Helper()
	out := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(setup); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	panels := t.TempDir()
	if err := os.WriteFile(filepath.Join(panels, "panel.yaml"), []byte(panel), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(dashboard.Handler(dashboard.Config{Out: out, PanelsDir: panels}))
	defer srv.Close()
	dom := browse(t, bin, srv.URL+"/", "")
	if !strings.Contains(dom, `data-ready="true"`) {
		t.Fatalf("the page did not finish loading:\n%.2000s", dom)
	}
	return dom
}

// TestDashboardLineChartOrdersNumbersByValue: a line chart whose x is a
// number (an hour of the day, a week) draws its points in the order of
// their values. The page sorted every x as text, so hours 0 to 23 ran
// 0, 1, 10, 11, ..., 19, 2, 20: a line zigzagging back and forth.
func TestDashboardLineChartOrdersNumbersByValue(t *testing.T) {
	bin := chromium(t)
	dom := panelPage(t, bin, `CREATE TABLE hits AS SELECT h AS hour, h * 10 AS n FROM range(24) t(h)`,
		"name: by_hour\ntitle: By hour\nkind: line\nx: hour\ny: [n]\nsql: SELECT hour, n FROM hits ORDER BY hour\n")
	i := strings.Index(dom, `data-name="by_hour"`)
	if i < 0 {
		t.Fatalf("panel by_hour is not on the page:\n%.2000s", dom)
	}
	var got []string
	for _, m := range circleTitle.FindAllStringSubmatch(dom[i:], -1) {
		got = append(got, m[1])
	}
	var want []string
	for h := range 24 {
		want = append(want, fmt.Sprintf("n · %d: %d", h, h*10))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the points, left to right:\n%s\nwant\n%s", strings.Join(got, "|"), strings.Join(want, "|"))
	}
}

// valueText is a headline number's column and the text the page shows.
var valueText = regexp.MustCompile(`<div class="value" data-column="([^"]+)" data-value="[^"]*">([^<]*)</div>`)

// TestDashboardShowsSmallNumbers: a number the SQL returns is shown, not
// rounded away. The page wrote every number with at most one decimal, so
// a completion rate of 0.043 read "0" and -0.02 "-0".
func TestDashboardShowsSmallNumbers(t *testing.T) {
	bin := chromium(t)
	dom := panelPage(t, bin, `CREATE TABLE t AS SELECT 1`, "name: rates\ntitle: Rates\nkind: number\n"+
		"sql: SELECT 0.043::DOUBLE AS rate, -0.02::DOUBLE AS change, 0 AS zero, 1234.56::DOUBLE AS big\n")
	got := map[string]string{}
	for _, m := range valueText.FindAllStringSubmatch(dom, -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{"rate": "0.043", "change": "-0.02", "zero": "0", "big": "1,234.6"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the page shows %v, want %v", got, want)
	}
}

// TestDashboardBarsOfSmallFractions: a bar chart of rates below 1 (0.004)
// draws bars in proportion, on ticks of that size. The scale took steps of
// at least 1 whenever the maximum was 4 or less, so bars of 0.004 were
// 0.1 % of the axis (invisible) and every tick read 0 to 1.
func TestDashboardBarsOfSmallFractions(t *testing.T) {
	bin := chromium(t)
	dom := panelPage(t, bin, `CREATE TABLE t AS SELECT 1`, "name: rates\ntitle: Rates\nkind: bar\nx: team\ny: [rate]\n"+
		"sql: SELECT * FROM (VALUES ('a', 0.004::DOUBLE), ('b', 0.002::DOUBLE)) v(team, rate)\n")
	widths := map[string]float64{}
	for _, m := range barWidth.FindAllStringSubmatch(dom, -1) {
		w, _ := strconv.ParseFloat(m[1], 64)
		widths[m[2]] = w
	}
	// The axis is 410 px wide: 0.004 on a scale to 0.004 fills it.
	if widths["0.004"] < 300 || widths["0.002"] < 150 || widths["0.002"] > widths["0.004"]*0.6 {
		t.Errorf("bar widths %v, want 0.004 across most of the axis and 0.002 half of it", widths)
	}
	var ticks []string
	for _, m := range tickText.FindAllStringSubmatch(dom, -1) {
		ticks = append(ticks, m[1])
	}
	if strings.Join(ticks, " ") != "0 0.001 0.002 0.003 0.004" {
		t.Errorf("ticks %q, want 0 to 0.004 in steps of 0.001", ticks)
	}
}

// TestDashboardCountAxesAreWhole: a chart of counts (whole numbers) has
// ticks of whole numbers: a maximum of 9 gave ticks of 2.5 (0, 2.5, 5,
// 7.5, 10) on a count of courses (issue 41).
func TestDashboardCountAxesAreWhole(t *testing.T) {
	bin := chromium(t)
	for _, max := range []int{3, 7, 9, 23, 90} {
		dom := panelPage(t, bin, `CREATE TABLE t AS SELECT 1`, fmt.Sprintf("name: counts\ntitle: Counts\nkind: bar\nx: team\ny: [n]\n"+
			"sql: SELECT * FROM (VALUES ('a', %d), ('b', 1)) v(team, n)\n", max))
		var ticks []string
		for _, m := range tickText.FindAllStringSubmatch(dom, -1) {
			ticks = append(ticks, m[1])
			if strings.ContainsAny(m[1], ".") {
				t.Errorf("maximum %d: a tick of %s on a count axis", max, m[1])
			}
		}
		if len(ticks) < 3 {
			t.Errorf("maximum %d: ticks %v", max, ticks)
		}
	}
}

var (
	barWidth = regexp.MustCompile(`<rect x="[^"]*" y="[^"]*" width="([^"]+)"[^>]*data-value="([^"]+)"`)
	tickText = regexp.MustCompile(`<text[^>]*class="tick"[^>]*>([^<]*)</text>`)
)

// TestDashboardCompletionsOverTimeOfAnIncrementalStream: userCourseProgress
// synced as sepipe.example.yaml configures it (merge, incremental on
// lastModifiedDate) holds in its history each day only the rows read that
// day. The dashboard's "Course completions over time" counted those rows
// as the day's state (a690765 mended the dbt model, not the panel): from
// the second day it showed only the completions among the rows changed
// since the watermark. Its per-day counts must equal those of the same
// tenant synced whole every day.
func TestDashboardCompletionsOverTimeOfAnIncrementalStream(t *testing.T) {
	if testing.Short() {
		t.Skip("syncs the fake over three days, twice")
	}
	ctx := context.Background()
	start := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	srv := servicetest.NewServer(servicetest.WithUsers(40), servicetest.WithNow(start))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	whole, incremental := t.TempDir(), t.TempDir()
	streams := map[string]pipeline.StreamConfig{"userCourseProgress": {Mode: load.Merge, PrimaryKey: []string{"userId", "courseId"},
		Cursor: "lastModifiedDate", Lookback: 2 * time.Hour}}
	for d := 0; d < 3; d++ {
		if d > 0 {
			srv.Service.Advance(24 * time.Hour)
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		for _, out := range []string{whole, incremental} {
			cfg := pipeline.Config{Out: out, Now: func() time.Time { return day }, Only: []string{"user", "userCourseProgress"}}
			if out == incremental {
				cfg.Streams = streams
			}
			if _, err := pipeline.Sync(ctx, c, cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	// panel answers completions_over_time on out; days is how many rows.
	panel := func(out string, f dashboard.Filters, days int) string {
		t.Helper()
		ans, err := dashboard.Query(ctx, dashboard.Config{Out: out}, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ans.Panels {
			if p.Name == "completions_over_time" {
				if p.Err != "" || p.Missing != "" || len(p.Rows) != days {
					t.Fatalf("%s: completions_over_time: error %q, missing %q, rows %v; want %d days", out, p.Err, p.Missing, p.Rows, days)
				}
				return fmt.Sprint(p.Rows)
			}
		}
		t.Fatal("no panel completions_over_time")
		return ""
	}
	// The whole range, and from the second day on (the state of a day
	// holds the rows read before the range begins).
	from := start.Add(24 * time.Hour).Format(time.DateOnly)
	for _, c := range []struct {
		f    dashboard.Filters
		days int
	}{{dashboard.Filters{}, 3}, {dashboard.Filters{From: from}, 2}} {
		if want, got := panel(whole, c.f, c.days), panel(incremental, c.f, c.days); got != want {
			t.Errorf("filters %+v: completions over time of the incremental stream %s, want %s (the same tenant synced whole)", c.f, got, want)
		}
	}
	// The stream synced whole is counted from its versions (issue 43): each
	// day as its rows in the history say, for every learner and for a
	// team's.
	team := queryOne(t, whole, `SELECT min(team) FROM "user"`)
	for _, f := range []dashboard.Filters{{}, {Team: team}} {
		where := ""
		if f.Team != "" {
			where = ` WHERE userId IN (SELECT userId FROM "user" WHERE team = ` + load.Literal(team) + `)`
		}
		rows := strings.Split(strings.TrimSpace(mustRun(t, "query", "--out", whole, "--format", "csv",
			`SELECT strftime(snapshot_date, '%Y-%m-%d'), count(*) FILTER (WHERE status = 'Completed'), count(*) FILTER (WHERE status = 'Overdue')
			FROM userCourseProgress_history`+where+` GROUP BY 1 ORDER BY 1`)), "\n")[1:]
		var want []string
		for _, r := range rows {
			want = append(want, "["+strings.ReplaceAll(r, ",", " ")+"]")
		}
		if got := panel(whole, f, 3); got != "["+strings.Join(want, " ")+"]" {
			t.Errorf("filters %+v: completions over time %s, want the history's %v", f, got, want)
		}
	}
}
