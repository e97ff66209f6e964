package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/longtest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// oauthEnv points the CLI at the fake's OAuth client, with no static
// access token.
func oauthEnv(t *testing.T, srv *servicetest.Server) {
	t.Setenv("SEPIPE_ACCESS_TOKEN", "")
	t.Setenv("SEPIPE_OAUTH_CLIENT_ID", srv.Service.ClientID())
	t.Setenv("SEPIPE_OAUTH_CLIENT_SECRET", srv.Service.ClientSecret())
	t.Setenv("SEPIPE_REFRESH_TOKEN", srv.Service.RefreshToken())
	t.Setenv("SEPIPE_API_TOKEN", srv.Service.APIToken())
}

// TestThirtyNightsUnattended runs 30 nightly syncs of a tenant whose
// access tokens live an hour and whose refresh tokens rotate, its clock a
// day further each night, one night slow enough to outlive its access
// token, with nobody at the keyboard. Night 30's warehouse equals a clean
// sync of night 30; the token store is 0600; no token or secret is in any
// debug log line.
func TestThirtyNightsUnattended(t *testing.T) {
	longtest.Skip(t, "30 syncs")
	const users, seed = 25, 11
	srv := servicetest.NewServer(servicetest.WithUsers(users), servicetest.WithSeed(seed), servicetest.WithTokenTTL(time.Hour))
	defer srv.Close()
	oauthEnv(t, srv)
	out := t.TempDir()
	store := filepath.Join(out, ".sepipe", "token.json")
	secrets := map[string]bool{srv.Service.ClientSecret(): true, srv.Service.RefreshToken(): true}
	var logs strings.Builder
	args := []string{"sync", "-q", "--base-url", srv.URL, "--out", out, "--log-level", "debug", "--page-size", "60", "--rate", "1000"}
	for night := 1; night <= 30; night++ {
		if night > 1 {
			srv.Service.Advance(24 * time.Hour)
		}
		before := srv.Service.OAuth().Refreshes
		if night == 15 {
			// A slow night: tokens live half a second, every request
			// waits a tenth, so the sync outlives its access tokens.
			srv.Service.SetTokenTTL(500 * time.Millisecond)
			srv.Service.SetLatency(100 * time.Millisecond)
		}
		code, stdout, stderr := runCLI(t, args...)
		if night == 15 {
			srv.Service.SetTokenTTL(0)
			srv.Service.SetLatency(0)
			if n := srv.Service.OAuth().Refreshes - before; n < 2 {
				t.Errorf("night 15 refreshed %d times; it was meant to outlive its access token", n)
			}
		}
		logs.WriteString(stderr)
		if code != exitOK {
			t.Fatalf("night %d: exit %d\n%s\n%s", night, code, stdout, stderr)
		}
		b, err := os.ReadFile(store)
		if err != nil {
			t.Fatalf("night %d: token store: %v", night, err)
		}
		var st extract.StoredToken
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		secrets[st.AccessToken], secrets[st.RefreshToken] = true, true
	}
	if s := srv.Service.OAuth(); s.Replays != 0 || s.Refused != 0 || s.Refreshes < 30 {
		t.Errorf("token endpoint: %+v; want a refresh a night at least and nothing refused", s)
	}
	fi, err := os.Stat(store)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token store mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatal("no debug log lines were written")
	}
	for s := range secrets {
		if s != "" && strings.Contains(logs.String(), s) {
			t.Errorf("a token or secret appears in the debug log")
		}
	}
	if strings.Contains(string(mustRun(t, "auth", "status", "--base-url", srv.URL, "--out", out)), "none") {
		t.Error("auth status finds no token after 30 nights")
	}

	// A clean sync of night 30, with a static token.
	clean := servicetest.NewServer(servicetest.WithUsers(users), servicetest.WithSeed(seed))
	defer clean.Close()
	clean.Service.Advance(29 * 24 * time.Hour)
	t.Setenv("SEPIPE_OAUTH_CLIENT_ID", "")
	t.Setenv("SEPIPE_OAUTH_CLIENT_SECRET", "")
	t.Setenv("SEPIPE_REFRESH_TOKEN", "")
	t.Setenv("SEPIPE_ACCESS_TOKEN", clean.Service.AccessToken())
	t.Setenv("SEPIPE_API_TOKEN", clean.Service.APIToken())
	want := t.TempDir()
	mustRun(t, "sync", "-q", "--base-url", clean.URL, "--out", want, "--page-size", "60", "--rate", "1000")
	sameTables(t, want, out, "themes", "assets", "themes_history", "assets_history") // themes and assets hold URLs on each fake's own address
}

