package query_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/query"
)

// TestSandboxReadsOnlyTheLake lists what SQL run by query.Open and
// DB.Query can read: the lake, and nothing else of the machine. It
// plants a file in each place a sandboxed connection could reach by
// DuckDB's own defaults or by sepipe's layout (DuckDB's default temporary
// folder <cwd>/.tmp, the working directory, the output folder's
// bookkeeping with its token file and working database, the published
// warehouse's folder, a sibling of the lake whose name shares its prefix,
// /etc) and tries each of DuckDB's file readers on each. Only the lake's
// file reads. (Issue 40: DuckDB adds its temporary folder to the allowed
// directories, so a query read <cwd>/.tmp/.)
func TestSandboxReadsOnlyTheLake(t *testing.T) {
	ctx := context.Background()
	cwd := t.TempDir()
	t.Chdir(cwd)
	out := filepath.Join(cwd, "out")
	lake := load.Lake{Root: out}
	plant := func(path, text string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// A published warehouse with one table.
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", lake.WarehousePath())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE course AS SELECT 1 AS id`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	inLake := plant(filepath.Join(lake.LakeDir(), "course", "snapshot_date=2026-01-02", "note.csv"), "x\nlake\n")
	secrets := map[string]string{
		"DuckDB's default temporary folder, relative": ".tmp/note.csv",
		"DuckDB's default temporary folder":           plant(filepath.Join(cwd, ".tmp", "note.csv"), "x\ntmp\n"),
		"the working directory":                       plant(filepath.Join(cwd, "note.csv"), "x\ncwd\n"),
		"the token file":                              plant(filepath.Join(out, ".sepipe", "token.json"), "x\ntoken\n"),
		"the output folder":                           plant(filepath.Join(out, "note.csv"), "x\nout\n"),
		"a sibling sharing the lake's prefix":         plant(filepath.Join(out, "lake-private", "note.csv"), "x\nsibling\n"),
		"/etc":                                        "/etc/hostname",
	}
	// By a relative path, as sepipe query beside its sepipe.yaml opens it.
	rel, err := filepath.Rel(cwd, lake.WarehousePath())
	if err != nil {
		t.Fatal(err)
	}
	wh, err := query.Open(ctx, rel, lake.LakeDir())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	readers := []string{
		"SELECT count(*) FROM read_text(%s)",
		"SELECT count(*) FROM read_blob(%s)",
		"SELECT count(*) FROM read_csv(%s)",
		"SELECT count(*) FROM glob(%s)",
	}
	read := func(q, path string) (int64, error) {
		rows, err := wh.Query(ctx, strings.Replace(q, "%s", load.Literal(path), 1))
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		var n int64
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				return 0, err
			}
		}
		return n, rows.Err()
	}
	for _, q := range readers {
		// The lake reads, and so does the warehouse's own file, which
		// DuckDB allows as an attached database's (the bytes of what the
		// query reads anyway; not as CSV).
		for _, p := range []string{inLake, lake.WarehousePath()} {
			if p != inLake && strings.Contains(q, "read_csv") {
				continue
			}
			if n, err := read(q, p); err != nil || n < 1 {
				t.Errorf("%s on %s: %d rows, %v", q, p, n, err)
			}
		}
		for what, path := range secrets {
			if n, err := read(q, path); err == nil && n > 0 {
				t.Errorf("%s read %s (%s): %d rows", q, what, path, n)
			}
		}
	}
	// The settings a query could widen are what sepipe set, and locked.
	for q, want := range map[string]string{
		"SELECT current_setting('enable_external_access')::VARCHAR": "false",
		"SELECT current_setting('lock_configuration')::VARCHAR":     "true",
		"SELECT current_setting('temp_directory')::VARCHAR":         "",
	} {
		rows, err := wh.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var got string
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if got != want {
			t.Errorf("%s = %q, want %q", q, got, want)
		}
	}
}
