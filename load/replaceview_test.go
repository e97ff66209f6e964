package load_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepipe/sepipe/load"
)

// TestReplaceTableIsTheHistorysDay: a replace stream's table is a view of
// its history's latest day (the rows are inserted once); it keeps the
// column comments; a stream that turns append gets a table of its own,
// and back again a view, each time with the rows of its own run.
func TestReplaceTableIsTheHistorysDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, wh := newWarehouse(t)
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	commit := func(id, day string, n int, mode load.WriteMode) {
		t.Helper()
		tb := stage(t, lake, id, day, n)
		tb.Mode = mode
		if err := wh.Commit(ctx, load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}, []load.Table{tb}); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	kind := func() string {
		t.Helper()
		var k string
		if err := wh.DB().QueryRow(`SELECT 'table' FROM duckdb_tables() WHERE table_name = 'thing'
			UNION ALL SELECT 'view' FROM duckdb_views() WHERE view_name = 'thing'`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	commit("r1", "2026-11-23", 50, load.Replace)
	commit("r2", "2026-11-24", 30, load.Replace)
	if k := kind(); k != "view" {
		t.Fatalf("a replace stream's table is a %s, want a view of its history", k)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing`); n != 30 {
		t.Errorf("rows %d, want the latest day's 30", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_history`); n != 80 {
		t.Errorf("history rows %d, want 80", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM (SELECT * FROM thing EXCEPT ALL SELECT * EXCLUDE (snapshot_date) FROM thing_history WHERE snapshot_date = DATE '2026-11-24')`); n != 0 {
		t.Errorf("%d rows of the view are not the history's day", n)
	}
	var comment string
	if err := wh.DB().QueryRow(`SELECT comment FROM duckdb_columns() WHERE table_name='thing' AND column_name='name'`).Scan(&comment); err != nil || comment != "Learner's name" {
		t.Errorf("column comment %q, %v", comment, err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM duckdb_columns() WHERE table_name='thing' AND column_name = 'snapshot_date'`); n != 0 {
		t.Error("the view shows the history's day column")
	}

	commit("r3", "2026-11-25", 20, load.Append)
	if k := kind(); k != "table" {
		t.Fatalf("an append stream's table is a %s", k)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing WHERE _sepipe_run_id = 'r3'`); n != 20 {
		t.Errorf("append table rows of r3 %d, want 20", n)
	}
	commit("r4", "2026-11-26", 10, load.Replace)
	if k := kind(); k != "view" {
		t.Fatalf("back to replace: a %s", k)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing`); n != 10 {
		t.Errorf("rows %d, want 10", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_history`); n != 110 {
		t.Errorf("history rows %d, want 110 (50 + 30 + 20 + 10)", n)
	}
}
