package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/pipeline"
)

// userConfig is what a new user writes after reading docs/cli.md, pointed
// at the fake. %s: tenant URL, output folder; extra is appended.
const userConfig = `# sepipe.yaml
service:
  tenant_url: %s
credentials:
  access_token: ${SEPIPE_ACCESS_TOKEN}
  api_token: ${SEPIPE_API_TOKEN}
legacy:
  login_dir: demo
  username: admin
  password: ${SEPIPE_LEGACY_PASSWORD}
streams:
  userCourseProgress:
    mode: merge
    primary_key: [userId, courseId]
    cursor: lastModifiedDate
    lookback: 1h
  user:
    filters:
      - {field: status, operator: in, values: [Active, Inactive]}
requests:
  rate: 1000
  page_size: 100
output:
  dir: %s
%s`

func writeConfig(t *testing.T, dir, url, out, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "sepipe.yaml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(userConfig, url, out, extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func setEnv(t *testing.T, srv *servicetest.Server) {
	t.Setenv("SEPIPE_ACCESS_TOKEN", srv.Service.AccessToken())
	t.Setenv("SEPIPE_API_TOKEN", srv.Service.APIToken())
	t.Setenv("SEPIPE_LEGACY_PASSWORD", srv.Service.Password())
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("sepipe %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func queryOne(t *testing.T, out, q string) string {
	t.Helper()
	s := mustRun(t, "query", "--out", out, "--format", "csv", q)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// summaryCell returns a column of a stream's line in the summary table.
func summaryCell(t *testing.T, summary, stream, col string) string {
	t.Helper()
	var header []string
	for _, line := range strings.Split(summary, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "STREAM" {
			header = f
		}
		if len(f) > 0 && f[0] == stream && header != nil {
			for i, h := range header {
				if h == col && i < len(f) {
					return f[i]
				}
			}
		}
	}
	t.Fatalf("no %s of %s in:\n%s", col, stream, summary)
	return ""
}

// TestNewUserPath follows docs/cli.md: configure against the fake, check,
// plan, sync, query, discover, describe, schedule for two short intervals.
func TestNewUserPath(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(20))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, srv.URL, out, "")

	s := mustRun(t, "check", "--config", cfg)
	for _, iface := range []string{"reporting", "v3", "v4", "webhooks", "legacy"} {
		if !regexp.MustCompile(`(?m)^` + iface + `\s.*\sok\s`).MatchString(s) {
			t.Errorf("check: %s not ok:\n%s", iface, s)
		}
	}
	if strings.Contains(s, srv.Service.AccessToken()) || strings.Contains(s, srv.Service.Password()) {
		t.Errorf("check printed a secret:\n%s", s)
	}

	s = mustRun(t, "plan", "--config", cfg)
	if !strings.Contains(s, "userCourseProgress") || !strings.Contains(s, "new table") || !strings.Contains(s, "estimated requests") {
		t.Errorf("plan output:\n%s", s)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("plan created %s", out)
	}

	s = mustRun(t, "discover", "--config", cfg)
	for _, want := range []string{"userCourseProgress", "assets", "themes", "subscriptions"} {
		if !strings.Contains(s, want) {
			t.Errorf("discover lacks %q:\n%s", want, s)
		}
	}
	s = mustRun(t, "describe", "--config", cfg, "userCourseProgress")
	if !regexp.MustCompile(`lastModifiedDate\s+date\s+TIMESTAMP WITH TIME ZONE|lastModifiedDate\s+date\s+TIMESTAMPTZ`).MatchString(s) {
		t.Errorf("describe:\n%s", s)
	}

	s = mustRun(t, "sync", "--config", cfg)
	ucp := summaryCell(t, s, "userCourseProgress", "ROWS")
	if summaryCell(t, s, "userCourseProgress", "NEW") != ucp || summaryCell(t, s, "userCourseProgress", "MODE") != "merge" {
		t.Errorf("first sync: every row is new:\n%s", s)
	}
	if got := queryOne(t, out, "SELECT count(*) FROM userCourseProgress"); got != ucp {
		t.Errorf("table has %s rows, summary says %s", got, ucp)
	}
	// Nothing changed upstream: the incremental merge rereads its lookback
	// window and changes nothing.
	s = mustRun(t, "sync", "--config", cfg, "--quiet")
	if n := summaryCell(t, s, "userCourseProgress", "NEW"); n != "0" {
		t.Errorf("second sync, unchanged tenant: %s new rows:\n%s", n, s)
	}
	// The tenant moves on a day: learners progress; the merge brings the
	// changed rows and the summary counts them.
	srv.Service.Advance(24 * time.Hour)
	s = mustRun(t, "sync", "--config", cfg)
	if n := summaryCell(t, s, "userCourseProgress", "NEW"); n == "0" || n == "-" {
		t.Errorf("after a day: %s new rows:\n%s", n, s)
	}
	before := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'")

	code, stdout, errOut := runCLI(t, "schedule", "--config", cfg, "--cron", "*/1 * * * * *", "--time-zone", "Europe/Berlin", "--max-runs", "2")
	if code != exitOK {
		t.Fatalf("schedule exit %d\n%s\n%s", code, stdout, errOut)
	}
	if strings.Count(errOut, "next run") < 2 || !strings.Contains(errOut, "schedule stopped") {
		t.Errorf("schedule log:\n%s", errOut)
	}
	after := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'")
	var b, a int
	fmt.Sscan(before, &b)
	fmt.Sscan(after, &a)
	if a-b != 2 {
		t.Errorf("schedule recorded %d runs, want 2", a-b)
	}
}

// fileTree hashes every file under dir (the warehouse and the lake).
func fileTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, ".sepipe") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		out[p] = hex.EncodeToString(h[:])
		return nil
	})
	return out
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("files: %d before, %d after", len(before), len(after))
	}
	for f, h := range before {
		if after[f] != h {
			t.Errorf("%s changed", f)
		}
	}
}

