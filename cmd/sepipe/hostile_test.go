package main

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
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
	parts, _ := filepath.Glob(filepath.Join(out, "lake", "course", "*", "*.parquet"))
	if len(parts) == 0 {
		t.Fatal("no course part in the lake")
	}
	part := parts[0]
	before, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(part), "part-planted.parquet")
	attached := filepath.Join(out, "lake", "x.duckdb")
	for _, q := range []string{
		"COPY (SELECT 1) TO '" + target + "'",
		"SELECT * FROM read_text('/etc/hostname')",
		"SET enable_external_access = true",
		"ATTACH '" + filepath.Join(t.TempDir(), "x.duckdb") + "' AS x",
		"CREATE TABLE course2 AS SELECT * FROM course",
		// The lake is readable, and DuckDB's allowed directories are for
		// writing too: no statement but a query may run (found by review:
		// these rewrote a lake part, planted one, made a database file).
		"COPY (SELECT 42 AS x) TO '" + part + "' (FORMAT parquet)",
		"COPY (SELECT * FROM course LIMIT 1) TO '" + planted + "' (FORMAT parquet)",
		"ATTACH '" + attached + "' AS x",
		"EXPORT DATABASE '" + filepath.Join(out, "lake", "export") + "'",
		"EXPLAIN ANALYZE COPY (SELECT 1) TO '" + planted + "' (FORMAT parquet)",
		"SELECT 1; COPY (SELECT 1) TO '" + planted + "' (FORMAT parquet)",
		"PRAGMA table_info('course')",
	} {
		code, _, errOut := runCLI(t, "query", "--out", out, q)
		if code == exitOK {
			t.Errorf("%s: allowed", q)
		}
		if !strings.Contains(errOut, "sepipe: query:") {
			t.Errorf("%s: %s", q, errOut)
		}
	}
	for _, p := range []string{target, planted, attached, filepath.Join(out, "lake", "export")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a query wrote %s", p)
		}
	}
	if after, _ := os.ReadFile(part); !bytes.Equal(before, after) {
		t.Errorf("a query rewrote %s", part)
	}
	// What a person queries still runs: the lake, and what DuckDB parses
	// as a query (DESCRIBE, SHOW, SUMMARIZE, a pragma's table function).
	for _, q := range []string{
		"SELECT count(*) > 0 FROM read_parquet('" + filepath.Join(out, "lake", "course", "*", "*.parquet") + "')",
		"DESCRIBE course", "SHOW TABLES", "SUMMARIZE course", "SELECT * FROM pragma_table_info('course')", "FROM course LIMIT 1",
	} {
		if code, _, errOut := runCLI(t, "query", "--out", out, q); code != exitOK {
			t.Errorf("%s: %s", q, errOut)
		}
	}
	// A PIVOT runs with its values listed; without them DuckDB makes it
	// several statements, and the error says how to write it.
	if code, _, errOut := runCLI(t, "query", "--out", out, "PIVOT userCourseProgress ON status IN ('Completed', 'Overdue') USING count(*)"); code != exitOK {
		t.Errorf("PIVOT with its values: %s", errOut)
	}
	if code, _, errOut := runCLI(t, "query", "--out", out, "/* by status */ PIVOT userCourseProgress ON status USING count(*)"); code == exitOK || !strings.Contains(errOut, "with its values listed") {
		t.Errorf("PIVOT without its values: %d %s", code, errOut)
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

// TestQueryTableCannotFakeRows pins printRows' escaping: a value or a
// column name holding a newline or a tab (the service's data) shows them
// as \x0a and \x09, so the table printed on a terminal never shows a row
// or a column that is not in the result (found by review).
func TestQueryTableCannotFakeRows(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT * FROM (VALUES ('alice', 'viewer'), ('bob' || chr(10) || 'mallory', 'admin' || chr(9) || 'x')) t(name, "role` + "\n" + `fake")`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	if err := printRows(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Errorf("2 rows printed as %d lines:\n%s", len(lines)-1, b.String())
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "mallory") || strings.HasPrefix(l, "fake") {
			t.Errorf("a line that looks like a row of its own: %q", l)
		}
		if strings.ContainsAny(l, "\t\r") {
			t.Errorf("a tab or carriage return left in %q", l)
		}
	}
	for _, want := range []string{`role\x0afake`, `bob\x0amallory`, `admin\x09x`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in:\n%s", want, b.String())
		}
	}
}

// TestQueryCSVOnATerminalEscapesTheServicesText: sepipe query --format
// csv wrote the service's escape sequences raw to a terminal, where the
// table and JSON formats escape them (issue 40). On a terminal each field
// is escaped (a newline or tab kept: CSV quotes them); into a file the
// values are exact.
func TestQueryCSVOnATerminalEscapesTheServicesText(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const evil = "x" + "\x1b]0;pwned\x07" + "\x1b[2J" + "y\nz"
	for _, onTerminal := range []bool{true, false} {
		rows, err := db.Query(`SELECT ? AS "name`+"\x1b[31m"+`", 1 AS n`, evil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := writeCSV(&b, rows, onTerminal); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
		if err != nil || len(recs) != 2 {
			t.Fatalf("terminal %v: %v\n%q", onTerminal, err, b.String())
		}
		if onTerminal {
			if strings.ContainsAny(b.String(), "\x1b\x07") {
				t.Errorf("an escape sequence reached the terminal: %q", b.String())
			}
			if want := `x\x1b]0;pwned\x07\x1b[2Jy` + "\nz"; recs[1][0] != want || recs[0][0] != `name\x1b[31m` {
				t.Errorf("on a terminal: %q %q, want %q", recs[0][0], recs[1][0], want)
			}
		} else if recs[1][0] != evil || recs[0][0] != "name\x1b[31m" {
			t.Errorf("into a file: %q %q, want the exact value", recs[0][0], recs[1][0])
		}
	}
}

// TestTablesCannotFakeRows: every table printed on a terminal escapes the
// service's text cell by cell, so a subscription's name or a stream's id
// holding a newline or a tab cannot print a row or a column of its own
// (the tables kept both; only sepipe query's was fixed first).
func TestTablesCannotFakeRows(t *testing.T) {
	var b strings.Builder
	printSubscriptions(&b, []extract.Subscription{
		{ID: "01A", Name: "nightly\n01Z\tfake\tPOST", Method: "POST", URL: "https://example.com/hook", Types: []string{"a\tb"}},
		{ID: "01B", Name: "ok", Method: "GET", URL: "https://example.com/other"},
	})
	if lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n"); len(lines) != 3 {
		t.Errorf("2 subscriptions printed as %d lines:\n%s", len(lines)-1, b.String())
	}
	if !strings.Contains(b.String(), `nightly\x0a01Z\x09fake\x09POST`) {
		t.Errorf("the name is not escaped whole:\n%s", b.String())
	}
	b.Reset()
	printSummary(&b, &pipeline.Result{Objects: []pipeline.ObjectResult{{Object: "odd\nstream\tx", Mode: "replace", Rows: 1}}})
	if lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n"); len(lines) != 2 {
		t.Errorf("one stream printed as %d lines:\n%s", len(lines)-1, b.String())
	}
}
