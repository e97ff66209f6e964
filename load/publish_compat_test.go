package load

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetadataChainsResolve: the check that lets a publish copy the
// working database byte for byte. A warehouse a demo's daily runs left
// under DuckDB's metadata reuse (testdata: its header, free list and
// metadata blocks as they were, the data blocks zeroed, which the check
// never reads) has a metadata block whose chain continues in a block that
// holds no metadata, which DuckDB 1.1 cannot follow ("Failed to load
// metadata pointer"): found. The working database of days of runs under
// this sepipe (reuse off: inserts, deletes, a new column, a dropped and a
// replaced table, each in a session of its own) has none, and a file that
// is no DuckDB database is an error, so that the publish writes anew.
func TestMetadataChainsResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.duckdb")
	gz, err := os.Open(filepath.Join("testdata", "metadata-reuse-1.1-unreadable.duckdb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if err := metadataChainsResolve(bad); err == nil || !strings.Contains(err.Error(), "holds no metadata") {
		t.Errorf("a warehouse DuckDB 1.1 cannot read: %v, want the dangling chain found", err)
	}

	garbage := filepath.Join(dir, "garbage.duckdb")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := metadataChainsResolve(garbage); err == nil {
		t.Error("a file that is no DuckDB database passed")
	}

	ctx := context.Background()
	lake := Lake{Root: t.TempDir()}
	for day, stmts := range [][]string{
		{`CREATE TABLE t AS SELECT range AS id, md5(range::VARCHAR) AS name FROM range(200000)`, `CREATE TABLE h AS SELECT * FROM t`},
		{`DELETE FROM t WHERE id % 7 = 0`, `INSERT INTO h SELECT * FROM t`, `ALTER TABLE t ADD COLUMN score DOUBLE`},
		{`UPDATE t SET score = id / 3 WHERE id % 5 = 0`, `DROP TABLE h`, `CREATE TABLE h AS SELECT id, name FROM t WHERE id < 1000`},
		{`INSERT INTO t SELECT range + 200000, 'new', NULL FROM range(50000)`},
		{`SELECT 1`}, // a session that changes nothing
	} {
		wh, err := OpenState(ctx, lake)
		if err != nil {
			t.Fatal(err)
		}
		var reuse bool
		if err := wh.DB().QueryRowContext(ctx, `SELECT current_setting('experimental_metadata_reuse')::BOOLEAN`).Scan(&reuse); err != nil || reuse {
			t.Fatalf("the working database's connection: metadata reuse %v (%v), want off", reuse, err)
		}
		for _, q := range stmts {
			if _, err := wh.DB().ExecContext(ctx, q); err != nil {
				t.Fatalf("day %d: %s: %v", day, q, err)
			}
		}
		if err := wh.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		wh.Close()
		if err := metadataChainsResolve(lake.StatePath()); err != nil {
			t.Fatalf("day %d: the working database of this sepipe: %v", day, err)
		}
	}
}