// TestBadInputTable: each bad input gives its own one-line message, a
// hint, its exit code, and leaves the warehouse and the lake as they were.
func TestBadInputTable(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	good := writeConfig(t, dir, srv.URL, out, "")
	mustRun(t, "sync", "--config", good)
	tree := fileTree(t, out)
	notDir := filepath.Join(dir, "a-file")
	os.WriteFile(notDir, []byte("x"), 0o644)

	cases := []struct {
		name    string
		config  string // replaces the streams: section onwards when set
		extra   string // appended to the good config
		replace [2]string
		args    []string
		env     map[string]string
		code    int
		msg     string
		hint    string
	}{
		{name: "unknown key", extra: "colour: blue\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:25: colour: unknown key "colour" (want service, credentials`, hint: "sepipe.example.yaml"},
		{name: "unknown stream key", config: "streams:\n  user:\n    primary_keys: [userId]\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:13: streams.user.primary_keys: unknown key "primary_keys" (want mode, primary_key`},
		{name: "bad write mode", config: "streams:\n  userCourseProgress:\n    mode: upsert\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:13: streams.userCourseProgress.mode: unknown write mode "upsert" (want replace, append or merge)`},
		{name: "bad lookback", config: "streams:\n  userCourseProgress:\n    cursor: lastModifiedDate\n    lookback: soon\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:14: streams.userCourseProgress.lookback: bad duration "soon"`},
		{name: "not yaml", extra: "output:\n\tdir: x\n", args: []string{"sync"}, code: exitUsage, msg: "sepipe.yaml:26: not valid YAML"},
		{name: "unknown stream", config: "streams:\n  coarse:\n    mode: append\n", args: []string{"plan"}, code: exitUsage,
			msg: `sepipe.yaml:12: streams.coarse: unknown report object "coarse"`, hint: "sepipe discover"},
		{name: "unknown include", config: "include: [course, coarse]\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:11: include[1]: unknown report object "coarse"`, hint: "sepipe discover"},
		{name: "unknown object flag", args: []string{"sync", "--objects", "coarse"}, code: exitUsage,
			msg: `unknown report object "coarse"`, hint: "sepipe discover"},
		{name: "filter unknown field", config: "streams:\n  user:\n    filters:\n      - {field: regin, operator: eq, values: [EMEA]}\n", args: []string{"sync"}, code: exitUsage,
			msg: `sepipe.yaml:14: streams.user.filters[0]: bad filter: `, hint: "sepipe describe"},
		{name: "filter bad operator", config: "streams:\n  user:\n    filters:\n      - {field: status, operator: like, values: [x]}\n", args: []string{"plan"}, code: exitUsage,
			msg: `streams.user.filters[0].operator: unknown operator "like"`},
		{name: "filter bad option", config: "streams:\n  user:\n    filters:\n      - {field: status, operator: in, values: [Sleeping]}\n", args: []string{"sync"}, code: exitUsage,
			msg: `streams.user.filters[0]: bad filter`},
		{name: "bad cron flag", args: []string{"schedule", "--cron", "61 * * * *"}, code: exitUsage,
			msg: `--cron: bad cron expression "61 * * * *"`, hint: "02:00 every day"},
		{name: "bad cron in file", extra: "schedule:\n  cron: every night\n", args: []string{"schedule"}, code: exitUsage,
			msg: `sepipe.yaml:26: schedule.cron: bad cron expression "every night"`, hint: "02:00 every day"},
		{name: "bad time zone", extra: "schedule:\n  cron: '0 2 * * *'\n  time_zone: Mars/Olympus\n", args: []string{"schedule"}, code: exitUsage,
			msg: `sepipe.yaml:27: schedule.time_zone: unknown time zone "Mars/Olympus"`},
		{name: "bad retries", extra: "schedule:\n  cron: '0 2 * * *'\n  retries: -1\n", args: []string{"schedule"}, code: exitUsage,
			msg: `sepipe.yaml:27: schedule.retries: want 0 to 10, got -1`},
		{name: "bad retry delay", extra: "schedule:\n  cron: '0 2 * * *'\n  retry_delay: 10ms\n", args: []string{"schedule"}, code: exitUsage,
			msg: `sepipe.yaml:27: schedule.retry_delay: want at least 1s, got 10ms`},
		{name: "zero retry delay", extra: "schedule:\n  cron: '0 2 * * *'\n  retry_delay: 0s\n", args: []string{"schedule"}, code: exitUsage,
			msg: `sepipe.yaml:27: schedule.retry_delay: want at least 1s, got 0s`},
		{name: "auth takes no request flags", args: []string{"auth", "status", "--objects", "course"}, code: exitUsage,
			msg: `unknown flag: --objects`},
		{name: "bad retries flag", args: []string{"schedule", "--cron", "0 2 * * *", "--retries", "11"}, code: exitUsage,
			msg: `--retries: want 0 to 10, got 11`},
		{name: "bad retry delay flag", args: []string{"schedule", "--cron", "0 2 * * *", "--retry-delay", "soon"}, code: exitUsage,
			msg: `--retry-delay: want a duration of at least 1s (e.g. 10m), got "soon"`},
		{name: "missing config", args: []string{"sync", "--config", filepath.Join(dir, "nope.yaml")}, code: exitUsage,
			msg: "nope.yaml: no such file or directory"},
		{name: "config is a folder", args: []string{"sync", "--config", dir}, code: exitUsage, msg: "is a directory"},
		{name: "unset token variable", replace: [2]string{"${SEPIPE_ACCESS_TOKEN}", "${ACME_TOKEN_UNSET}"}, args: []string{"sync"}, code: exitUsage,
			msg: "sepipe.yaml:5: credentials.access_token: ${ACME_TOKEN_UNSET} is not set", hint: "export the variable"},
		{name: "wrong token", env: map[string]string{"SEPIPE_ACCESS_TOKEN": "wrong-token-123"}, args: []string{"sync"}, code: exitFailed,
			msg: "reporting access token", hint: "check SEPIPE_ACCESS_TOKEN"},
		{name: "wrong token check", env: map[string]string{"SEPIPE_ACCESS_TOKEN": "wrong-token-123", "SEPIPE_LEGACY_PASSWORD": "nope"}, args: []string{"check"}, code: exitFailed,
			msg: "some credentials failed: 4 of 5 checks"},
		{name: "unwritable output", args: []string{"sync", "--out", filepath.Join(notDir, "data")}, code: exitFailed,
			msg: notDir, hint: "output folder"},
		{name: "bad allowed host flag", args: []string{"dashboard", "--allowed-hosts", "ok.example,dash.example.com:8787"}, code: exitUsage,
			msg: `--allowed-hosts: allowed host "dash.example.com:8787": want a host name or address without a port`},
		{name: "bad allowed host in file", extra: "dashboard:\n  allowed_hosts: [https://dash.example.com]\n", args: []string{"dashboard"}, code: exitUsage,
			msg: `sepipe.yaml:26: dashboard.allowed_hosts[0]: allowed host "https://dash.example.com": want a host name or address, not a URL`},
		{name: "merge without key", config: "streams:\n  course:\n    mode: merge\n", args: []string{"sync"}, code: exitUsage,
			msg: "sepipe.yaml:12: streams.course.primary_key: write mode merge needs a primary key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg := good
			if tc.config != "" || tc.extra != "" || tc.replace[0] != "" {
				sub := t.TempDir()
				cfg = writeConfig(t, sub, srv.URL, out, tc.extra)
				if tc.config != "" {
					b, _ := os.ReadFile(cfg)
					s := string(b)
					i, j := strings.Index(s, "streams:"), strings.Index(s, "requests:")
					s = s[:i] + tc.config + s[j:]
					os.WriteFile(cfg, []byte(s), 0o644)
				}
				if tc.replace[0] != "" {
					b, _ := os.ReadFile(cfg)
					os.WriteFile(cfg, []byte(strings.Replace(string(b), tc.replace[0], tc.replace[1], 1)), 0o644)
				}
			}
			args := append([]string{}, tc.args...)
			if !strings.Contains(strings.Join(args, " "), "--config") {
				args = append(args, "--config", cfg)
			}
			code, stdout, errOut := runCLI(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, errOut)
			}
			first, _, _ := strings.Cut(errOut, "\n")
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut)
			}
			if tc.code == exitUsage && (!strings.HasPrefix(first, "sepipe: ") || !strings.Contains(first, tc.msg)) {
				t.Errorf("the fault is not one line: %q", first)
			}
			if _, h, _ := strings.Cut(errOut, "hint: "); tc.hint != "" && !strings.Contains(h, tc.hint) {
				t.Errorf("no hint %q:\n%s", tc.hint, errOut)
			}
			if strings.Contains(errOut+stdout, "wrong-token-123") {
				t.Errorf("the token was printed:\n%s%s", stdout, errOut)
			}
			sameTree(t, tree, fileTree(t, out))
		})
	}
}

func TestLiteralSecretIsWarnedNotPrinted(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "${SEPIPE_API_TOKEN}", srv.Service.APIToken(), 1)), 0o644)
	code, stdout, errOut := runCLI(t, "check", "--config", cfg)
	if code != exitOK {
		t.Fatalf("check: %d\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "sepipe.yaml:6: credentials.api_token holds a literal secret") {
		t.Errorf("no warning:\n%s", errOut)
	}
	if strings.Contains(stdout+errOut, srv.Service.APIToken()) {
		t.Errorf("the literal secret was printed:\n%s\n%s", stdout, errOut)
	}
}