// sameTables compares every table of two warehouses of replace streams row
// for row (sepipe's bookkeeping aside; of the countOnly tables only the
// counts; of a history its latest day; the versions through their
// history, as their runs and ids differ).
func sameTables(t *testing.T, want, got string, countOnly ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, a := range [][2]string{{want, "ref"}, {got, "got"}} {
		if _, err := db.Exec("ATTACH " + load.Literal(filepath.Join(a[0], "warehouse.duckdb")) + " AS " + a[1] + " (READ_ONLY)"); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_catalog = 'ref' AND NOT starts_with(table_name, '_sepipe')
		AND NOT suffix(table_name, '_versions') ORDER BY 1`) // compared through the history views
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("reference warehouse has only %v", tables)
	}
	one := func(q string) int64 {
		var n int64
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// A history table holds a day per calendar day the syncs ran on (the
	// machine's clock, not the fake's): its latest day is compared, without
	// the date, so that runs either side of midnight compare too.
	latest := func(db, tb string) string {
		rel := db + ".main." + load.Ident(tb)
		if !strings.HasSuffix(tb, "_history") {
			return rel
		}
		return "(SELECT * EXCLUDE (snapshot_date) FROM " + rel + " WHERE snapshot_date = (SELECT max(snapshot_date) FROM " + rel + "))"
	}
	for _, tb := range tables {
		a, b := latest("ref", tb), latest("got", tb)
		if na, nb := one("SELECT count(*) FROM "+a), one("SELECT count(*) FROM "+b); na != nb {
			t.Errorf("%s: %d rows, want %d", tb, nb, na)
		}
		skip := false
		for _, c := range countOnly {
			skip = skip || c == tb
		}
		if skip {
			continue
		}
		for _, pair := range [][2]string{{a, b}, {b, a}} {
			if n := one(fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s)", pair[0], pair[1])); n != 0 {
				t.Errorf("%s: %d rows of %s are not in the other", tb, n, pair[0])
			}
		}
	}
}

// TestLimitedTokenCheckAndSync: a tenant without the Coach licence. check
// says reporting is not entitled and why; sync commits the other
// interfaces, shows reporting as skipped and exits 3.
func TestLimitedTokenCheckAndSync(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(10))
	defer srv.Close()
	t.Setenv("SEPIPE_ACCESS_TOKEN", srv.Service.LimitedToken())
	t.Setenv("SEPIPE_API_TOKEN", srv.Service.APIToken())
	for _, k := range []string{"SEPIPE_OAUTH_CLIENT_ID", "SEPIPE_OAUTH_CLIENT_SECRET", "SEPIPE_REFRESH_TOKEN"} {
		t.Setenv(k, "")
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--base-url", srv.URL)
	if code != exitOK {
		t.Fatalf("check: exit %d (not entitled is not a failure)\n%s\n%s", code, stdout, stderr)
	}
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "reporting") {
			line = l
		}
	}
	if !strings.Contains(line, "not entitled") || !strings.Contains(line, "Coach license") {
		t.Errorf("check does not say why reporting is unavailable:\n%s", stdout)
	}
	for _, iface := range []string{"v3 ", "v4 ", "webhooks "} {
		if !strings.Contains(stdout, iface) || strings.Contains(stdout, iface+" failed") {
			t.Errorf("check of %s:\n%s", iface, stdout)
		}
	}
	code, stdout, stderr = runCLI(t, "discover", "--base-url", srv.URL)
	if code != exitOK || !strings.Contains(stdout, "(not entitled)") || !strings.Contains(stdout, "assets") {
		t.Errorf("discover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "plan", "--base-url", srv.URL, "--out", out)
	if code != exitOK || !strings.Contains(stdout, "SKIPPED (not entitled)") || !strings.Contains(stdout, "would skip (reporting)") || !strings.Contains(stdout, "assets") {
		t.Errorf("plan: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "sync", "-q", "--base-url", srv.URL, "--out", out)
	if code != exitPartial {
		t.Fatalf("sync: exit %d, want %d\n%s\n%s", code, exitPartial, stdout, stderr)
	}
	if s := summaryCell(t, stdout, "(reporting)", "STATUS"); s != "skipped" {
		t.Errorf("reporting shown as %q", s)
	}
	for _, c := range []string{"assets", "themes", "webhook_subscriptions", "webhook_delivery_logs"} {
		if s := summaryCell(t, stdout, c, "STATUS"); s != "ok" {
			t.Errorf("%s shown as %q", c, s)
		}
	}
	if n := strings.Count(stderr, "reporting interface not available"); n != 1 {
		t.Errorf("%d warnings about reporting, want one:\n%s", n, stderr)
	}
	if got := queryOne(t, out, "SELECT count(*) FROM assets"); got == "0" {
		t.Error("no assets were committed")
	}
	if got := queryOne(t, out, "SELECT status || ':' || (reason LIKE '%Coach%') FROM _sepipe_run_objects WHERE object = '(reporting)'"); got != "skipped:true" {
		t.Errorf("_sepipe_run_objects says %q", got)
	}
}

// TestConfigRefusesWhatWouldGoQuietlyWrong: an unset ${VAR} in a value is
// exit 2 naming the file, line, key and variable (never an empty string);
// an unset signing secret entry is an error, not a silent drop; a
// credential shorter than 8 characters is refused.
func TestConfigRefusesWhatWouldGoQuietlyWrong(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("SEPIPE_TEST_UNSET_DATA", "")
	os.Unsetenv("SEPIPE_TEST_UNSET_DATA")
	t.Setenv("SEPIPE_TEST_UNSET_SECRET", "")
	os.Unsetenv("SEPIPE_TEST_UNSET_SECRET")
	for _, k := range []string{"SEPIPE_OAUTH_CLIENT_ID", "SEPIPE_OAUTH_CLIENT_SECRET", "SEPIPE_REFRESH_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("SEPIPE_ACCESS_TOKEN", srv.Service.AccessToken())
	cfg := filepath.Join(dir, "sepipe.yaml")
	write := func(body string) {
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("service:\n  tenant_url: " + srv.URL + "\noutput:\n  dir: ${SEPIPE_TEST_UNSET_DATA}/sepipe\n")
	code, _, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitUsage || !strings.Contains(errOut, "sepipe.yaml:4: output.dir: ${SEPIPE_TEST_UNSET_DATA} is not set") {
		t.Errorf("unset variable in output.dir: exit %d\n%s", code, errOut)
	}
	write("service:\n  tenant_url: " + srv.URL + "\nwebhooks:\n  secrets:\n    - ${SEPIPE_TEST_UNSET_SECRET}\n")
	code, _, errOut = runCLI(t, "listen", "--config", cfg, "--addr", "127.0.0.1:0", "--out", dir)
	if code != exitUsage || !strings.Contains(errOut, "webhooks.secrets[0]: ${SEPIPE_TEST_UNSET_SECRET} is not set") {
		t.Errorf("unset signing secret: exit %d\n%s", code, errOut)
	}
	t.Setenv("SEPIPE_ACCESS_TOKEN", "t")
	code, _, errOut = runCLI(t, "sync", "--base-url", srv.URL, "--out", dir)
	if code != exitUsage || !strings.Contains(errOut, "${SEPIPE_ACCESS_TOKEN} is 1 characters long") {
		t.Errorf("one-character token: exit %d\n%s", code, errOut)
	}
}

// TestAuthStatusWithoutACredential: auth status with neither a static
// token nor an OAuth client names the variable to export, as a command to
// type (it said "export ${SEPIPE_ACCESS_TOKEN}", which exports nothing).
func TestAuthStatusWithoutACredential(t *testing.T) {
	for _, v := range []string{"SEPIPE_ACCESS_TOKEN", "SEPIPE_OAUTH_CLIENT_ID", "SEPIPE_OAUTH_CLIENT_SECRET", "SEPIPE_REFRESH_TOKEN"} {
		t.Setenv(v, "")
	}
	code, _, errOut := runCLI(t, "auth", "status", "--base-url", "https://acme.example.com", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "export SEPIPE_ACCESS_TOKEN ") {
		t.Errorf("auth status without a credential: exit %d, want %d and 'export SEPIPE_ACCESS_TOKEN'\n%s", code, exitUsage, errOut)
	}
}

// TestAuthLoginSeedsTheStore: auth login reads a refresh token from
// standard input, exchanges it, and a sync then runs from the store with
// no refresh token in the environment; auth status never prints a token.
func TestAuthLoginSeedsTheStore(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	oauthEnv(t, srv)
	t.Setenv("SEPIPE_REFRESH_TOKEN", "")
	out := t.TempDir()
	if code, _, errOut := runCLI(t, "sync", "--base-url", srv.URL, "--out", out); code != exitUsage || !strings.Contains(errOut, "sepipe auth login") ||
		!strings.Contains(errOut, "export SEPIPE_REFRESH_TOKEN") { // a command to type, not "export ${SEPIPE_REFRESH_TOKEN}"
		t.Fatalf("sync without any refresh token: exit %d\n%s", code, errOut)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(srv.Service.RefreshToken() + "\n")
	w.Close()
	stdin := os.Stdin
	os.Stdin = r
	code, stdout, errOut := runCLI(t, "auth", "login", "--base-url", srv.URL, "--out", out)
	os.Stdin = stdin
	if code != exitOK || !strings.Contains(stdout, "token.json") {
		t.Fatalf("auth login: exit %d\n%s\n%s", code, stdout, errOut)
	}
	status := mustRun(t, "auth", "status", "--base-url", srv.URL, "--out", out)
	if !strings.Contains(status, "chain started by login") || !strings.Contains(status, "valid until") {
		t.Errorf("auth status:\n%s", status)
	}
	b, _ := os.ReadFile(filepath.Join(out, ".sepipe", "token.json"))
	var st extract.StoredToken
	json.Unmarshal(b, &st)
	for _, secret := range []string{st.AccessToken, st.RefreshToken, srv.Service.RefreshToken(), srv.Service.ClientSecret()} {
		if strings.Contains(status, secret) {
			t.Error("auth status printed a token or secret")
		}
	}
	mustRun(t, "sync", "-q", "--base-url", srv.URL, "--out", out)
	if s := srv.Service.OAuth(); s.Refreshes != 1 || s.Refused != 0 {
		t.Errorf("token endpoint %+v: the sync should have used the stored access token", s)
	}
}

// TestScheduleContinuesAfterTheQuotaResets: a tenant whose request quota
// is smaller than one sync. The scheduled run commits what the quota
// covers and defers the rest; the scheduler continues them after the
// quota's window resets, without a second schedule and without a 429, and
// the warehouse then holds every stream, reading none twice and none the
// configuration excludes. A plain sync says when to run again.
func TestScheduleContinuesAfterTheQuotaResets(t *testing.T) {
	longtest.Skip(t, "waits out quota windows")
	if now := time.Now().UTC(); now.Add(2*time.Minute).Day() != now.Day() {
		t.Skip("a continuation after midnight (UTC) starts a new snapshot day")
	}
	const users, seed = 40, 7
	config := func(url, out string) string {
		p := filepath.Join(t.TempDir(), "sepipe.yaml")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(`service:
  tenant_url: %s
credentials:
  access_token: ${SEPIPE_ACCESS_TOKEN}
  api_token: ${SEPIPE_API_TOKEN}
exclude: [path]
requests:
  page_size: 100
  max_wait: 300ms
output:
  dir: %s
`, url, out)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clean := servicetest.NewServer(servicetest.WithUsers(users), servicetest.WithSeed(seed))
	defer clean.Close()
	setEnv(t, clean)
	if code, _, errOut := runCLI(t, "sync", "-q", "--config", config(clean.URL, t.TempDir())); code != exitOK {
		t.Fatalf("a sync without a quota: exit %d\n%s", code, errOut)
	}
	quota := int(clean.Service.Requests()) * 2 / 3

	srv := servicetest.NewServer(servicetest.WithUsers(users), servicetest.WithSeed(seed), servicetest.WithQuota(quota, 3*time.Second))
	defer srv.Close()
	setEnv(t, srv)
	out := t.TempDir()
	cfg := config(srv.URL, out)
	code, stdout, stderr := runCLI(t, "sync", "-q", "--config", cfg)
	if code != exitPartial || !strings.Contains(stdout, "deferred") {
		t.Fatalf("a sync under a quota of %d requests: exit %d, want %d with deferred streams\n%s\n%s", quota, code, exitPartial, stdout, stderr)
	}
	if !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("the partial sync does not say when to run again:\n%s", stderr)
	}

	time.Sleep(3 * time.Second) // the window the sync used resets
	out = t.TempDir()
	cfg = config(srv.URL, out)
	// A chain that never ended would stop here, after its current run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var so, se bytes.Buffer
	code = run(ctx, []string{"schedule", "--config", cfg, "--cron", "* * * * * *", "--max-runs", "1"}, &so, &se)
	stderr = se.String()
	if ctx.Err() != nil {
		t.Fatalf("the schedule was still continuing after a minute:\n%s", stderr)
	}
	if code != exitOK {
		t.Fatalf("schedule: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "run continuing the streams the quota deferred") {
		t.Errorf("no continuation logged:\n%s", stderr)
	}
	if got := queryOne(t, out, "SELECT string_agg(status, '|' ORDER BY started_at) FROM _sepipe_runs"); !strings.HasPrefix(got, "partial|") || !strings.HasSuffix(got, "|succeeded") {
		t.Errorf("runs %s, want the scheduled run partial and its last continuation succeeded", got)
	}
	if got := queryOne(t, out, "SELECT count(DISTINCT object) FILTER (WHERE status = 'committed') || '/' || count(DISTINCT object) FROM _sepipe_run_objects"); got == "" || strings.Split(got, "/")[0] != strings.Split(got, "/")[1] {
		t.Errorf("committed/read streams over the chain: %s, want every stream committed", got)
	}
	// The configuration's exclude is a standing selection: each
	// continuation reads only what the quota deferred, never path, and
	// never again what committed.
	if got := queryOne(t, out, `SELECT count(*) FROM _sepipe_run_objects o JOIN _sepipe_runs r USING (run_id)
		WHERE o.object = 'path' OR r.started_at > (SELECT min(started_at) FROM _sepipe_runs) AND EXISTS (
			SELECT 1 FROM _sepipe_run_objects c JOIN _sepipe_runs cr USING (run_id)
			WHERE c.object = o.object AND c.status = 'committed' AND cr.started_at < r.started_at)`); got != "0" {
		t.Errorf("%s streams read again after they committed, or excluded ones read", got)
	}
	if n := srv.Service.QuotaRefused(); n != 0 {
		t.Errorf("%d requests were answered 429 past the announced quota", n)
	}
}

// TestQuotaHint: a run the quota deferred says when to run again; one
// whose stream no window can hold says what to change instead; a reset
// already past says to run now.
func TestQuotaHint(t *testing.T) {
	run := func(errs ...*extract.QuotaError) error {
		re := &pipeline.RunError{RunID: "r", Partial: true}
		for i, e := range errs {
			re.Deferred = append(re.Deferred, &pipeline.ObjectError{Object: fmt.Sprint("s\x1b", i), Step: "read", Err: e})
		}
		return re
	}
	in := func(d time.Duration) time.Time { return time.Now().Add(d).Truncate(time.Second) }
	soon, later := in(time.Hour), in(2*time.Hour)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{run(&extract.QuotaError{Reset: soon, Err: extract.ErrQuotaExhausted}, &extract.QuotaError{Reset: later, Err: extract.ErrQuotaExhausted}),
			"resets at " + later.UTC().Format(time.RFC3339) + ": a sync after it continues"},
		{run(&extract.QuotaError{Reset: soon, Err: extract.ErrQuotaExhausted}, &extract.QuotaError{Reset: soon, Exceeds: true, Err: extract.ErrQuotaExhausted}),
			`s\x1b1 need more requests than the service's quota allows in a whole window: raise requests.max_wait above the window's length and the read waits for the quota to reset; the service's request quota resets at ` + soon.UTC().Format(time.RFC3339)},
		{run(&extract.QuotaError{Reset: soon, Exceeds: true, Err: extract.ErrQuotaExhausted}),
			`s\x1b0 need more requests than the service's quota allows in a whole window: raise requests.max_wait above the window's length and the read waits for the quota to reset`},
		{run(&extract.QuotaError{Reset: in(-time.Minute), Err: extract.ErrQuotaExhausted}), "has reset since: a sync now continues"},
		{&pipeline.RunError{RunID: "r", Partial: true, Failed: []*pipeline.ObjectError{{Object: "user", Err: extract.ErrRetriesExhausted}}}, ""},
	} {
		if got := quotaHint(tc.err); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%v:\nhint %q, want it to hold %q", tc.err, got, tc.want)
		}
	}
}

