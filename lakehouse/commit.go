package lakehouse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Result is what Commit did.
type Result struct {
	// SnapshotID is the snapshot that holds the run's change (0 when the
	// intent changed nothing: no rows and nothing to replace).
	SnapshotID int64
	// Already reports that the run's snapshot was in the table before
	// this call (the commit is idempotent by run id).
	Already bool
	// Attempts is how many times the commit was planned and sent (more
	// than one when other writers committed first).
	Attempts int
	// Added and Removed count data files the snapshot added and removed
	// (Removed includes files rewritten by a merge).
	Added, Removed int
}

// Commit puts an Intent into its table as ONE snapshot whose summary
// holds sepipe.run-id, sepipe.day and sepipe.mode:
//
//   - replace and append: the table's data files of the intent's day are
//     removed and the intent's files added (an Iceberg append when the
//     day had none, an overwrite otherwise);
//   - merge: rows whose primary key is among the intent's rows are
//     removed (the files holding them are rewritten without them) and
//     the intent's files added (an overwrite).
//
// Commit is idempotent by run id: when a snapshot of the table already
// carries the intent's run id, it does nothing and reports Already. When
// another writer commits first (an optimistic concurrency conflict), the
// table is loaded again and the change planned again on top of the other
// writer's snapshot, so neither change is lost or applied twice; after
// WithCommitAttempts tries it fails with ErrConflictsExhausted. An error
// whose outcome is unknown (a dropped connection during the catalog
// update) leaves the intent for Reconcile.
func (l *Lakehouse) Commit(ctx context.Context, in Intent) (Result, error) {
	name := identString(in.Table)
	if err := in.check(); err != nil {
		return Result{}, &TableError{Table: name, Step: "commit", Err: err}
	}
	var res Result
	wait := l.retryWait
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		tbl, err := l.cat.LoadTable(ctx, in.Table)
		if err != nil {
			return res, &TableError{Table: name, Step: "commit: load table", Err: err}
		}
		if s := snapshotOfRun(tbl.Metadata(), in.RunID); s != nil {
			res.SnapshotID, res.Already = s.SnapshotID, attempt == 1
			return res, nil
		}
		base := tbl.CurrentSnapshot()
		p, err := l.plan(ctx, tbl, in)
		if err != nil {
			return res, err
		}
		if p.empty() {
			p.cleanup(ctx)
			return res, nil // nothing to add, nothing to remove
		}
		txn := tbl.NewTransaction()
		if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
			p.cleanup(ctx)
			return res, &TableError{Table: name, Step: "commit: assert parent", Err: err}
		}
		props := iceberg.Properties{SummaryRunID: in.RunID, SummaryDay: in.Day, SummaryMode: string(in.Mode)}
		add := append(slices.Clone(p.rewritten), in.Files...)
		err = txn.ReplaceDataFiles(ctx, p.remove, add, props)
		if err != nil {
			p.cleanup(ctx)
			return res, &TableError{Table: name, Step: "commit: stage snapshot", Err: err}
		}
		if l.beforeCommit != nil {
			l.beforeCommit(in.Table, attempt)
		}
		next, cerr := txn.Commit(ctx)
		if cerr == nil {
			res.SnapshotID = next.CurrentSnapshot().SnapshotID
			res.Added, res.Removed = len(add), len(p.remove)
			return res, nil
		}
		// Did it land after all, or did another writer move the table?
		fresh, lerr := l.cat.LoadTable(ctx, in.Table)
		if lerr != nil {
			return res, &TableError{Table: name, Step: "commit", Err: errors.Join(cerr, lerr)}
		}
		if s := snapshotOfRun(fresh.Metadata(), in.RunID); s != nil {
			res.SnapshotID = s.SnapshotID
			res.Added, res.Removed = len(add), len(p.remove)
			return res, nil
		}
		p.cleanup(ctx) // this attempt's rewritten files are in no snapshot
		if sameSnapshot(base, fresh.CurrentSnapshot()) {
			return res, &TableError{Table: name, Step: "commit", Err: cerr} // not a conflict
		}
		if attempt >= l.attempts {
			return res, &TableError{Table: name, Step: "commit", Err: fmt.Errorf("%w (%d attempts): %w", ErrConflictsExhausted, attempt, cerr)}
		}
		select {
		case <-ctx.Done():
			return res, context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func sameSnapshot(a, b *table.Snapshot) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.SnapshotID == b.SnapshotID
}