// TestHelperHoldWarehouse is not a test: syncedAndHeld runs the test
// binary again with it, to hold a file in another process until its stdin
// closes: SEPIPE_TEST_HOLD_MODE "rw" opens the DuckDB file for writing (a
// tool without its read-only setting), "ro" read-only (a BI tool), "flock"
// takes the flock a sepipe process takes on .sepipe/state.lock.
func TestHelperHoldWarehouse(t *testing.T) {
	path := os.Getenv("SEPIPE_TEST_HOLD_WAREHOUSE")
	if path == "" {
		t.Skip("helper process only")
	}
	switch os.Getenv("SEPIPE_TEST_HOLD_MODE") {
	case "flock":
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
	default:
		dsn := path
		if os.Getenv("SEPIPE_TEST_HOLD_MODE") == "ro" {
			dsn += "?access_mode=read_only"
		}
		db, err := sql.Open("duckdb", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM _sepipe_runs").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
}

// syncedAndHeld syncs the fake once into a fresh folder, then has another
// process hold a file of it (see TestHelperHoldWarehouse). release lets it
// go.
func syncedAndHeld(t *testing.T, mode string) (srv *servicetest.Server, cfg, out string, release func()) {
	t.Helper()
	srv = servicetest.NewServer(servicetest.WithUsers(5))
	t.Cleanup(srv.Close)
	setEnv(t, srv)
	dir := t.TempDir()
	out = filepath.Join(dir, "data")
	cfg = writeConfig(t, dir, srv.URL, out, "")
	mustRun(t, "sync", "--config", cfg)

	path := filepath.Join(out, "warehouse.duckdb")
	if mode == "flock" {
		path = filepath.Join(out, ".sepipe", "state.lock")
	}
	return srv, cfg, out, holdFile(t, path, mode)
}

// holdFile has another process hold path (TestHelperHoldWarehouse: mode
// "ro" a DuckDB file read-only, "flock" a lock file, else a DuckDB file
// for writing) until the function it returns is called (or the test
// ends).
func holdFile(t *testing.T, path, mode string) (release func()) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperHoldWarehouse$", "-test.v")
	helper.Env = append(os.Environ(), "SEPIPE_TEST_HOLD_WAREHOUSE="+path, "SEPIPE_TEST_HOLD_MODE="+mode)
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { stdin.Close(); helper.Wait() }) }
	t.Cleanup(release)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "holding" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("helper ended before holding the warehouse")
		}
	case <-time.After(time.Minute):
		t.Fatal("helper never held the warehouse")
	}
	return release
}

// TestSyncBesideAReader: a BI tool holding the published warehouse
// read-only never fails a sync; a new connection sees the new run.
func TestSyncBesideAReader(t *testing.T) {
	srv, cfg, out, _ := syncedAndHeld(t, "ro")
	srv.Service.Advance(24 * time.Hour)
	code, _, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitOK {
		t.Fatalf("sync beside a reader: exit %d:\n%s", code, errOut)
	}
	if n := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'"); n != "2" {
		t.Errorf("a new connection sees %s runs, want 2", n)
	}
}

// TestUnpublishedRunStillNamesItsFailedStreams: a run that committed
// some streams, failed one, and could not publish (a writer holds the
// file) said only that it could not publish: the failed stream was
// named nowhere in the error, and a schedule neither retried nor
// continued it. The error now carries the run's own beside the publish's.
func TestUnpublishedRunStillNamesItsFailedStreams(t *testing.T) {
	_, cfg, _, release := syncedAndHeld(t, "rw")
	defer release()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "  user:\n    filters:", "  course:\n    mode: merge\n    primary_key: [nope]\n  user:\n    filters:", 1)
	if bad == string(b) {
		t.Fatal("the config has no user stream to put course before")
	}
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitPartial {
		t.Errorf("exit %d, want %d:\n%s", code, exitPartial, errOut)
	}
	if !strings.Contains(errOut, "held open for writing by another program") || !strings.Contains(errOut, `object "course": config`) ||
		!strings.Contains(errOut, "hint: open warehouse.duckdb read-only") {
		t.Errorf("the error does not name both the unpublished run and the failed stream:\n%s", errOut)
	}
}