// TestPlanSaysWhatTheQuotaAllows: against a service that announces a
// request quota, plan says how many windows the sync needs and names the
// stream no single window can hold; the sync then says so too, instead of
// promising a later run.
func TestPlanSaysWhatTheQuotaAllows(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(40), servicetest.WithQuota(30, time.Hour))
	defer srv.Close()
	setEnv(t, srv)
	code, stdout, stderr := runCLI(t, "plan", "--base-url", srv.URL, "--out", t.TempDir(), "--page-size", "10", "--objects", "course,userCourseProgress")
	if code != exitOK {
		t.Fatalf("plan: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "the service announces a quota of 30 requests a window") || !strings.Contains(stdout, "windows; streams the quota does not cover are deferred") {
		t.Errorf("plan does not say the sync needs several windows:\n%s", stdout)
	}
	if !strings.Contains(stdout, "userCourseProgress need more requests than a whole window allows") || strings.Contains(stdout, "course, userCourseProgress need") {
		t.Errorf("plan does not name (only) the stream no window holds:\n%s", stdout)
	}
	// The sync commits course and does not promise a later run for the other.
	code, stdout, stderr = runCLI(t, "sync", "-q", "--base-url", srv.URL, "--out", t.TempDir(), "--page-size", "10", "--objects", "course,userCourseProgress")
	if code != exitPartial {
		t.Fatalf("sync: exit %d, want %d\n%s\n%s", code, exitPartial, stdout, stderr)
	}
	if !strings.Contains(stderr, "need more requests than the service's quota allows in a whole window, so no run reads them within one") ||
		strings.Contains(stderr, "the next run of the day continues them") ||
		!strings.Contains(stderr, "hint: userCourseProgress need more requests than the service's quota allows in a whole window: raise requests.max_wait") {
		t.Errorf("the sync's warning or hint does not say no window holds userCourseProgress:\n%s", stderr)
	}
}

