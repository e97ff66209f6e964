package dashboard

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/service"
)

// testWarehouse writes a small published warehouse (a "user" table with a
// team and a region) into a new output folder and returns the folder.
func testWarehouse(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE "user" AS SELECT 'u1' AS userId, 'Secret Team' AS team, 'EU' AS region`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writePanel(t *testing.T, dir, file, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// get serves one GET of path with the Host header host.
func get(h http.Handler, host, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
	req.Host = host
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestDashboardRefusesAForeignHost pins the defence against DNS
// rebinding: the dashboard listens without a login, and a page on another
// site that rebinds its own name to 127.0.0.1 sends that name as Host. A
// request whose Host is not localhost, an IP address, the listen
// address's host or an allowed host is answered 421 with the reason,
// never the page or a panel (found by review); the dashboard's own names
// are answered at any port.
func TestDashboardRefusesAForeignHost(t *testing.T) {
	h := Handler(Config{Out: testWarehouse(t), Addr: "dash.internal:8787", AllowedHosts: []string{"stats.example.com"}})
	for _, host := range []string{"attacker.example:8787", "attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io:8787",
		"dash.internal.attacker.example", "example.com", ""} {
		for _, path := range []string{"/api/panels", "/", "/app.js"} {
			rec := get(h, host, path)
			if rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421", path, host, rec.Code)
			}
			if b := rec.Body.String(); strings.Contains(b, "Secret Team") || strings.Contains(b, "<html") || !strings.Contains(b, "allowed-hosts") {
				t.Errorf("GET %s with Host %q answered:\n%.300s", path, host, b)
			}
		}
	}
	for _, host := range []string{"localhost", "localhost:8787", "LOCALHOST.:8787", "127.0.0.1", "127.0.0.1:8787", "[::1]:8787", "[::1]",
		"192.0.2.7:8787", "dash.internal:8787", "Dash.Internal", "stats.example.com", "stats.example.com:443"} {
		rec := get(h, host, "/api/panels")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Secret Team") {
			t.Errorf("GET /api/panels with Host %q: %d %.300s", host, rec.Code, rec.Body)
		}
	}
}

// TestParseAllowedHosts pins what --allowed-hosts (dashboard.allowed_hosts)
// takes: host names and addresses without a port, comma-separated; a URL,
// a port, a pattern or a name with other characters is an error naming the
// entry.
func TestParseAllowedHosts(t *testing.T) {
	got, err := ParseAllowedHosts(" Dash.Example.COM., 10.0.0.5 ,[::1],,intranet")
	if err != nil {
		t.Fatal(err)
	}
	if want := "dash.example.com 10.0.0.5 ::1 intranet"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"https://dash.example.com", "dash.example.com:8787", "*.example.com", "dash example", "dash/x", "a..b", "-"} {
		if _, err := ParseAllowedHosts("ok.example," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}

// TestPanelValuesOfEveryType pins what the page receives of each DuckDB
// type a panel's SQL may return: numbers as numbers (DECIMAL too), NaN as
// null, days and timestamps as before, and INTERVAL, UUID, TIME and the
// nested types as query.ValueText writes them (a duration such as
// finished_at - started_at as "01:30:00"), never Go's own syntax or raw
// bytes (found by review).
func TestPanelValuesOfEveryType(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"true", "true"},
		{"-1::TINYINT", "-1"},
		{"42::INTEGER", "42"},
		{"(-9223372036854775808)::BIGINT", "-9223372036854775808"},
		{"sum(x) FILTER (WHERE true)", "6"},                                            // HUGEINT
		{"170141183460469231731687303715884105727::HUGEINT", "1.7014118346046923e+38"}, // a JavaScript number
		{"18446744073709551615::UBIGINT", "18446744073709551615"},
		{"1.5::FLOAT", "1.5"},
		{"0.1::DOUBLE", "0.1"},
		{"'NaN'::DOUBLE", "null"},
		{"1.25::DECIMAL(18,3)", "1.25"},
		{"'Secret Team'", `"Secret Team"`},
		{"'x'::ENUM('x', 'y')", `"x"`},
		{"'x'::BLOB", `"x"`},
		{"'101'::BIT", `"101"`},
		{"DATE '2026-01-02'", `"2026-01-02"`},
		{"TIME '00:00:00'", `"00:00:00"`},
		{"TIME '10:30:00'", `"10:30:00"`},
		{"TIMETZ '10:30:00+05:30'", `"10:30:00+05:30"`},
		{"TIMESTAMP '2026-01-02 03:04:05'", `"2026-01-02T03:04:05Z"`},
		{"TIMESTAMPTZ '2026-01-02 00:00:00+00'", `"2026-01-02"`},
		{"TIMESTAMPTZ '2026-01-01 10:30:00+00' - TIMESTAMPTZ '2026-01-01 09:00:00+00'", `"01:30:00"`},
		{"INTERVAL '1 day 2 hours'", `"1 day 02:00:00"`},
		{"INTERVAL 3 MONTH", `"3 months"`},
		{"'00000000-0000-0000-0000-000000000001'::UUID", `"00000000-0000-0000-0000-000000000001"`},
		{`'{"a": [1, 2]}'::JSON`, `"{\"a\":[1,2]}"`},
		{"['a', 'b']", `"[\"a\",\"b\"]"`},
		{"[INTERVAL 90 MINUTE]::INTERVAL[1]", `"[\"01:30:00\"]"`},
		{"{'t': TIME '10:30:00', 'n': 1}", `"{\"t\":\"10:30:00\",\"n\":1}"`},
		{"MAP {'k': '00000000-0000-0000-0000-000000000001'::UUID}", `"{\"k\":\"00000000-0000-0000-0000-000000000001\"}"`},
		{"union_value(k := INTERVAL 90 MINUTE)::UNION(k INTERVAL, s VARCHAR)", `"01:30:00"`},
		{"NULL::INTEGER", "null"},
	}
	out, dir := testWarehouse(t), t.TempDir()
	var cols []string
	for i, c := range cases {
		cols = append(cols, fmt.Sprintf("%s AS c%d", c.expr, i))
	}
	writePanel(t, dir, "types.yaml", "name: types\ntitle: Values of every type\nkind: table\nsql: |\n  SELECT "+
		strings.Join(cols, ",\n    ")+"\n  FROM (VALUES (1), (2), (3)) t(x)\n")
	rec := get(Handler(Config{Out: out, PanelsDir: dir}), "127.0.0.1:8787", "/api/panels")
	var ans Answer
	dec := json.NewDecoder(rec.Body)
	dec.UseNumber()
	if err := dec.Decode(&ans); err != nil {
		t.Fatalf("%d: %v", rec.Code, err)
	}
	i := slices.IndexFunc(ans.Panels, func(p Result) bool { return p.Name == "types" })
	if i < 0 || ans.Panels[i].Err != "" || len(ans.Panels[i].Rows) != 1 {
		t.Fatalf("panel types: %+v", ans.Panels)
	}
	for j, c := range cases {
		if got, _ := json.Marshal(ans.Panels[i].Rows[0][j]); string(got) != c.want {
			t.Errorf("%s: the page gets %s, want %s", c.expr, got, c.want)
		}
	}
}

// TestPanelFileMistakesAreErrors pins check() and Panels on settings the
// page would drop silently (found by review): a series with more than one
// y (a line per value of the series draws one y), a series on a bar
// chart, and two user files with one name (the first vanished); each is
// an error naming the file and the key, the duplicate both files. A user
// file still replaces a built-in panel by its name.
func TestPanelFileMistakesAreErrors(t *testing.T) {
	dir := t.TempDir()
	writePanel(t, dir, "a_series_two_y.yaml", `name: series_two_y
title: Two y with a series
kind: line
x: day
y: [views, shares]
series: type
sql: SELECT 1 AS day, 'a' AS type, 1 AS views, 2 AS shares
`)
	writePanel(t, dir, "b_series_bar.yaml", `name: series_bar
title: A bar chart with a series
kind: bar
x: team
y: [n]
series: region
sql: SELECT 'a' AS team, 'b' AS region, 1 AS n
`)
	writePanel(t, dir, "c_first.yaml", "name: twice\ntitle: First\nkind: table\nsql: SELECT 1 AS one\n")
	writePanel(t, dir, "d_second.yaml", "name: twice\ntitle: Second\nkind: table\nsql: SELECT 2 AS two\n")
	writePanel(t, dir, "e_headline.yaml", "name: headline\ntitle: Mine\nkind: table\nsql: SELECT 1 AS one\n")
	writePanel(t, dir, "f_series_line.yaml", "name: series_line\ntitle: Fine\nkind: line\nx: day\ny: [n]\nseries: type\nsql: SELECT 1 AS day, 'a' AS type, 1 AS n\n")
	panels, err := Panels(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"a_series_two_y.yaml": {"a_series_two_y.yaml", `series "type" needs exactly one y`, "views, shares"},
		"b_series_bar.yaml":   {"b_series_bar.yaml", `series "region": only a line chart`, "kind bar"},
		"c_first.yaml":        {"c_first.yaml", `name "twice" is also the name of ` + filepath.Join(dir, "d_second.yaml")},
		"d_second.yaml":       {"d_second.yaml", `name "twice" is also the name of ` + filepath.Join(dir, "c_first.yaml")},
		"e_headline.yaml":     nil,
		"f_series_line.yaml":  nil,
	}
	seen := map[string]bool{}
	for _, p := range panels {
		if p.Name == "headline" && p.Source != filepath.Join(dir, "e_headline.yaml") {
			t.Errorf("panel headline from %s: the user's file did not replace the built-in", p.Source)
		}
		if !strings.HasPrefix(p.Source, dir) {
			continue
		}
		file := filepath.Base(p.Source)
		seen[file] = true
		if want[file] == nil && p.Err != "" {
			t.Errorf("%s: %s", file, p.Err)
		}
		for _, w := range want[file] {
			if !strings.Contains(p.Err, w) {
				t.Errorf("%s: error %q lacks %q", file, p.Err, w)
			}
		}
	}
	for file := range want {
		if !seen[file] {
			t.Errorf("%s vanished: panels from %v", file, seen)
		}
	}
}

// TestQueryAppliesConfigDefaults pins Query, exported, to the defaults
// Config documents, as Handler applies them (withDefaults): with a zero
// Config, QueryTimeout 30 s (not a zero timeout failing every panel at
// once) and a Logger that discards (not a panic on the first panel that
// fails; found by review).
func TestQueryAppliesConfigDefaults(t *testing.T) {
	out, dir := testWarehouse(t), t.TempDir()
	writePanel(t, dir, "ok.yaml", "name: ok\ntitle: Fine\nkind: table\nsql: SELECT team FROM \"user\"\n")
	writePanel(t, dir, "broken.yaml", "name: broken\ntitle: Broken\nkind: table\nsql: SELECT * FROM no_such_table\n")
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Query panicked on a failed panel: %v", r)
		}
	}()
	ans, err := Query(context.Background(), Config{Out: out, PanelsDir: dir}, Filters{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, p := range ans.Panels {
		got[p.Name] = p
	}
	if p := got["ok"]; p.Err != "" || len(p.Rows) != 1 {
		t.Errorf("panel ok: %q, rows %v", p.Err, p.Rows)
	}
	if p := got["broken"]; !strings.Contains(p.Err, "no_such_table") {
		t.Errorf("panel broken: error %q, want one naming no_such_table", p.Err)
	}
}

// A panel whose SQL returns two columns of one name (SELECT * over a
// join) gets them named apart, status and status_1, so its y can name
// either (by name, the first one always won).
func TestPanelColumnsOfOneNameAreNamedApart(t *testing.T) {
	out, dir := testWarehouse(t), t.TempDir()
	writePanel(t, dir, "dup.yaml", "name: dup\ntitle: Two columns of one name\nkind: bar\nx: status\ny: [status_1]\n"+
		"sql: SELECT 'a' AS status, 2 AS status\n")
	rec := get(Handler(Config{Out: out, PanelsDir: dir}), "127.0.0.1:8787", "/api/panels")
	var ans Answer
	if err := json.NewDecoder(rec.Body).Decode(&ans); err != nil {
		t.Fatalf("%d: %v", rec.Code, err)
	}
	i := slices.IndexFunc(ans.Panels, func(p Result) bool { return p.Name == "dup" })
	if i < 0 || ans.Panels[i].Err != "" || !slices.Equal(ans.Panels[i].Columns, []string{"status", "status_1"}) {
		t.Fatalf("panel dup: %+v", ans.Panels[i:i+1])
	}
}

// TestPanelDaysAreUTCInAnyTimeZone: the built-in panels count an event on
// the UTC day of its time, and the pipeline's runs start at their UTC
// time, whatever the machine's time zone, as every other value the page
// gets is UTC (and the dbt marts' days are). Run in a child under
// TZ=Asia/Tokyo and TZ=America/Los_Angeles: the read-only connection took
// DuckDB's default, the machine's zone, so an event at 20:00Z on 2 January
// counted on 3 January in Tokyo, a date filter of 2 January dropped it,
// and a run started at 20:00Z showed as 05:00.
func TestPanelDaysAreUTCInAnyTimeZone(t *testing.T) {
	if os.Getenv("SEPIPE_TZ_CHILD") == "" {
		for _, tz := range []string{"Asia/Tokyo", "America/Los_Angeles"} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPanelDaysAreUTCInAnyTimeZone$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SEPIPE_TZ_CHILD=1", "TZ="+tz)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("under TZ=%s: %v\n%s", tz, err, out)
			}
		}
		return
	}
	out := testWarehouse(t)
	db, err := sql.Open("duckdb", filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE events (id VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, time TIMESTAMPTZ, received_at TIMESTAMPTZ NOT NULL, subscription VARCHAR, raw JSON NOT NULL)`,
		`INSERT INTO events VALUES ('e1', 'COURSE_COMPLETED', '2026-01-02 20:00:00+00', '2026-01-02 20:00:01+00', NULL, '{}'),
			('e2', 'COURSE_COMPLETED', '2026-01-02 03:00:00+00', '2026-01-02 03:00:01+00', NULL, '{}')`,
		`CREATE TABLE _sepipe_runs (run_id VARCHAR, started_at TIMESTAMPTZ, status VARCHAR, error VARCHAR)`,
		`CREATE TABLE _sepipe_run_objects (run_id VARCHAR, rows BIGINT, rejected_rows BIGINT, status VARCHAR)`,
		`INSERT INTO _sepipe_runs VALUES ('r1', '2026-01-02 20:00:00+00', 'ok', NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rec := get(Handler(Config{Out: out}), "127.0.0.1:8787", "/api/panels?from=2026-01-02&to=2026-01-02")
	var ans Answer
	if err := json.NewDecoder(rec.Body).Decode(&ans); err != nil {
		t.Fatalf("%d: %v", rec.Code, err)
	}
	got := map[string]Result{}
	for _, p := range ans.Panels {
		got[p.Name] = p
	}
	if p := got["webhook_events"]; p.Err != "" || fmt.Sprint(p.Rows) != "[[2026-01-02 COURSE_COMPLETED 2]]" {
		t.Errorf("TZ=%s: webhook_events on 2026-01-02 (UTC): %v %s, want both events on that day", os.Getenv("TZ"), p.Rows, p.Err)
	}
	if p := got["pipeline_health"]; p.Err != "" || len(p.Rows) != 1 || p.Rows[0][0] != "2026-01-02 20:00" {
		t.Errorf("TZ=%s: pipeline_health: %v %s, want the run started 2026-01-02 20:00 (UTC)", os.Getenv("TZ"), p.Rows, p.Err)
	}
}

// TestBuiltinPanelsBeforeTheFirstSync: on the warehouse sepipe listen
// publishes before any sync ran (events and sepipe's bookkeeping, no
// stream's table), every built-in panel draws or says it has no data yet;
// none fails. Each built-in panel but webhook_events failed with DuckDB's
// "Table with name userCourseProgress does not exist", seven red errors on
// a fresh install (its requires named only events).
func TestBuiltinPanelsBeforeTheFirstSync(t *testing.T) {
	ctx := context.Background()
	lake := load.Lake{Root: t.TempDir()}
	ev := service.Event{ID: "e1", Type: "COURSE_COMPLETED", Raw: []byte(`{"id":"e1","type":"COURSE_COMPLETED"}`),
		Time: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), ReceivedAt: time.Date(2026, 1, 2, 3, 0, 1, 0, time.UTC)}
	if _, err := load.LoadEvents(ctx, lake, []service.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if err := load.PublishState(ctx, lake); err != nil {
		t.Fatal(err)
	}
	ans, err := Query(ctx, Config{Out: lake.Root}, Filters{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ans.Panels {
		if p.Err != "" {
			t.Errorf("panel %s fails before the first sync: %s", p.Name, p.Err)
		}
		if p.Name == "webhook_events" && (p.Missing != "" || len(p.Rows) != 1) {
			t.Errorf("panel webhook_events: missing %q, rows %v; want the event", p.Missing, p.Rows)
		}
	}
}

// TestFilterThatIsNotUTF8IsABadRequest: a team or region filter whose
// bytes are not UTF-8 (?team=%FF) is the request's fault: 400 naming the
// filter. It reached DuckDB, whose "Invalid unicode" failed the whole
// dashboard with a 500.
func TestFilterThatIsNotUTF8IsABadRequest(t *testing.T) {
	h := Handler(Config{Out: testWarehouse(t)})
	for _, q := range []string{"team=%FF", "region=%C3%28"} {
		rec := get(h, "127.0.0.1", "/api/panels?"+q)
		name, _, _ := strings.Cut(q, "=")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "filter "+name) {
			t.Errorf("?%s: %d %s, want 400 naming the filter", q, rec.Code, rec.Body)
		}
	}
}

// TestConcurrentPageLoadsAreBounded: each answer opens the warehouse in a
// DuckDB of its own (every processor, most of the memory); many viewers
// refreshing at once opened as many. Eight requests for a slow panel, at
// once: the warehouse file is never open more than maxLoads times in this
// process (counted in /proc/self/fd), and every request is answered.
func TestConcurrentPageLoadsAreBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count open files in")
	}
	out := testWarehouse(t)
	panels := t.TempDir()
	writePanel(t, panels, "slow.yaml", "name: slow\ntitle: Slow\nkind: number\n"+
		"sql: SELECT count(*) AS n FROM range(150000000) t(i) WHERE i % 7 = 3\n")
	h := Handler(Config{Out: out, PanelsDir: panels})
	path, err := filepath.EvalSymlinks(filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fds, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
				n++
			}
		}
		return n
	}
	const requests = 8
	codes := make(chan int, requests)
	for range requests {
		go func() { codes <- get(h, "localhost", "/api/panels").Code }()
	}
	most, answered := 0, 0
	for answered < requests {
		select {
		case code := <-codes:
			if code != http.StatusOK {
				t.Errorf("a request answered %d", code)
			}
			answered++
		case <-time.After(5 * time.Millisecond):
			most = max(most, open())
		}
	}
	if most == 0 {
		t.Fatal("the warehouse was never seen open: the panel is too fast to count loads")
	}
	if most > maxLoads {
		t.Errorf("the warehouse was open %d times at once, want at most %d", most, maxLoads)
	}
}

// TestClientsThatNeverReadHoldNoOneUp: two (here four) clients that ask
// for a large answer and never read it took both load slots for ever, and
// every other viewer waited (issue 40: no write deadline, the slot held
// while writing, answers bounded in rows but not bytes). Now the slot is
// free once the answer is computed, the answer is bounded in bytes (each
// wide panel says it was cut, and why), its writing has a deadline that
// cuts the clients that never read, and another viewer is answered
// meanwhile.
func TestClientsThatNeverReadHoldNoOneUp(t *testing.T) {
	const bound = 8 << 20 // maxAnswerBytes
	out, dir := testWarehouse(t), t.TempDir()
	for i := range 10 {
		writePanel(t, dir, fmt.Sprintf("wide%d.yaml", i), fmt.Sprintf("name: wide%d\ntitle: Wide rows\nkind: table\nsql: |\n  SELECT i, repeat('x', 20000) || i AS wide FROM range(1000) t(i)\n", i))
	}
	srv := httptest.NewUnstartedServer(Handler(Config{Out: out, PanelsDir: dir, WriteTimeout: 3 * time.Second}))
	// The server's side of each connection: closed by the server once its
	// answer's write deadline passed (what the kernel still holds of the
	// answer is no longer the dashboard's).
	var mu sync.Mutex
	closed := map[string]bool{}
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			mu.Lock()
			closed[c.RemoteAddr().String()] = true
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	var stuck []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(1024)
		if _, err := io.WriteString(c, "GET /api/panels HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		stuck = append(stuck, c)
	}
	time.Sleep(500 * time.Millisecond) // they ask first

	client := &http.Client{Timeout: 60 * time.Second}
	for i := range 3 {
		res, err := client.Get(srv.URL + "/api/panels")
		if err != nil {
			t.Fatalf("viewer %d while 4 clients never read: %v", i, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("viewer %d: %d %v %.300s", i, res.StatusCode, err, body)
		}
		if len(body) > bound+64<<10 {
			t.Errorf("an answer of %d bytes, past the bound of %d", len(body), bound)
		}
		var ans struct {
			Panels []struct {
				Name        string  `json:"name"`
				Err         string  `json:"error"`
				Rows        [][]any `json:"rows"`
				Truncated   bool    `json:"truncated"`
				TruncatedBy string  `json:"truncated_by"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatal(err)
		}
		cut := 0
		for _, p := range ans.Panels {
			if !strings.HasPrefix(p.Name, "wide") {
				continue
			}
			if p.Err != "" || !p.Truncated || p.TruncatedBy != "bytes" {
				t.Errorf("panel %s: error %q, truncated %v by %q, %d rows", p.Name, p.Err, p.Truncated, p.TruncatedBy, len(p.Rows))
			}
			if len(p.Rows) < 1000 {
				cut++
			}
		}
		if cut != 10 {
			t.Errorf("%d of the 10 wide panels were cut", cut)
		}
	}
	// The clients that never read are cut at the write deadline: the
	// server closes their connections.
	for i, c := range stuck {
		for wait := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			mu.Lock()
			done := closed[c.LocalAddr().String()]
			mu.Unlock()
			if done {
				break
			}
			if time.Now().After(wait) {
				t.Errorf("client %d that never read is still served 30 s after its write deadline", i)
				break
			}
		}
	}
}