// TestSyncCommitsWhileAWriterHoldsTheWarehouse: a program holding the
// published file for writing cannot have it replaced under it: the sync
// commits into the working database, prints its summary, says who holds
// the file, exits 3, and `sepipe publish` publishes once that program is
// gone.
func TestSyncCommitsWhileAWriterHoldsTheWarehouse(t *testing.T) {
	_, cfg, out, release := syncedAndHeld(t, "rw")
	pub := filepath.Join(out, "warehouse.duckdb")
	before := fileTree(t, out)[pub]
	if before == "" {
		t.Fatal("no published warehouse after the first sync")
	}
	code, stdout, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitPartial {
		t.Errorf("exit %d, want %d:\n%s", code, exitPartial, errOut)
	}
	// The run committed: its summary is printed as for any committed run.
	if !strings.Contains(stdout, "STREAM") || !strings.Contains(stdout, "course") {
		t.Errorf("no summary of the committed run on stdout:\n%s", stdout)
	}
	if !strings.Contains(errOut, "held open for writing by another program: PID ") || !strings.Contains(errOut, "hint: open warehouse.duckdb read-only") {
		t.Errorf("stderr does not name the holder or say what to do:\n%s", errOut)
	}
	if after := fileTree(t, out)[pub]; after != before {
		t.Errorf("the held warehouse was replaced")
	}
	code, _, errOut = runCLI(t, "plan", "--config", cfg)
	if code != exitFailed || !strings.Contains(errOut, "Conflicting lock is held in") {
		t.Errorf("plan on a warehouse held for writing: exit %d, want DuckDB's message naming the holder:\n%s", code, errOut)
	}
	release()
	if got := string(mustRun(t, "publish", "--out", out)); !strings.Contains(got, "published") {
		t.Errorf("publish: %s", got)
	}
	if n := queryOne(t, out, "SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'"); n != "2" {
		t.Errorf("after publish the warehouse has %s runs, want 2", n)
	}
	if got := string(mustRun(t, "publish", "--out", out)); !strings.Contains(got, "up to date") {
		t.Errorf("a second publish: %s", got)
	}
}

// TestSyncWaitsForABriefLock: another sepipe process holding the working
// database for a moment (a listener loading a batch) delays the sync; it
// does not fail it.
func TestSyncWaitsForABriefLock(t *testing.T) {
	_, cfg, _, release := syncedAndHeld(t, "flock")
	go func() {
		time.Sleep(1500 * time.Millisecond) // then the other process lets go
		release()
	}()
	code, _, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitOK {
		t.Fatalf("a sync behind a brief lock: exit %d:\n%s", code, errOut)
	}
}

// TestSchedulerSignals: the first signal lets the current run finish, the
// second cancels it; a tick while a run goes on is skipped.
func TestSchedulerSignals(t *testing.T) {
	sched := every(50 * time.Millisecond)
	var logs strings.Builder
	g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
	log, _ := g.loggerTo(g.stderr)
	started := make(chan struct{}, 10)
	var cancelled bool
	s := &scheduler{sched: sched, loc: time.UTC, log: log, run: func(ctx context.Context, _ bool, _ []string) error {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			cancelled = true
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
			return nil
		}
	}}
	sigs := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- s.loop(context.Background(), sigs) }()
	<-started
	time.Sleep(150 * time.Millisecond) // ticks come while the run goes on
	sigs <- os.Interrupt
	if err := <-done; err != nil || cancelled {
		t.Errorf("first signal: err %v, cancelled %v", err, cancelled)
	}
	if !strings.Contains(logs.String(), "skipped a scheduled run") {
		t.Errorf("no skip logged:\n%s", logs.String())
	}
	go func() { done <- s.loop(context.Background(), sigs) }()
	<-started
	sigs <- os.Interrupt
	sigs <- os.Interrupt
	if err := <-done; err != errRunCancelled || !cancelled {
		t.Errorf("second signal: err %v, cancelled %v", err, cancelled)
	}
}

// TestSchedulerContinuesDeferredStreams: a run whose streams a quota
// deferred is continued after the quota resets, while each continuation
// leaves fewer streams unfinished than the run before; one that does not
// ends the chain. A reset after the next scheduled run leaves the streams
// to that run.
func TestSchedulerContinuesDeferredStreams(t *testing.T) {
	// deferred is a run that left n streams to a quota resetting in in.
	deferred := func(partial bool, n int, in time.Duration) error {
		re := &pipeline.RunError{RunID: "r", Partial: partial}
		for i := range n {
			re.Deferred = append(re.Deferred, &pipeline.ObjectError{Object: fmt.Sprint("s", i), Step: "read",
				Err: &extract.QuotaError{Reset: time.Now().Add(in), Err: extract.ErrQuotaExhausted}})
		}
		return re
	}
	const now = -continueMargin
	for _, tc := range []struct {
		name      string
		scheduled int     // --max-runs
		ends      []error // what each run returns
		runs      int     // runs made, continuations included
		inLog     string
	}{
		{"continued until done", 1, []error{deferred(true, 3, now), deferred(true, 1, now), nil}, 3, "run continuing the streams the quota deferred"},
		{"a continuation that commits nothing ends the chain", 1, []error{deferred(true, 1, now), deferred(false, 1, now)}, 2, "the continuation left as many streams unfinished"},
		{"a continuation that finishes none of what it was left ends the chain", 1, []error{deferred(true, 2, now), deferred(true, 2, now)}, 2, "the continuation left as many streams unfinished"},
		{"a failed run is not continued", 1, []error{&pipeline.RunError{RunID: "r", Partial: true, Failed: []*pipeline.ObjectError{{Object: "user", Err: io.ErrUnexpectedEOF}}}}, 1, "run partial"},
		{"the next scheduled run comes first", 2, []error{deferred(true, 1, time.Hour), nil}, 2, "the next scheduled run continues the streams"},
		{"the scheduled runs are done and the reset is hours away", 1, []error{deferred(true, 1, 3*time.Hour)}, 1, "not waiting for the quota to reset"},
		{"a continuation whose streams failed again ends the chain", 1, []error{deferred(true, 1, now), &pipeline.RunError{RunID: "r", Failed: []*pipeline.ObjectError{{Object: "s0", Err: io.ErrUnexpectedEOF}}}}, 2, "the continuation's streams failed again"},
		{"a run that met the quota spent before it listed runs whole again", 1, []error{quotaBeforeRun{&extract.QuotaError{Reset: time.Now().Add(now), Err: extract.ErrQuotaExhausted}}, nil}, 2, "run starting again: the quota was spent before it could list what to read"},
		{"a whole rerun whose streams the quota deferred is continued", 1, []error{quotaBeforeRun{&extract.QuotaError{Reset: time.Now().Add(now), Err: extract.ErrQuotaExhausted}}, deferred(true, 2, now), nil}, 3, "run continuing the streams the quota deferred"},
		{"no window holds the deferred streams", 1, []error{&pipeline.RunError{RunID: "r", Partial: true, Deferred: []*pipeline.ObjectError{{Object: "big", Step: "read",
			Err: &extract.QuotaError{Reset: time.Now(), Exceeds: true, Err: extract.ErrQuotaExhausted}}}}}, 1, "not continuing: these streams need more requests than the quota allows in a whole window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
			log, _ := g.loggerTo(g.stderr)
			n := 0
			s := &scheduler{sched: every(50 * time.Millisecond), loc: time.UTC, log: log, maxRuns: tc.scheduled, run: func(ctx context.Context, continuation bool, _ []string) error {
				n++
				// Only the chain's runs after the first are continuations,
				// but for a run that read nothing, which runs whole again.
				_, whole := tc.ends[0].(quotaBeforeRun)
				if want := n > 1 && tc.scheduled == 1 && !(whole && n == 2); continuation != want {
					t.Errorf("run %d: continuation %v, want %v", n, continuation, want)
				}
				if n > len(tc.ends) {
					t.Errorf("run %d: more runs than expected", n)
					return nil
				}
				return tc.ends[n-1]
			}}
			if err := s.loop(context.Background(), make(chan os.Signal)); err != nil {
				t.Fatal(err)
			}
			if n != tc.runs || !strings.Contains(logs.String(), tc.inLog) {
				t.Errorf("%d runs, want %d; log without %q:\n%s", n, tc.runs, tc.inLog, logs.String())
			}
		})
	}
}