// TestSignalAfterCommitPublishes: a SIGTERM that arrives once the run has
// committed does not stop its publish: the published warehouse has the
// run, and the exit code is not 1, which says nothing was committed (the
// sync exited 1 and left warehouse.duckdb a night behind; found by
// review).
func TestSignalAfterCommitPublishes(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	out := t.TempDir()
	mustRun(t, "sync", "-q", "--base-url", srv.URL, "--out", out, "--objects", "course")
	before := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	faults.Set(func(name string) {
		if name == string(faults.Committed) {
			cancel() // what main's signal.NotifyContext does on SIGTERM
		}
	})
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"sync", "-q", "--base-url", srv.URL, "--out", out, "--objects", "course"}, &stdout, &stderr)
	faults.Set(nil)
	if code == exitFailed {
		t.Errorf("a run that committed exited %d:\n%s", code, stderr.String())
	}
	if after := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs"); after == before {
		t.Errorf("the committed run is not in the published warehouse (%s runs before and after)", before)
	}
}

// TestErrorIsOneLine: an error quoting the service is one line on stderr,
// its newlines escaped: the service's text printed lines of its own, a
// forged "sepipe:" or "hint:" among them (found by review).
func TestErrorIsOneLine(t *testing.T) {
	svc := servicetest.New(servicetest.WithUsers(5))
	defer svc.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects") {
			w.WriteHeader(400)
			io.WriteString(w, `{"response":{"code":2001,"name":"InvalidParameterError","message":"bad\nhint: all good, nothing to see\nsepipe: forged"}}`)
			return
		}
		svc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv("SEPIPE_ACCESS_TOKEN", svc.AccessToken())
	code, _, errOut := runCLI(t, "sync", "-q", "--base-url", srv.URL, "--out", t.TempDir(), "--log-format", "json")
	var plain []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(l, "{") {
			plain = append(plain, l)
		}
	}
	if code == exitOK || len(plain) > 2 || strings.Contains(errOut, "\nsepipe: forged") || strings.Contains(errOut, "\nhint: all good") {
		t.Errorf("exit %d; the error printed %d plain lines, some from the service:\n%q", code, len(plain), plain)
	}
}