func (in Intent) check() error {
	switch {
	case len(in.Table) < 2:
		return fmt.Errorf("intent names no table: %v", in.Table)
	case !runIDPattern.MatchString(in.RunID):
		return fmt.Errorf("intent's run id %q is not valid", in.RunID)
	case in.Mode != Replace && in.Mode != Append && in.Mode != Merge:
		return fmt.Errorf("intent's mode %q is not valid", in.Mode)
	case in.Mode == Merge && len(in.PrimaryKey) == 0:
		return errors.New("merge intent without a primary key")
	case in.DayColumn == "":
		return errors.New("intent names no day column")
	}
	_, err := dayNumber(in.Day)
	return err
}

// snapshotOfRun finds the snapshot of the table's log whose summary
// carries run.
func snapshotOfRun(meta table.Metadata, run string) *table.Snapshot {
	snaps := meta.Snapshots()
	for i := len(snaps) - 1; i >= 0; i-- {
		s := &snaps[i]
		if s.Summary != nil && s.Summary.Properties[SummaryRunID] == run {
			return s
		}
	}
	return nil
}

// plan is one attempt's change against one table state.
type plan struct {
	l         *Lakehouse
	fs        icebergio.IO
	remove    []string // data files to remove
	rewritten []string // merge: files written by this attempt, rows kept
	intent    Intent
}

func (p *plan) empty() bool {
	return len(p.remove) == 0 && len(p.rewritten) == 0 && len(p.intent.Files) == 0
}

// cleanup removes the files this attempt wrote (they are in no snapshot).
func (p *plan) cleanup(context.Context) {
	for _, f := range p.rewritten {
		_ = p.fs.Remove(f)
	}
	p.rewritten = nil
}

func (l *Lakehouse) plan(ctx context.Context, tbl *table.Table, in Intent) (*plan, error) {
	name := identString(in.Table)
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, &TableError{Table: name, Step: "commit: open file IO", Err: err}
	}
	p := &plan{l: l, fs: fsys, intent: in}
	if tbl.CurrentSnapshot() == nil {
		return p, nil
	}
	switch {
	case in.Rebuild:
		p.remove, err = allFiles(ctx, tbl)
		if err != nil {
			return nil, &TableError{Table: name, Step: "commit: list the table's files", Err: err}
		}
	case in.Mode == Replace, in.Mode == Append:
		p.remove, err = filesOfDay(ctx, tbl, in.DayColumn, in.Day)
		if err != nil {
			return nil, &TableError{Table: name, Step: "commit: find the day's files", Err: err}
		}
	case in.Mode == Merge:
		if err := l.planMerge(ctx, tbl, in, p); err != nil {
			p.cleanup(ctx)
			return nil, err
		}
	}
	return p, nil
}

// allFiles lists the current snapshot's data files.
func allFiles(ctx context.Context, tbl *table.Table) ([]string, error) {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if p := t.File.FilePath(); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// filesOfDay lists the current snapshot's data files in day's partition.
func filesOfDay(ctx context.Context, tbl *table.Table, dayCol, day string) ([]string, error) {
	d, err := dayNumber(day)
	if err != nil {
		return nil, err
	}
	tasks, err := tbl.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference(dayCol), d))).PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range tasks {
		path := t.File.FilePath()
		if seen[path] {
			continue
		}
		seen[path] = true
		// The filter may keep a file for its statistics alone; only files
		// wholly of the day are the day's partition.
		if !fileWhollyOfDay(t.File, tbl.Schema(), dayCol, d) {
			return nil, fmt.Errorf("data file %s holds rows of other days than %s; sepipe partitions by %s and cannot replace part of a file", path, day, dayCol)
		}
		out = append(out, path)
	}
	return out, nil
}

// fileWhollyOfDay reports whether f's day column is day in every row, by
// its lower and upper bounds.
func fileWhollyOfDay(f iceberg.DataFile, sc *iceberg.Schema, dayCol string, day iceberg.Date) bool {
	fld, ok := sc.FindFieldByName(dayCol)
	if !ok {
		return false
	}
	lo, hi := f.LowerBoundValues()[fld.ID], f.UpperBoundValues()[fld.ID]
	if len(lo) != 4 || len(hi) != 4 {
		return false
	}
	v := func(b []byte) int32 {
		return int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	}
	return v(lo) == int32(day) && v(hi) == int32(day)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