// TestSchedulerStopsWithAContinuationPending: a signal while the schedule
// waits for a quota's reset stops it at once; the continuation never runs.
func TestSchedulerStopsWithAContinuationPending(t *testing.T) {
	logs := &syncWriter{w: &strings.Builder{}}
	g := &globals{logLevel: "info", logFormat: "text", stderr: logs}
	log, _ := g.loggerTo(g.stderr)
	runs := make(chan bool, 4)
	s := &scheduler{sched: &onceSoon{}, loc: time.UTC, log: log, run: func(ctx context.Context, continuation bool, _ []string) error {
		runs <- continuation
		return &pipeline.RunError{RunID: "r", Partial: true, Deferred: []*pipeline.ObjectError{{Object: "user", Step: "read",
			Err: &extract.QuotaError{Reset: time.Now().Add(10 * time.Minute), Err: extract.ErrQuotaExhausted}}}}
	}}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- s.loop(context.Background(), sigs) }()
	if cont := <-runs; cont {
		t.Fatal("the first run is a continuation")
	}
	for !strings.Contains(logs.String(), "continuing the streams the quota deferred after it resets") {
		time.Sleep(10 * time.Millisecond) // the run's end is being handled
	}
	sigs <- os.Interrupt
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the schedule did not stop while its continuation was pending")
	}
	if len(runs) != 0 {
		t.Error("the continuation ran after the signal")
	}
}

// TestScheduleNightlyRunAcrossDST: the documented nightly schedule
// `--cron "0 2 * * *" --time-zone Europe/Berlin` runs exactly once on
// every local day, the days the clocks change included (robfig/cron alone
// skips 29 March 2026, whose 02:00 does not exist, and runs twice on 25
// October, whose 02:00 comes twice). The scheduler asks sched.Next(now)
// after each tick (scheduler.loop); a run takes a few minutes.
func TestScheduleNightlyRunAcrossDST(t *testing.T) {
	sched, err := parseCron("0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []time.Time{
		time.Date(2026, 3, 27, 12, 0, 0, 0, loc),  // spring forward on 29 March
		time.Date(2026, 10, 23, 12, 0, 0, 0, loc), // fall back on 25 October
	} {
		runs := map[string]int{}
		now := start
		for range 5 {
			next := sched.Next(now.In(loc))
			runs[next.In(loc).Format("2006-01-02")]++
			now = next.Add(5 * time.Minute) // the run took five minutes
		}
		for d := start.AddDate(0, 0, 1); d.Before(start.AddDate(0, 0, 4)); d = d.AddDate(0, 0, 1) {
			if day := d.Format("2006-01-02"); runs[day] != 1 {
				t.Errorf("%s: %d scheduled runs, want 1 (runs per day: %v)", day, runs[day], runs)
			}
		}
	}
}

// TestScheduleAcrossDST: the times a schedule runs across both changes of
// 2026 in Europe/Berlin. A fixed-hour expression runs at the end of the
// spring gap when its time falls in it, and once, at the first pass, in
// the repeated autumn hour; one that matches every hour keeps its pace in
// real time (every 30 minutes through both changes); in UTC, and with a
// CRON_TZ= prefix, times are as the expression says.
func TestScheduleAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec string
		loc        *time.Location
		from       string // RFC 3339
		want       []string
	}{
		{"nightly, spring", "0 2 * * *", berlin, "2026-03-27T12:00:00+01:00",
			[]string{"2026-03-28T02:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"nightly, autumn", "0 2 * * *", berlin, "2026-10-23T12:00:00+02:00",
			[]string{"2026-10-24T02:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-26T02:00:00+01:00"}},
		{"two times in the gap run once at its end", "15,45 2 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:15:00+02:00", "2026-03-30T02:45:00+02:00"}},
		{"a time at the gap's end runs once", "0 3 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"}},
		{"every 30 minutes, spring", "*/30 * * * *", berlin, "2026-03-29T00:45:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"}},
		{"every 30 minutes, autumn", "*/30 * * * *", berlin, "2026-10-25T01:45:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"UTC, spring", "0 2 * * *", time.UTC, "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:00:00Z", "2026-03-29T02:00:00Z", "2026-03-30T02:00:00Z"}},
		{"UTC, autumn", "0 2 * * *", time.UTC, "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T02:00:00Z", "2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"}},
		{"CRON_TZ, autumn", "CRON_TZ=Europe/Berlin 0 2 * * *", time.UTC, "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T00:00:00Z", "2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRuns(t, tc.spec, tc.loc, tc.from, len(tc.want)); !slices.Equal(got, tc.want) {
				t.Errorf("%q in %s from %s:\n got %v\nwant %v", tc.spec, tc.loc, tc.from, got, tc.want)
			}
		})
	}
}

// nextRuns is when the schedule spec runs n times from from (RFC 3339),
// asked as the scheduler asks (a second after each run starts), in loc.
func nextRuns(t *testing.T, spec string, loc *time.Location, from string, n int) []string {
	t.Helper()
	sched, err := parseCron(spec)
	if err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, from)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range n {
		now = sched.Next(now.In(loc))
		got = append(got, now.In(loc).Format(time.RFC3339))
		now = now.Add(time.Second)
	}
	return got
}

