package load_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/service"
)

// stageParts writes rows [from, to) of "thing" for run as part files of
// per rows each, starting at file number first.
func stageParts(t *testing.T, lake load.Lake, run, date string, first, from, to, per int) load.Table {
	t.Helper()
	w, err := load.NewParquetWriter(lake.StagingDir(run, "thing", date), "thing", schema(t),
		load.WithRowsPerFile(int64(per)), load.WithFileNumbers(first, 1))
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i += per {
		rec := batch(t, memory.DefaultAllocator, i, min(per, to-i))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return load.Table{Object: "thing", Schema: schema(t), Files: w.Files(), Rows: w.Rows()}
}

// TestRunLoadLoadsWhileFetching: part files a run loads before its commit
// are invisible until the commit, are not loaded twice by it, are taken
// out again when the stream is read anew, and a commit whose tables do not
// hold them rolls the whole transaction back, keeping the day's earlier
// rows.
func TestRunLoadLoadsWhileFetching(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, wh := newWarehouse(t)
	day := "2026-11-26"
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	run := func(id string) load.Run {
		return load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
	}
	if err := wh.Commit(ctx, run("r1"), []load.Table{stage(t, lake, "r1", day, 40)}); err != nil {
		t.Fatal(err)
	}

	// r2 loads two part files early, is read again, loads one file of
	// its second read early and commits that read's three files.
	rl, err := wh.Begin(ctx, run("r2"))
	if err != nil {
		t.Fatal(err)
	}
	first := stageParts(t, lake, "r2", day, 0, 0, 20, 10)
	if err := rl.LoadFiles(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := rl.Forget(ctx, "thing"); err != nil {
		t.Fatal(err)
	}
	again := stageParts(t, lake, "r2", day, 10, 100, 130, 10)
	early := again
	early.Files = again.Files[:1]
	if err := rl.LoadFiles(ctx, early); err != nil {
		t.Fatal(err)
	}
	if n := rl.Loaded("thing"); n != 1 {
		t.Errorf("Loaded = %d, want 1", n)
	}
	if err := rl.Commit(ctx, run("r2"), []load.Table{again}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing`); n != 30 {
		t.Errorf("the table has %d rows, want the second read's 30 (each file once)", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing WHERE id < 100`); n != 0 {
		t.Errorf("%d rows of the forgotten first read stayed", n)
	}
	if n := count(t, wh.DB(), `SELECT count(DISTINCT id) FROM thing_history`); n != 30 {
		t.Errorf("the history holds %d distinct ids, want 30", n)
	}

	// r3 loads a file early but its stream does not commit: nothing of
	// r3 stays and r2's rows of the day are still there.
	rl, err = wh.Begin(ctx, run("r3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.LoadFiles(ctx, stageParts(t, lake, "r3", day, 0, 500, 505, 10)); err != nil {
		t.Fatal(err)
	}
	if err := rl.Commit(ctx, run("r3"), nil); !errors.Is(err, load.ErrEarlyLoadStale) {
		t.Fatalf("commit without the stream loaded early: %v, want ErrEarlyLoadStale", err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_history WHERE id >= 100 AND id < 130`); n != 30 {
		t.Errorf("after the stale commit the history holds %d of r2's rows, want 30", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM _sepipe_runs WHERE run_id = 'r3'`); n != 0 {
		t.Error("the stale commit recorded its run")
	}
	// So does a commit whose stream wrote other files.
	rl, err = wh.Begin(ctx, run("r4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.LoadFiles(ctx, stageParts(t, lake, "r4", day, 0, 600, 610, 10)); err != nil {
		t.Fatal(err)
	}
	other := stageParts(t, lake, "r4", day, 5, 700, 710, 10)
	if err := rl.Commit(ctx, run("r4"), []load.Table{other}); !errors.Is(err, load.ErrEarlyLoadStale) {
		t.Fatalf("commit of other files: %v, want ErrEarlyLoadStale", err)
	}
	if err := wh.Commit(ctx, run("r4"), []load.Table{other}); err != nil {
		t.Fatalf("the commit from the staged files after the stale one: %v", err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing`); n != 10 {
		t.Errorf("the table has %d rows, want r4's 10", n)
	}
}

// TestRunLoadCancelled: a run cancelled while its transaction is open
// commits nothing (here its first statement sees the cancel; Commit's own
// check of the context covers a cancel after the last one, which a test
// cannot time), and the transaction stays the run's own to roll back:
// database/sql does not end it behind the warehouse's back (which raced
// Close, see load.txContext), so Rollback ends it, the one connection is
// free for the next run, and Close leaves the file to open again.
func TestRunLoadCancelled(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	day := "2026-11-26"
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	run := func(id string) load.Run {
		return load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := wh.Begin(ctx, run("r1"))
	if err != nil {
		t.Fatal(err)
	}
	tb := stageParts(t, lake, "r1", day, 0, 0, 20, 10)
	if err := rl.LoadFiles(ctx, tb); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := rl.Commit(ctx, run("r1"), []load.Table{tb}); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit after the cancel: %v, want context.Canceled", err)
	}
	if err := rl.Rollback(); err != nil {
		t.Errorf("rollback after the failed commit: %v", err)
	}
	if n := wh.DB().Stats().InUse; n != 0 {
		t.Errorf("%d connections still in use after the rollback", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM _sepipe_runs`); n != 0 {
		t.Errorf("the cancelled run recorded %d runs", n)
	}

	// A transaction cancelled mid-load ends only by its Rollback.
	ctx, cancel = context.WithCancel(context.Background())
	rl, err = wh.Begin(ctx, run("r2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.LoadFiles(ctx, stageParts(t, lake, "r2", day, 0, 0, 20, 10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	// database/sql ends a transaction bound to its context soon after
	// the cancel, in a goroutine of its own; give it the time to.
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n := wh.DB().Stats().InUse; n != 1 {
			t.Fatalf("%d connections in use after the cancel, want the transaction's one until its rollback", n)
		}
	}
	if err := rl.Rollback(); err != nil {
		t.Errorf("rollback after the cancel: %v (database/sql ended the transaction on its own)", err)
	}
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := load.OpenWarehouse(context.Background(), lake.WarehousePath())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Commit(context.Background(), run("r3"), []load.Table{stage(t, lake, "r3", day, 5)}); err != nil {
		t.Fatal(err)
	}
}

// TestWantedWhileAnotherProcessWaits: a waiting OpenState tells the
// holder of the working database that it wants it.
func TestWantedWhileAnotherProcessWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := load.Lake{Root: t.TempDir()}
	wh, err := load.OpenState(ctx, lake)
	if err != nil {
		t.Fatal(err)
	}
	if wh.Wanted() {
		t.Fatal("Wanted with no one waiting")
	}
	done := make(chan error, 1)
	go func() {
		other, err := load.OpenState(ctx, lake, load.WithLockWait(time.Minute))
		if err == nil {
			err = other.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !wh.Wanted() {
		if time.Now().After(deadline) {
			t.Fatal("a waiting OpenState was never Wanted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting OpenState: %v", err)
	}
}

// TestRunLoadAppendStreamsHistoryEarly: an append stream's part files go
// into its history early; the commit loads its table from every file and
// its history only from the rest.
func TestRunLoadAppendStreamsHistoryEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, wh := newWarehouse(t)
	day := "2026-11-26"
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	run := load.Run{ID: "a1", Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
	rl, err := wh.Begin(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	all := stageParts(t, lake, "a1", day, 0, 0, 35, 10)
	all.Mode = load.Append
	early := all
	early.Files = all.Files[:2]
	if err := rl.LoadFiles(ctx, early); err != nil {
		t.Fatal(err)
	}
	if err := rl.Commit(ctx, run, []load.Table{all}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing WHERE _sepipe_run_id = 'a1'`); n != 35 {
		t.Errorf("the append table has %d rows of the run, want 35", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_history`); n != 35 {
		t.Errorf("the history has %d rows, want 35 (each file once)", n)
	}
	if n := count(t, wh.DB(), `SELECT count(DISTINCT id) FROM thing_history`); n != 35 {
		t.Errorf("the history has %d distinct ids, want 35", n)
	}
}

// TestEarlyLoadGainsASnapshotDateField: the early load chose the history's
// day column for the schema of the stream's first files; when a later
// schema brings a field of the day column's name (in any case), the day
// column moves aside, to _sepipe_snapshot_date, with the rows of every
// day, as it does for a stream that has the field from the start, and the
// field gets a column of its own. Either with a second LoadFiles, or with
// the commit of a stream whose early rows were forgotten (read again,
// wider).
func TestEarlyLoadGainsASnapshotDateField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field string
		forget      bool
		history     string
		table       string
	}{
		{"loaded again", "snapshot_date", false,
			"0|z|NULL|2026-11-22\n1|a|NULL|2026-11-23\n2|b|svc|2026-11-23\n", "1|a|NULL\n2|b|svc\n"},
		{"forgotten", "Snapshot_Date", true,
			"0|z|NULL|2026-11-22\n2|b|svc|2026-11-23\n", "2|b|svc\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			lake, wh := newWarehouse(t)
			narrow := []service.Field{{ID: "id", Type: "int"}, {ID: "name", Type: "string"}}
			wide := append(narrow[:2:2], service.Field{ID: c.field, Type: "string"})
			d1 := stageJSON(t, lake, "r1", narrow, `{"id":0,"name":"z"}`)
			d1.Mode, d1.PrimaryKey = load.Replace, nil
			if err := commitOn(wh, "r1", "2026-11-22", d1); err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
			run := load.Run{ID: "r2", Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-23"}
			a := stageJSON(t, lake, "r2a", narrow, `{"id":1,"name":"a"}`)
			a.Mode, a.PrimaryKey = load.Replace, nil
			b := stageJSON(t, lake, "r2b", wide, `{"id":2,"name":"b","`+c.field+`":"svc"}`)
			b.Mode, b.PrimaryKey = load.Replace, nil
			rl, err := wh.Begin(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Rollback()
			if err := rl.LoadFiles(ctx, a); err != nil {
				t.Fatal(err)
			}
			all := b
			if c.forget {
				if err := rl.Forget(ctx, "thing"); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := rl.LoadFiles(ctx, b); err != nil {
					t.Fatalf("LoadFiles with the wider schema: %v", err)
				}
				all.Files, all.Rows = append(a.Files[:len(a.Files):len(a.Files)], b.Files...), a.Rows+b.Rows
			}
			if err := rl.Commit(ctx, run, []load.Table{all}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			// The history view's day column is its last (issue 43: the view
			// of the versions; the daily-copy table had it where it was made).
			history := "id|BIGINT\nname|VARCHAR\n" + c.field + "|VARCHAR\n_sepipe_snapshot_date|DATE\n"
			if got := columnsOf(t, wh, "thing_history"); got != history {
				t.Errorf("history columns:\n%swant\n%s", got, history)
			}
			if got := rowsOf(t, wh, `SELECT id, name, `+load.Ident(c.field)+`, _sepipe_snapshot_date FROM thing_history ORDER BY ALL`); got != c.history {
				t.Errorf("history rows:\n%swant\n%s", got, c.history)
			}
			if got := rowsOf(t, wh, `SELECT * FROM thing ORDER BY ALL`); got != c.table {
				t.Errorf("table rows:\n%swant\n%s", got, c.table)
			}
		})
	}
}