// TestCheckUsesTheSyncsTokenStore: sepipe check (and discover) take
// --out, and refresh the OAuth token through that folder's store, as the
// sync does: without it check replayed the refresh token the sync had
// spent and failed (invalid_grant) while the sync worked (found by review).
func TestCheckUsesTheSyncsTokenStore(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	oauthEnv(t, srv)
	out := t.TempDir()
	mustRun(t, "sync", "-q", "--base-url", srv.URL, "--out", out, "--objects", "course")
	for _, cmd := range []string{"check", "discover"} {
		if code, stdout, errOut := runCLI(t, cmd, "--base-url", srv.URL, "--out", out); code != exitOK {
			t.Errorf("%s on the sync's folder: exit %d\n%s\n%s", cmd, code, stdout, errOut)
		}
	}
	mustRun(t, "sync", "-q", "--base-url", srv.URL, "--out", out, "--objects", "course")
	if s := srv.Service.OAuth(); s.Refused != 0 {
		t.Errorf("token endpoint %+v: a refresh token was replayed", s)
	}
}

// TestQuotaSpentBeforeTheRunListsIsDeferred: a sync whose first request,
// the list of report objects, meets a quota spent until long after
// requests.max_wait (an hourly quota another client used) read nothing and
// lost nothing: it exits 3 with the time to run again, as a run whose
// streams the quota deferred, not 1 as a failure (found by review).
func TestQuotaSpentBeforeTheRunListsIsDeferred(t *testing.T) {
	_, cfg, _ := quotaTenant(t, 2)
	for range 3 { // the quota and one more
		runCLI(t, "discover", "--config", cfg)
	}
	code, _, stderr := runCLI(t, "sync", "--config", cfg, "--quiet")
	if code != exitPartial {
		t.Fatalf("a sync whose quota is spent for the hour: exit %d, want %d\n%s", code, exitPartial, stderr)
	}
	if !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("the hint does not say when to run again:\n%s", stderr)
	}
}