// onceSoon fires 20 ms from the first time it is asked, then a day later.
type onceSoon struct{ asked bool }

func (o *onceSoon) Next(t time.Time) time.Time {
	if !o.asked {
		o.asked = true
		return t.Add(20 * time.Millisecond)
	}
	return t.Add(24 * time.Hour)
}

// every is a schedule finer than cron's one second.
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// String is what was written, for a writer over a strings.Builder.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(fmt.Stringer).String()
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestExampleConfigIsValid keeps sepipe.example.yaml loadable.
func TestExampleConfigIsValid(t *testing.T) {
	c, err := LoadConfig("../../sepipe.example.yaml", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("the example has literal secrets: %v", c.Warnings())
	}
	if s := c.Streams["userCourseProgress"]; s.Mode != "merge" || time.Duration(s.Lookback) != 2*time.Hour {
		t.Errorf("userCourseProgress: %+v", s)
	}
}

func TestHelpOfNewCommands(t *testing.T) {
	for _, c := range []string{"sync", "plan", "discover", "describe", "check", "schedule"} {
		code, out, _ := runCLI(t, c, "--help")
		if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--config") {
			t.Errorf("%s --help: %d\n%s", c, code, out)
		}
	}
}

// TestScheduleAcrossHalfHourDST: in a zone whose clocks move by half an
// hour (Australia/Lord_Howe: 02:00 to 02:30 on 4 October 2026, 02:00 back
// to 01:30 on 5 April 2026) a fixed-hour expression runs once for each
// time it names, as across whole-hour changes (robfig/cron's arithmetic
// of whole hours ran 01:30 again at 02:30, and skipped 03:00 and a
// midnight; found by review).
func TestScheduleAcrossHalfHourDST(t *testing.T) {
	loc, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, from string
		want       []string
	}{
		{"30 1 * * *", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T01:30:00+10:30", "2026-10-05T01:30:00+11:00"}},
		{"15 2 * * *", "2026-10-03T12:00:00+10:30", // 02:15 is in the gap: its end
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"45 1 * * *", "2026-04-04T12:00:00+11:00", // 01:45 comes twice: the first
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"0 3 * * *", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T03:00:00+10:30", "2026-04-06T03:00:00+10:30"}},
		{"@midnight", "2026-04-05T00:00:00+11:00",
			[]string{"2026-04-06T00:00:00+10:30", "2026-04-07T00:00:00+10:30"}},
	} {
		if got := nextRuns(t, tc.spec, loc, tc.from, len(tc.want)); !slices.Equal(got, tc.want) {
			t.Errorf("%q from %s: runs %v, want %v", tc.spec, tc.from, got, tc.want)
		}
	}
}

// TestScheduleDailyRunsOncePerDay: over a whole year, in zones whose
// clocks move by an hour, half an hour, at midnight or not at all, a daily
// expression of any hour and minute runs exactly once a day, each run
// later than the one before.
func TestScheduleDailyRunsOncePerDay(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Beirut", "America/Havana", "Asia/Tokyo"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for h := range 24 {
			for _, m := range []int{0, 30} {
				spec := fmt.Sprintf("%d %d * * *", m, h)
				sched, err := parseCron(spec)
				if err != nil {
					t.Fatal(err)
				}
				from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Add(-time.Second)
				end := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
				runs, last := 0, from
				for now := sched.Next(from); now.Before(end); now = sched.Next(now) {
					if !now.After(last) {
						t.Fatalf("%s %q: run %s not after %s", zone, spec, now, last)
					}
					runs, last = runs+1, now
				}
				if runs != 365 {
					t.Errorf("%s %q: %d runs in 2026, want 365", zone, spec, runs)
				}
			}
		}
	}
}

