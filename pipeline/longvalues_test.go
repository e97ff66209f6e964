package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
)

// TestValuesOverTheLimitAreKeptInTheLake: a value longer than
// MaxValueBytes is null in its row, which stays in the table; the reject
// names the file in the published lake partition that holds the value's
// exact JSON text; the other rows and values are as sent. A second run
// of the day replaces the partition and its files.
func TestValuesOverTheLimitAreKeptInTheLake(t *testing.T) {
	t.Parallel()
	long := `"` + strings.Repeat("a\\\"b ", 120) + `"` // 602 bytes of JSON text, escapes included
	srv := oddTenant(t, []string{
		`{"id":1,"name":"fine","n":1}`,
		`{"id":2,"name":` + long + `,"n":2}`,
		`{"id":3,"name":"short","n":` + long + `}`,
	})
	out := t.TempDir()
	for run := range 2 {
		res, err := pipeline.Sync(context.Background(), client(t, srv.URL, "tok-SECRET-4f1c9a"),
			pipeline.Config{Out: out, Now: clock(day1), MaxValueBytes: 512})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		o := objectResult(t, res, "odd")
		if o.Rows != 3 || o.RejectedRows != 0 || o.LongValues != 2 {
			t.Fatalf("run %d: rows %d, rejected %d, long values %d; want 3, 0, 2", run, o.Rows, o.RejectedRows, o.LongValues)
		}
	}
	db := warehousetest.Open(t, out)
	if got := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM odd WHERE (id = 1 AND name = 'fine' AND n = 1)
		OR (id = 2 AND name IS NULL AND n = 2) OR (id = 3 AND name = 'short' AND n IS NULL)`); got != 3 {
		t.Errorf("%d of the 3 rows as expected", got)
	}
	if got := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM odd_history`); got != 3 {
		t.Errorf("history rows %d, want 3", got)
	}
	rows, err := db.Query(`SELECT row_in_page, field, raw_value, raw_row, raw_value_file, reason FROM _sepipe_rejects
		WHERE object = 'odd' AND run_id = (SELECT max(run_id) FROM _sepipe_runs) ORDER BY row_in_page`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var files []string
	for rows.Next() {
		var row int
		var field, value, rawRow, file, reason string
		if err := rows.Scan(&row, &field, &value, &rawRow, &file, &reason); err != nil {
			t.Fatal(err)
		}
		want := map[int]string{1: "name", 2: "n"}[row]
		if field != want || value != "" || strings.Contains(rawRow, "a\\\"b") || !strings.Contains(reason, file) {
			t.Errorf("reject of row %d: field %q value %q raw row %q reason %q", row, field, value, rawRow, reason)
		}
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(file)))
		if err != nil {
			t.Fatalf("row %d: the value's file: %v", row, err)
		}
		if string(b) != long {
			t.Errorf("row %d: file holds %q, want the value as sent", row, b)
		}
		files = append(files, file)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || !strings.HasPrefix(files[0], "lake/odd/snapshot_date=2026-11-23/raw-values/") {
		t.Fatalf("files %q", files)
	}
	kept, err := os.ReadDir(filepath.Join(out, "lake", "odd", "snapshot_date=2026-11-23", "raw-values"))
	if err != nil || len(kept) != 2 {
		t.Errorf("raw-values holds %d files (%v), want the second run's 2", len(kept), err)
	}
}
