package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract/servicetest"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDemoTwiceLeavesSameCounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var counts []string
	for i := 0; i < 2; i++ {
		code, out, errOut := runCLI(t, "demo", "--out", dir, "--users", "40", "--log-level", "warn")
		if code != exitOK {
			t.Fatalf("demo exit %d\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{"course", "path", "curriculum", "user", "userCourseProgress", "example query", "Completed"} {
			if !strings.Contains(out, want) {
				t.Errorf("demo output lacks %q:\n%s", want, out)
			}
		}
		code, out, errOut = runCLI(t, "query", "--out", dir, "--format", "csv",
			`SELECT (SELECT count(*) FROM course) || '/' || (SELECT count(*) FROM path) || '/' || (SELECT count(*) FROM curriculum) || '/' || (SELECT count(*) FROM "user") || '/' || (SELECT count(*) FROM userCourseProgress) AS n`)
		if code != exitOK {
			t.Fatalf("query exit %d: %s", code, errOut)
		}
		counts = append(counts, out)
	}
	if counts[0] != counts[1] || !strings.HasPrefix(counts[0], "n\n") {
		t.Errorf("counts differ between two demos: %q vs %q", counts[0], counts[1])
	}
	// Two demos on the same day build the same three days of history:
	// three partitions per stream, one file each, nothing doubled.
	streams, _ := filepath.Glob(filepath.Join(dir, "lake", "*"))
	files, _ := filepath.Glob(filepath.Join(dir, "lake", "*", "snapshot_date=*", "*.parquet"))
	if len(streams) != 9 || len(files) != 3*len(streams) {
		t.Errorf("lake after two same-day demos: %d streams, files %v", len(streams), files)
	}
}