// TestQueryOutputOfEveryType pins what `sepipe query --format csv` and
// `--format json` write of each DuckDB type a query may return: the text
// of query.ValueText (INTERVAL, UUID and TIME as DuckDB writes them, the
// nested types as JSON) in CSV, and JSON's own numbers, arrays and objects
// in JSON, never Go's struct syntax or raw bytes (found by review).
func TestQueryOutputOfEveryType(t *testing.T) {
	cases := []struct{ expr, csv, json string }{
		{"true", "true", "true"},
		{"42::INTEGER", "42", "42"},
		{"170141183460469231731687303715884105727::HUGEINT", "170141183460469231731687303715884105727", "170141183460469231731687303715884105727"},
		{"18446744073709551615::UBIGINT", "18446744073709551615", "18446744073709551615"},
		{"0.1::DOUBLE", "0.1", "0.1"},
		{"'NaN'::DOUBLE", "NaN", `"NaN"`},
		{"1.25::DECIMAL(18,3)", "1.25", "1.25"},
		{"'a,b'", "a,b", `"a,b"`},
		{"'x'::ENUM('x', 'y')", "x", `"x"`},
		{"'101'::BIT", "101", `"101"`},
		{"DATE '2026-01-02'", "2026-01-02", `"2026-01-02"`},
		{"TIME '10:30:00'", "10:30:00", `"10:30:00"`},
		{"TIMETZ '10:30:00+05:30'", "10:30:00+05:30", `"10:30:00+05:30"`},
		{"TIMESTAMPTZ '2026-01-02 03:04:05.5+00'", "2026-01-02T03:04:05.5Z", `"2026-01-02T03:04:05.5Z"`},
		{"INTERVAL 90 MINUTE", "01:30:00", `"01:30:00"`},
		{"INTERVAL '1 day 2 hours'", "1 day 02:00:00", `"1 day 02:00:00"`},
		{"INTERVAL 3 MONTH", "3 months", `"3 months"`},
		{"'00000000-0000-0000-0000-000000000001'::UUID", "00000000-0000-0000-0000-000000000001", `"00000000-0000-0000-0000-000000000001"`},
		{`'{"a": [1, 2]}'::JSON`, `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"['a', 'b']", `["a","b"]`, `["a","b"]`},
		{"[1, 2]::INTEGER[2]", `[1,2]`, `[1,2]`},
		{"{'took': INTERVAL 90 MINUTE, 'id': '00000000-0000-0000-0000-000000000001'::UUID}", `{"took":"01:30:00","id":"00000000-0000-0000-0000-000000000001"}`, `{"took":"01:30:00","id":"00000000-0000-0000-0000-000000000001"}`},
		{"MAP {'at': [TIME '10:30:00']}", `{"at":["10:30:00"]}`, `{"at":["10:30:00"]}`},
		{"union_value(k := INTERVAL 90 MINUTE)::UNION(k INTERVAL, s VARCHAR)", "01:30:00", `"01:30:00"`},
		{"NULL::INTEGER", "", "null"},
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cols []string
	for i, c := range cases {
		cols = append(cols, fmt.Sprintf("%s AS c%d", c.expr, i))
	}
	query := "SELECT " + strings.Join(cols, ", ")
	for _, format := range []string{"csv", "json"} {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		write := func(w io.Writer, rows *sql.Rows) error { return writeCSV(w, rows, false) }
		if format == "json" {
			write = writeJSON
		}
		if err := write(&b, rows); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		got := map[string]string{}
		if format == "csv" {
			recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
			if err != nil || len(recs) != 2 {
				t.Fatalf("csv: %v\n%s", err, b.String())
			}
			for i, c := range recs[0] {
				got[c] = recs[1][i]
			}
		} else {
			var line map[string]json.RawMessage
			if err := json.Unmarshal([]byte(b.String()), &line); err != nil {
				t.Fatalf("json: %v\n%s", err, b.String())
			}
			for c, v := range line {
				got[c] = string(v)
			}
		}
		for i, c := range cases {
			want := c.csv
			if format == "json" {
				want = c.json
			}
			if g := got[fmt.Sprintf("c%d", i)]; g != want {
				t.Errorf("--format %s: %s gives %s, want %s", format, c.expr, g, want)
			}
		}
	}
}

// TestCheckRefusesWhatSyncRefuses: a config whose include names no object
// of the service fails check, as it fails the sync (check tried the
// credentials alone and exited 0; found by review); a config that names
// only objects the service has passes.
func TestCheckRefusesWhatSyncRefuses(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	bad := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "include: [coarse]\n")
	code, stdout, _ := runCLI(t, "check", "--config", bad)
	if code == exitOK || !strings.Contains(stdout, `unknown report object "coarse"`) {
		t.Errorf("check of an include naming no object: exit %d\n%s", code, stdout)
	}
	good := writeConfig(t, t.TempDir(), srv.URL, filepath.Join(dir, "data"), "include: [course]\n")
	if code, stdout, errOut := runCLI(t, "check", "--config", good); code != exitOK || !strings.Contains(stdout, "1 streams to sync") {
		t.Errorf("check of a good config: exit %d\n%s\n%s", code, stdout, errOut)
	}
}

// ./sepipe.yaml is read when it exists (docs/cli.md): publish and query
// looked in their own default folder, not the config's output.dir, and
// told the user to run 'sepipe sync' in the folder of a synced config.
func TestPublishAndQueryFollowTheConfigsOutputDir(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	writeConfig(t, dir, srv.URL, "./custom", "")
	t.Chdir(dir)
	mustRun(t, "sync", "--quiet", "--objects", "course")
	if _, err := os.Stat(filepath.Join(dir, "custom", "warehouse.duckdb")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "publish"); code != exitOK || !strings.Contains(out, "custom") {
		t.Errorf("publish beside sepipe.yaml (output.dir ./custom): exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "query", "SELECT count(*) FROM course"); code != exitOK {
		t.Errorf("query beside sepipe.yaml (output.dir ./custom): exit %d\n%s%s", code, out, errOut)
	}
	// The flag still wins.
	if code, _, errOut := runCLI(t, "query", "--out", filepath.Join(dir, "elsewhere"), "SELECT 1"); code != exitUsage || !strings.Contains(errOut, "elsewhere") {
		t.Errorf("query --out elsewhere: exit %d, want %d naming it\n%s", code, exitUsage, errOut)
	}
}

// discover printed "subscriptions" (an id --objects refuses) and left out
// webhook_delivery_logs; it lists the stream ids --objects, include and
// streams take, and each of them syncs.
func TestDiscoverListsTheStreamIDsObjectsTakes(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	out := mustRun(t, "discover", "--base-url", srv.URL, "--out", t.TempDir())
	if strings.Contains(out, "\nsubscriptions ") {
		t.Errorf("discover lists %q, not a stream id:\n%s", "subscriptions", out)
	}
	for _, id := range []string{"themes", "assets", "webhook_subscriptions", "webhook_delivery_logs"} {
		if !strings.Contains(out, "\n"+id+" ") {
			t.Errorf("discover does not list the stream id %q that --objects takes:\n%s", id, out)
		}
	}
	mustRun(t, "sync", "--quiet", "--base-url", srv.URL, "--out", t.TempDir(), "--objects", "webhook_subscriptions,webhook_delivery_logs")
}

// sync --objects course --full-refresh userCourseProgress said "unknown
// report object in this run" with a hint to run discover, and exited 1:
// the stream exists, it is not among --objects, and that is bad usage.
func TestFullRefreshOutsideObjectsIsUsage(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--objects", "course", "--full-refresh", "userCourseProgress"}, "--full-refresh userCourseProgress: not among the streams of this run (--objects course)"},
		{[]string{"--full-refresh", "nosuch"}, `--full-refresh: unknown report object "nosuch"`},
	} {
		args := append([]string{"sync", "--quiet", "--base-url", srv.URL, "--out", t.TempDir()}, tc.args...)
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("sepipe %s: exit %d, want %d saying %q\n%s", strings.Join(tc.args, " "), code, exitUsage, tc.msg, errOut)
		}
		if strings.Contains(tc.msg, "not among") && strings.Contains(errOut, "discover") {
			t.Errorf("the hint points to discover for a stream that exists:\n%s", errOut)
		}
	}
}

// check said "0 streams to sync" for a config with no include or exclude,
// which syncs every stream.
func TestCheckCountsEveryStreamWithoutInclude(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "")
	code, stdout, errOut := runCLI(t, "check", "--config", cfg)
	if code != exitOK {
		t.Fatalf("check: exit %d\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(stdout, " 9 streams to sync") {
		t.Errorf("check does not count the 9 streams a config without include syncs:\n%s", stdout)
	}
}

// A primary_key or cursor naming no field of the object passed check
// (exit 0), and sync failed the stream at run time (exit 1) with no file,
// line or key: both refuse it as a config error naming sepipe.yaml:LINE
// (exit 2; check exited 1, as for a refused credential, until the docs
// review).
func TestStreamKeyNamingNoFieldIsAConfigError(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	for _, tc := range []struct{ from, to, key, field string }{
		{"primary_key: [userId, courseId]", "primary_key: [userId, corseId]", "streams.userCourseProgress.primary_key", "corseId"},
		{"cursor: lastModifiedDate", "cursor: lastModifed", "streams.userCourseProgress.cursor", "lastModifed"},
		{"cursor: lastModifiedDate", "cursor: courseTitle", "streams.userCourseProgress.cursor", "courseTitle"},
	} {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "")
		b, _ := os.ReadFile(cfg)
		os.WriteFile(cfg, []byte(strings.Replace(string(b), tc.from, tc.to, 1)), 0o644)
		// check: the table's config row names it, and the exit is 2 (bad
		// configuration, docs/cli.md), not 1 (a credential failed).
		if code, stdout, errOut := runCLI(t, "check", "--config", cfg); code != exitUsage || !strings.Contains(stdout, tc.key) || !strings.Contains(errOut, "sepipe.yaml:") {
			t.Errorf("%s: check: exit %d, want %d naming %s and sepipe.yaml:LINE:\n%s\n%s", tc.to, code, exitUsage, tc.key, stdout, errOut)
		}
		code, _, errOut := runCLI(t, "plan", "--config", cfg, "--objects", "userCourseProgress")
		if code != exitUsage || !strings.Contains(errOut, "sepipe.yaml:") || !strings.Contains(errOut, tc.key) {
			t.Errorf("%s: plan: exit %d, want %d naming sepipe.yaml:LINE and %s\n%s", tc.to, code, exitUsage, tc.key, errOut)
		}
		// A sync leaves it to the stream (the service may have dropped the
		// field since): that stream fails, naming the field, and the
		// others go on (TestADescribeChangeOfOneObjectFailsThatStreamAlone).
		code, _, errOut = runCLI(t, "sync", "--config", cfg, "--quiet", "--objects", "userCourseProgress")
		if code != exitFailed || !strings.Contains(errOut, "userCourseProgress") || !strings.Contains(errOut, tc.field) {
			t.Errorf("%s: sync: exit %d, want %d naming the stream and the field\n%s", tc.to, code, exitFailed, errOut)
		}
	}
}

// Two columns of one name (SELECT * over a join: u.status, c.status) made
// a JSON line with a duplicate key, which JSON readers take as one column
// (the last); the later columns are named apart as DuckDB names them in a
// subquery, in json, csv and the table alike.
func TestQueryNamesColumnsOfOneNameApart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	mustRun(t, "demo", "--out", dir, "--users", "5", "--days", "1", "--log-level", "warn")
	const q = "SELECT * FROM userCourseProgress u JOIN course c ON u.courseId = c.courseId LIMIT 1"
	out := mustRun(t, "query", "--out", dir, "--format", "json", q)
	var obj map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &obj); err != nil {
		t.Fatal(err)
	}
	n := len(strings.Split(strings.Split(mustRun(t, "query", "--out", dir, "--format", "csv", q), "\n")[0], ","))
	if len(obj) != n || strings.Count(out, `"status":`) != 1 || obj["status_1"] == nil {
		t.Errorf("the json line has %d distinct keys for %d columns:\n%s", len(obj), n, out)
	}
	head := strings.Split(strings.Split(mustRun(t, "query", "--out", dir, "--format", "csv", q), "\n")[0], ",")
	if slices.Index(head, "status") < 0 || slices.Index(head, "status_1") < 0 {
		t.Errorf("the csv header does not name the two status columns apart: %v", head)
	}
}

// TestPlanAndSyncAcceptTheSameSelections runs plan and sync on each
// selection of streams (flags and the config's include, exclude and
// streams) and requires the same answer of both: the exit code, and for a
// refusal the same message. They decided in three places and disagreed:
// plan --full-refresh themes failed with "unknown report object in this
// run" while sync --full-refresh themes ran (issue 41). Each lists the
// report objects once (the CLI listed them, then the run again).
func TestPlanAndSyncAcceptTheSameSelections(t *testing.T) {
	fake := servicetest.NewServer(servicetest.WithUsers(5))
	defer fake.Close()
	setEnv(t, fake)
	var lists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == servicetest.BasePath+"/objects" {
			lists.Add(1)
		}
		fake.Service.ServeHTTP(w, r)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		config string // the config's selection, after its streams
		args   []string
		code   int
		msg    string // the refusal, "" when both run
	}{
		{name: "every stream"},
		{name: "full refresh of a collection", args: []string{"--full-refresh", "themes"}},
		{name: "full refresh of a report object", args: []string{"--full-refresh", "userCourseProgress"}},
		{name: "objects, a collection among them", args: []string{"--objects", "course,themes", "--full-refresh", "themes"}},
		{name: "objects, collections only", args: []string{"--objects", "assets,webhook_subscriptions"}},
		{name: "full refresh outside objects", args: []string{"--objects", "course", "--full-refresh", "userCourseProgress"}, code: exitUsage,
			msg: "--full-refresh userCourseProgress: not among the streams of this run (--objects course)"},
		{name: "full refresh of nothing", args: []string{"--full-refresh", "nosuch"}, code: exitUsage, msg: `--full-refresh: unknown report object "nosuch"`},
		{name: "unknown object", args: []string{"--objects", "coarse"}, code: exitUsage, msg: `--objects: unknown report object "coarse"`},
		{name: "include", config: "include: [course, themes]\n"},
		{name: "include, full refresh outside it", config: "include: [course]\n", args: []string{"--full-refresh", "themes"}, code: exitUsage,
			msg: "include: --full-refresh themes: not among the streams of this run (include: course)"},
		{name: "include naming nothing", config: "include: [course, coarse]\n", code: exitUsage, msg: `include[1]: unknown report object "coarse"`},
		{name: "exclude", config: "exclude: [assets, user]\n"},
		{name: "exclude, full refresh of an excluded stream", config: "exclude: [assets]\n", args: []string{"--full-refresh", "assets"}, code: exitUsage,
			msg: "exclude: --full-refresh assets: the config excludes it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), tc.config)
			var answers []string
			for _, cmd := range []string{"plan", "sync"} {
				args := append([]string{cmd, "--config", cfg}, tc.args...)
				if cmd == "sync" {
					args = append(args, "--quiet")
				}
				lists.Store(0)
				code, _, errOut := runCLI(t, args...)
				first, _, _ := strings.Cut(errOut, "\n")
				if n := lists.Load(); n > 1 {
					t.Errorf("sepipe %s listed the report objects %d times", strings.Join(args[3:], " "), n)
				}
				if code != tc.code || tc.msg != "" && !strings.Contains(first, tc.msg) {
					t.Errorf("sepipe %s: exit %d, want %d %q:\n%s", strings.Join(args[3:], " "), code, tc.code, tc.msg, errOut)
				}
				if tc.code != exitOK {
					answers = append(answers, first)
				}
			}
			if len(answers) == 2 && answers[0] != answers[1] {
				t.Errorf("plan and sync refuse it differently:\n plan: %s\n sync: %s", answers[0], answers[1])
			}
		})
	}
}