// TestQuotaSpentByTheRunsOwnListIsDeferred: a sync that finds one request
// left in an hourly quota spends it listing the objects to choose what to
// read, and then meets the quota spent when the run lists them again. It
// read nothing and lost nothing, as a sync that met the quota spent before
// its first list (exit 3, the hint saying when to run again, and a
// schedule running it again after the reset); it exited 1 as a failure,
// without the hint (found by review: a week of nights against sepipe
// simulate --quota, a sync right after three plans).
func TestQuotaSpentByTheRunsOwnListIsDeferred(t *testing.T) {
	srv, cfg, _ := quotaTenant(t, 3)
	for range 2 { // all but one request of the quota
		req, err := http.NewRequest(http.MethodGet, srv.URL+servicetest.BasePath+"/objects", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("spending the quota: %s", resp.Status)
		}
	}
	code, _, stderr := runCLI(t, "sync", "--config", cfg, "--quiet")
	if code != exitPartial {
		t.Fatalf("a sync whose own list spent the quota for the hour: exit %d, want %d\n%s", code, exitPartial, stderr)
	}
	if !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("the hint does not say when to run again:\n%s", stderr)
	}
}

// TestEveryStreamDeferredIsPartial: a sync of one stream that the hourly
// quota defers (the quota covers the lists, not the stream) read nothing
// and lost nothing: exit 3 with the hint, as every other run the quota
// stops; it exited 1, "run ... failed: deferred object", as a failure
// (found by review: a week of nights against sepipe simulate --quota).
func TestEveryStreamDeferredIsPartial(t *testing.T) {
	_, cfg, out := quotaTenant(t, 2)
	code, stdout, stderr := runCLI(t, "sync", "--config", cfg, "--quiet", "--objects", "course")
	if code != exitPartial {
		t.Fatalf("a sync whose every stream the quota deferred: exit %d, want %d\n%s\n%s", code, exitPartial, stdout, stderr)
	}
	if !strings.Contains(stderr, `deferred object "course"`) || strings.Contains(stderr, " failed") || !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("the error does not say the stream was deferred, not failed, and when to run again:\n%s", stderr)
	}
	// The run's record says so too (the pipeline's health panel reads it).
	if got := queryOne(t, out, "SELECT status FROM _sepipe_runs"); got != "partial" {
		t.Errorf("_sepipe_runs.status %q, want partial (nothing failed)", got)
	}
}

// TestSyncRefusesAWarehouseItDidNotWrite: an output folder whose
// warehouse.duckdb is no DuckDB database (an empty file) fails the sync
// with an error naming the file, a hint saying what to do, and nothing
// left in .sepipe: it printed DuckDB's message about sepipe's own
// temporary copy, with no hint, and left the copy (found by review).
func TestSyncRefusesAWarehouseItDidNotWrite(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "warehouse.duckdb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "sync", "--base-url", srv.URL, "--out", out, "--quiet")
	if code != exitFailed || !strings.Contains(stderr, filepath.Join(out, "warehouse.duckdb")+": not a DuckDB database file") ||
		!strings.Contains(stderr, "hint: sepipe writes warehouse.duckdb itself") || strings.Contains(stderr, ".adopt") {
		t.Errorf("exit %d, want %d naming the file, with a hint and no temporary copy:\n%s", code, exitFailed, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".sepipe", "state.duckdb*")); len(left) > 0 {
		t.Errorf("the refused adoption left %v", left)
	}
}

// TestDescribeRefusedForOneStreamFailsThatStreamAlone: the config's checks
// against the live describe (primary key, cursor, filters) are the
// config's faults; a describe the service refuses is not, and fails that
// stream alone while the others commit (exit 3). It failed the whole run
// before any data moved ("describe userCourseProgress: ...", exit 1).
func TestDescribeRefusedForOneStreamFailsThatStreamAlone(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects/userCourseProgress/describe") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"response":{"code":3004,"name":"ResourceNotFoundError","message":"no such object"}}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, front.URL, out, "")
	code, _, stderr := runCLI(t, "sync", "--config", cfg, "--quiet", "--objects", "course,userCourseProgress")
	if code != exitPartial || !strings.Contains(stderr, "userCourseProgress") {
		t.Fatalf("sync with one object's describe refused: exit %d, want %d naming the stream\n%s", code, exitPartial, stderr)
	}
	if n := queryOne(t, out, "SELECT count(*) FROM course"); n == "0" || n == "" {
		t.Errorf("course has %q rows: the other stream did not commit", n)
	}
}