func TestBadInputExitCodes(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	cases := []struct {
		name string
		env  string // SEPIPE_ACCESS_TOKEN
		args []string
		code int
		msg  string
		hint string
	}{
		{"unknown command", "", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`, ""},
		{"unknown flag", "", []string{"sync", "--bogus"}, exitUsage, "unknown flag: --bogus", ""},
		{"no base url", "t", []string{"sync"}, exitUsage, "--base-url is required", ""},
		{"no token", "", []string{"sync", "--base-url", srv.URL}, exitUsage, "SEPIPE_ACCESS_TOKEN is not set", ""},
		{"bad log level", "t", []string{"sync", "--base-url", srv.URL, "--log-level", "loud"}, exitUsage, `--log-level "loud"`, ""},
		{"wrong token", "tok-xyz-123", []string{"sync", "--base-url", srv.URL, "--out", t.TempDir()}, exitFailed, "reporting access token", "check SEPIPE_ACCESS_TOKEN"},
		// No Coach licence: the other interfaces sync, reporting is skipped.
		{"no reporting role", servicetest.DefaultLimitedToken, []string{"sync", "--base-url", srv.URL, "--out", t.TempDir()}, exitPartial, "Coach license", ""},
		{"no reporting role, reporting only", servicetest.DefaultLimitedToken, []string{"sync", "--base-url", srv.URL, "--out", t.TempDir(), "--objects", "course"}, exitFailed, "skipped object \"course\"", ""},
		{"no reporting role, assets only", servicetest.DefaultLimitedToken, []string{"sync", "--base-url", srv.URL, "--out", t.TempDir(), "--objects", "assets"}, exitOK, "", ""},
		{"unknown object", servicetest.DefaultAccessToken, []string{"sync", "--base-url", srv.URL, "--out", t.TempDir(), "--objects", "coarse"}, exitUsage, `unknown report object "coarse"`, ""},
		{"unwritable out", servicetest.DefaultAccessToken, []string{"sync", "--base-url", srv.URL, "--out", filepath.Join(notDir, "x")}, exitFailed, notDir, ""},
		{"query without warehouse", "", []string{"query", "--out", t.TempDir(), "select 1"}, exitUsage, "no warehouse at", ""},
		{"bad format", "", []string{"query", "--format", "xml", "select 1"}, exitUsage, `--format "xml"`, ""},
		{"demo zero users", "", []string{"demo", "--users", "0"}, exitUsage, "--users must be at least 1", ""},
		{"demo zero days", "", []string{"demo", "--days", "0"}, exitUsage, "--days must be at least 1", ""},
		{"demo negative days", "", []string{"demo", "--days", "-1"}, exitUsage, "--days must be at least 1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SEPIPE_ACCESS_TOKEN", tc.env)
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut)
			}
			if _, h, _ := strings.Cut(errOut, "hint: "); tc.hint != "" && !strings.Contains(h, tc.hint) {
				t.Errorf("stderr lacks hint %q:\n%s", tc.hint, errOut)
			}
			if tc.env != "" && len(tc.env) > 3 && strings.Contains(errOut, tc.env) && tc.env != servicetest.DefaultAccessToken {
				t.Errorf("the token appears in the output:\n%s", errOut)
			}
		})
	}
}

func TestSyncAgainstFakeAndPartialExit(t *testing.T) {
	svc := servicetest.New(servicetest.WithUsers(20))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects/path/describe") && os.Getenv("FAIL_PATH") == "1" {
			w.WriteHeader(404)
			io.WriteString(w, `{"response":{"code":3004,"name":"ResourceNotFoundError","message":"gone"}}`)
			return
		}
		svc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv("SEPIPE_ACCESS_TOKEN", svc.AccessToken())
	out := t.TempDir()
	code, stdout, errOut := runCLI(t, "sync", "--base-url", srv.URL, "--out", out, "--log-level", "warn")
	if code != exitOK {
		t.Fatalf("sync exit %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, "userCourseProgress") || !strings.Contains(stdout, "REQUESTS") {
		t.Errorf("no summary table:\n%s", stdout)
	}
	t.Setenv("FAIL_PATH", "1")
	code, stdout, errOut = runCLI(t, "sync", "--base-url", srv.URL, "--out", out, "--log-level", "error")
	if code != exitPartial {
		t.Fatalf("partial sync exit %d, want %d: %s", code, exitPartial, errOut)
	}
	if !strings.Contains(errOut, `object "path": describe`) || !strings.Contains(stdout, "FAILED") {
		t.Errorf("partial failure not explained:\n%s\n%s", stdout, errOut)
	}
}

func TestVersionAndHelp(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != exitOK || !strings.Contains(out, "sepipe ") {
		t.Errorf("version: %d %q", code, out)
	}
	for _, c := range []string{"demo", "simulate", "sync", "query"} {
		code, out, _ := runCLI(t, c, "--help")
		if code != exitOK || !strings.Contains(out, "Usage:") || !strings.Contains(out, "Example") && c != "version" {
			t.Errorf("%s --help: %d\n%s", c, code, out)
		}
	}
}

// A missing argument, an extra one or a missing required flag is bad
// usage (exit 2) naming the command and what is missing, not cobra's
// "accepts 1 arg(s), received 0" with exit 1.
func TestMissingArgumentOrRequiredFlagIsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"query"}, "sepipe query: missing SQL"},
		{[]string{"query", "select 1", "select 2"}, "sepipe query takes SQL, got 2 arguments"},
		{[]string{"describe"}, "sepipe describe: missing OBJECT"},
		{[]string{"webhooks", "get"}, "sepipe webhooks get: missing ID"},
		{[]string{"webhooks", "update"}, "sepipe webhooks update: missing ID"},
		{[]string{"lake", "expire"}, "sepipe lake expire: --older-than is required"},
		{[]string{"sync", "extra-arg"}, `sepipe sync takes no arguments, got "extra-arg"`},
		// Commands of commands printed their help and exited 0.
		{[]string{"lake", "bogus"}, `sepipe lake: unknown command "bogus"`},
		{[]string{"auth", "bogus"}, `sepipe auth: unknown command "bogus"`},
		{[]string{"webhooks", "bogus"}, `sepipe webhooks: unknown command "bogus"`},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.msg) {
				t.Errorf("sepipe %s: exit %d, want %d saying %q\n%s", strings.Join(tc.args, " "), code, exitUsage, tc.msg, errOut)
			}
		})
	}
}

// --log-level and --log-format are checked for every command, not only
// by the ones that talk to the service (version and query took anything).
func TestBadGlobalFlagIsRefusedByEveryCommand(t *testing.T) {
	for _, args := range [][]string{
		{"--log-level", "bogus", "version"},
		{"--log-format", "xml", "version"},
		{"--log-level", "bogus", "query", "--out", t.TempDir(), "select 1"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--log-") {
			t.Errorf("sepipe %s: exit %d, want %d naming the flag\n%s", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
