package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryCannotReachFiles: sepipe query runs read-only with DuckDB's
// external access off: no COPY ... TO, no read_text, no turning it back
// on; the history views still read the lake.
func TestQueryCannotReachFiles(t *testing.T) {
	out := t.TempDir()
	mustRun(t, "demo", "--out", out, "--users", "20", "--log-level", "warn")
	if n := queryOne(t, out, "SELECT count(*) > 0 FROM userCourseProgress_history"); n != "true" {
		t.Fatalf("history view through the sandbox: %q", n)
	}
	target := filepath.Join(t.TempDir(), "evil.csv")
	for _, q := range []string{
		"COPY (SELECT 1) TO '" + target + "'",
		"SELECT * FROM read_text('/etc/hostname')",
		"SET enable_external_access = true",
		"ATTACH '" + filepath.Join(t.TempDir(), "x.duckdb") + "' AS x",
		"CREATE TABLE course2 AS SELECT * FROM course",
	} {
		code, _, errOut := runCLI(t, "query", "--out", out, q)
		if code == exitOK {
			t.Errorf("%s: allowed", q)
		}
		if !strings.Contains(errOut, "sepipe: query:") {
			t.Errorf("%s: %s", q, errOut)
		}
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("COPY wrote a file")
	}
}

func TestTermEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain ümlaut\tand tab\n":        "plain ümlaut\tand tab\n",
		"\x1b[2J\x1b]0;pwned\x07title":   `\x1b[2J\x1b]0;pwned\x07title`,
		"carriage\rreturn":               `carriage\x0dreturn`,
		"c1 \u009b31m and bad \xff byte": `c1 \x9b31m and bad \xff byte`,
	} {
		if got := termEscape(in, true); got != want {
			t.Errorf("termEscape(%q) = %q, want %q", in, got, want)
		}
	}
	var b strings.Builder
	termSafe(&b).Write([]byte("id\x1b[31m\n"))
	if b.String() != `id\x1b[31m`+"\n" {
		t.Errorf("termSafe wrote %q", b.String())
	}
}

// TestOutputFolderWithDuckDBSyntaxIsRefused: a folder whose path DuckDB
// would read as a glob or as connection options is refused with exit 2
// naming the character, before anything is written.
func TestOutputFolderWithDuckDBSyntaxIsRefused(t *testing.T) {
	t.Setenv("SEPIPE_ACCESS_TOKEN", "tok-SECRET-4f1c9a")
	for _, name := range []string{"data[1]", "what?access_mode=read_only", "a*b"} {
		out := filepath.Join(t.TempDir(), name)
		code, _, errOut := runCLI(t, "sync", "--base-url", "http://127.0.0.1:1", "--out", out)
		if code != exitUsage || !strings.Contains(errOut, "holds a character DuckDB reads as syntax") {
			t.Errorf("%s: exit %d\n%s", name, code, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s was created", out)
		}
	}
}