// Publish and query with --out need nothing of ./sepipe.yaml: they
// must not need ./sepipe.yaml to be loadable (a ${VAR} only the sync's
// environment sets, or any other fault of the sync's config).
func TestQueryAndPublishWithOutNeedNoConfig(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	data := t.TempDir()
	mustRun(t, "sync", "--quiet", "--base-url", srv.URL, "--objects", "course", "--out", data)
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "sepipe.yaml"), []byte("service:\n  tenant_url: ${SEPIPE_TEST_UNSET_OUTDIR}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	if code, out, errOut := runCLI(t, "query", "--out", data, "SELECT count(*) FROM course"); code != exitOK {
		t.Errorf("query --out DIR beside a sync config whose variable is unset: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "publish", "--out", data); code != exitOK {
		t.Errorf("publish --out DIR beside a sync config whose variable is unset: exit %d\n%s%s", code, out, errOut)
	}
}

// A sync checks only a configured stream's filters against the describe
// before the run: checking its primary key and cursor there too cost
// every such stream a second describe request a run (counted against the
// service's quota, and not in plan's request count; found by review).
func TestSyncDescribesAConfiguredStreamOnce(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	var describes atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/userCourseProgress/describe") {
			describes.Add(1)
		}
		srv.Service.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	dir := t.TempDir()
	writeConfig(t, dir, proxy.URL, filepath.Join(dir, "out"), "")
	mustRun(t, "sync", "--quiet", "--config", filepath.Join(dir, "sepipe.yaml"), "--objects", "userCourseProgress")
	if n := describes.Load(); n != 1 {
		t.Errorf("one sync of userCourseProgress described it %d times, want 1", n)
	}
}

// webhooks with --base-url needs no ./sepipe.yaml:
// beside a config with tenants (or one whose variables the shell lacks)
// 'sepipe webhooks list --base-url URL' exited 2 asking for --tenant,
// though the URL and SEPIPE_API_TOKEN name everything it needs.
func TestWebhooksWithBaseURLBesideATenantsConfig(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	cwd := t.TempDir()
	doc := "tenants:\n  acme:\n    service:\n      tenant_url: https://acme.example.com\n  globex:\n    service:\n      tenant_url: https://globex.example.com\n"
	if err := os.WriteFile(filepath.Join(cwd, "sepipe.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	if code, out, errOut := runCLI(t, "webhooks", "list", "--base-url", srv.URL); code != exitOK {
		t.Errorf("webhooks list --base-url beside a tenants config: exit %d\n%s%s", code, out, errOut)
	}
}

// A sync leaves a configured stream's cursor and primary key to that
// stream: checked against the live describe before the run, a misfit
// refused the whole config (exit 2). A describe the service changed (a field dropped from
// one object) is not the config's fault: before, that stream alone failed
// (exit 3) and the others committed; now nothing syncs.
func TestADescribeChangeOfOneObjectFailsThatStreamAlone(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/userCourseProgress/describe") {
			srv.Service.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		srv.Service.ServeHTTP(rec, r)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("describe: %v", err)
		}
		fields, _ := body["fields"].([]any)
		var kept []any
		for _, f := range fields {
			if m, _ := f.(map[string]any); m["id"] != "lastModifiedDate" {
				kept = append(kept, f)
			}
		}
		body["fields"] = kept
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer proxy.Close()
	dir := t.TempDir()
	writeConfig(t, dir, proxy.URL, filepath.Join(dir, "out"), "")
	code, out, errOut := runCLI(t, "sync", "--quiet", "--config", filepath.Join(dir, "sepipe.yaml"), "--objects", "course,userCourseProgress")
	if code != exitPartial {
		t.Errorf("sync with userCourseProgress's cursor field gone from its describe: exit %d, want %d (course committed, userCourseProgress failed)\n%s%s", code, exitPartial, out, errOut)
	}
}

// TestRefusedRefreshAfterA401HintsAuthLogin: a nightly sync with the OAuth
// client whose stored access token the service answers 401 (revoked, or the
// tenant's grant withdrawn) and whose refresh token it then refuses
// (invalid_grant) is mended by sepipe auth login, as docs/cli.md says; its
// hint said "check SEPIPE_ACCESS_TOKEN", a variable such a setup does not
// use (found by review: a week of nights against sepipe simulate, the fake
// restarted under the chain).
func TestRefusedRefreshAfterA401HintsAuthLogin(t *testing.T) {
	old := servicetest.NewServer(servicetest.WithUsers(5))
	defer old.Close()
	oauthEnv(t, old)
	out := t.TempDir()
	mustRun(t, "sync", "-q", "--base-url", old.URL, "--out", out, "--objects", "course")

	// Another tenant instance: it knows neither the stored access token
	// nor the stored refresh token.
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	code, stdout, errOut := runCLI(t, "sync", "-q", "--base-url", srv.URL, "--out", out, "--objects", "course")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailed, stdout, errOut)
	}
	if !strings.Contains(errOut, "invalid_grant") || !strings.Contains(errOut, "\nhint: ") {
		t.Fatalf("the error does not say the refresh token was refused:\n%s", errOut)
	}
	if !strings.Contains(errOut, "sepipe auth login") || strings.Contains(errOut, "check SEPIPE_ACCESS_TOKEN") {
		t.Errorf("the hint does not point at sepipe auth login:\n%s", errOut)
	}
}

// TestRefreshOutageAfterA401SaysTheEndpointFailed: a sync whose stored
// access token is answered 401 and whose token endpoint then fails (503,
// each time it is asked) hinted "check SEPIPE_ACCESS_TOKEN", a variable an
// OAuth setup does not use, about a token nothing is wrong with. The hint
// now says the token endpoint failed and that a later run tries again.
func TestRefreshOutageAfterA401SaysTheEndpointFailed(t *testing.T) {
	old := servicetest.NewServer(servicetest.WithUsers(5))
	defer old.Close()
	oauthEnv(t, old)
	out := t.TempDir()
	mustRun(t, "sync", "-q", "--base-url", old.URL, "--out", out, "--objects", "course")

	// Another tenant instance (it knows no stored token) whose token
	// endpoint is down.
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var asked atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == extract.OAuthTokenPath {
			asked.Add(1)
			w.Header().Set("Retry-After", "0")
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer down.Close()
	code, stdout, errOut := runCLI(t, "sync", "-q", "--base-url", down.URL, "--out", out, "--objects", "course")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailed, stdout, errOut)
	}
	if asked.Load() < 2 {
		t.Errorf("the token endpoint was asked %d times, want it asked again after a 503", asked.Load())
	}
	if !strings.Contains(errOut, "503") || strings.Contains(errOut, "check SEPIPE_ACCESS_TOKEN") || !strings.Contains(errOut, "hint: the token endpoint failed") {
		t.Errorf("the hint does not say the token endpoint failed:\n%s", errOut)
	}
}

// TestPlanUnderASpentQuota: a plan spends requests too (lists, describes,
// a page per report object), and so does check. One that ran out of quota partway marked the
// streams it could not look at WOULD FAIL and exited 1, though a sync
// would defer them; one that met the quota spent before it could list
// exited 1 where a sync exits 3. Both now exit 3: the streams are shown
// as not planned (quota spent) and the hint says when the quota resets.
// A check under the spent quota called every credential failed (exit 1):
// it now calls them unknown and exits 3.
func TestPlanUnderASpentQuota(t *testing.T) {
	_, cfg, _ := quotaTenant(t, 8)
	code, stdout, stderr := runCLI(t, "plan", "--config", cfg)
	if code != exitPartial {
		t.Fatalf("a plan the quota cut short: exit %d, want %d\n%s\n%s", code, exitPartial, stdout, stderr)
	}
	if !strings.Contains(stdout, "UNKNOWN (quota spent)") || strings.Contains(stdout, "WOULD FAIL") || !strings.Contains(stdout, "a sync now would defer it") {
		t.Errorf("the plan does not say which streams the quota kept it from:\n%s", stdout)
	}
	if !strings.Contains(stderr, "could not be planned") || !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("the error does not say why, or when to plan again:\n%s", stderr)
	}
	code, stdout, stderr = runCLI(t, "plan", "--config", cfg)
	if code != exitPartial || !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("a plan that met the quota spent before it could list: exit %d, want %d with the reset\n%s\n%s", code, exitPartial, stdout, stderr)
	}
	// check alike: a credential it could not try is not a failed one.
	code, stdout, stderr = runCLI(t, "check", "--config", cfg)
	if code != exitPartial || !strings.Contains(stdout, "unknown (quota spent)") || strings.Contains(stdout, " failed ") ||
		!strings.Contains(stderr, "could not run") || !strings.Contains(stderr, "hint: the service's request quota resets at ") {
		t.Errorf("a check under the spent quota: exit %d, want %d, its checks unknown, not failed, and the reset\n%s\n%s", code, exitPartial, stdout, stderr)
	}
}

// TestPlanWhoseOwnListMeetsTheQuota: a plan lists the report objects
// twice, as a sync does (selectRun, then pipeline.Plan). A quota the first
// list spent stopped the second: plan exited 1 with "request quota
// exhausted" and no hint, where a sync of the same tenant exits 3 and says
// when the quota resets (TestPlanUnderASpentQuota covered only a quota
// already spent before the first list, or one spent by the describes).
func TestPlanWhoseOwnListMeetsTheQuota(t *testing.T) {
	for n := 1; n <= 3; n++ {
		srv := servicetest.NewServer(servicetest.WithUsers(5), servicetest.WithQuota(n, time.Hour))
		setEnv(t, srv)
		dir := t.TempDir()
		cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "")
		code, stdout, stderr := runCLI(t, "plan", "--config", cfg)
		if code != exitPartial || !strings.Contains(stderr, "hint: the service's request quota resets at ") {
			t.Errorf("quota of %d requests: plan exit %d, want %d with when the quota resets\n%s\n%s", n, code, exitPartial, stdout, stderr)
		}
		srv.Close()
	}
}

// quotaTenant starts a fake tenant of 5 users whose service allows n
// requests an hour, points the environment's tokens at it, and writes a
// config syncing it into out; the server closes with the test.
func quotaTenant(t *testing.T, n int) (srv *servicetest.Server, cfg, out string) {
	t.Helper()
	srv = servicetest.NewServer(servicetest.WithUsers(5), servicetest.WithQuota(n, time.Hour))
	t.Cleanup(srv.Close)
	setEnv(t, srv)
	dir := t.TempDir()
	out = filepath.Join(dir, "data")
	return srv, writeConfig(t, dir, srv.URL, out, ""), out
}
