package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/sepipe/sepipe/schemas"
)

// columnDefs returns "name TYPE" for every field of s, plus the
// bookkeeping columns for append and merge tables.
func columnDefs(object string, s *arrow.Schema, mode WriteMode) ([]string, error) {
	defs := make([]string, 0, s.NumFields()+2)
	for _, f := range s.Fields() {
		t, err := columnType(f)
		if err != nil {
			return nil, fmt.Errorf("object %q field %q: %w", object, f.Name, err)
		}
		defs = append(defs, Ident(f.Name)+" "+t)
	}
	if mode != Replace {
		defs = append(defs, Ident(ColRunID)+" VARCHAR", Ident(ColSnapshotDate)+" DATE")
	}
	return defs, nil
}

// Commit loads a run's tables and records the run in one transaction,
// begun and committed here (Begin, RunLoad.Commit, which says what goes
// in).
func (w *Warehouse) Commit(ctx context.Context, run Run, tables []Table) error {
	r, err := w.Begin(ctx, run)
	if err != nil {
		return err
	}
	return r.Commit(ctx, run, tables)
}

func loadTable(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake, early *earlyTable, room *loadRoom) error {
	mode := t.Mode
	if mode == "" {
		mode = Replace
	}
	fail := func(step string, err error) error {
		return &WriteError{Object: t.Object, Step: step, Path: t.Object, Err: err}
	}
	if err := checkFields(t); err != nil {
		return fail("load", err)
	}
	if mode == Merge && len(t.PrimaryKey) == 0 {
		return fail("merge", errors.New("merge needs a primary key"))
	}
	defs, err := columnDefs(t.Object, t.Schema, mode)
	if err != nil {
		return fail("derive table", err)
	}
	table := Ident(t.Object)
	// A replace stream's table is a view of its history's day: the run's
	// rows are inserted once, into the history, not twice (see
	// replaceView). Any other stream has a table of its own; either may
	// replace the other when a stream's mode changes.
	asView := isView(run, t)
	kind, err := relationKind(ctx, tx, t.Object)
	if err != nil {
		return fail("inspect table", err)
	}
	// A merge stream's new rows are counted by the merge itself, in the
	// join that finds the rows it replaces (deleteOld), not by a count of
	// its own: that took about a third of a second of a nightly merge's
	// load of 1 M rows, 2.4 s (issue 14). Not when its table is still a
	// view (the stream was a replace stream): the merge starts from an
	// empty table.
	mergeCounts := t.NewRows != nil && mode == Merge && !t.FullRefresh && len(t.Files) > 0 && kind != "view"
	// A replace stream's new rows are counted by the fold of its day into
	// its versions (foldLatest: the day's rows its current versions, the
	// view as it was, did not hold), not by a count of their own, when
	// the day comes after every day the stream was read (no rerun).
	foldCounts := false
	if t.NewRows != nil && asView && kind == "view" {
		if foldCounts, err = foldsLatest(ctx, tx, t.Object, run.SnapshotDate); err != nil {
			return fail("inspect the history", err)
		}
	}
	if t.NewRows != nil && !mergeCounts && !foldCounts {
		n, err := countNew(ctx, tx, t, room)
		if we := (*WriteError)(nil); errors.As(err, &we) {
			return err // the limit's, naming the step
		} else if err != nil {
			return fail("count new rows", err)
		}
		*t.NewRows = n
	}
	switch {
	case !startsAfresh(kind, asView):
	case asView:
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+table); err != nil {
			return fail("replace the table by a view of the history", err)
		}
	default:
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+table); err != nil {
			return fail("replace the view of the history by a table", err)
		}
	}
	switch {
	case asView:
		if err := early.finish(ctx, tx, run, t, lake, room, foldCounts); err != nil {
			return err
		}
		if err := replaceView(ctx, tx, run, t); err != nil {
			return err
		}
	case mode == Replace || t.FullRefresh:
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TABLE "+table+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fail("create table", err)
		}
	default:
		if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fail("create table", err)
		}
		if err := alignColumns(ctx, tx, t); err != nil {
			return err
		}
	}
	cols := make([]string, t.Schema.NumFields())
	for i, f := range t.Schema.Fields() {
		cols[i] = Ident(f.Name)
	}
	colList := strings.Join(cols, ", ")
	src := readStaged(t.Files)
	var want int64 = t.Rows
	var countSQL string // counts the run's rows in the table; "" when got has them
	var got int64
	switch {
	case asView:
		countSQL = "SELECT count(*) FROM " + table // the history's rows of the day
	case len(t.Files) == 0:
		countSQL = "SELECT count(*) FROM " + table
		if mode != Replace && !t.FullRefresh {
			countSQL += " WHERE " + Ident(ColRunID) + " = " + Literal(run.ID)
		}
		want = 0
	case mode == Replace:
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", table, colList, colList, src)); err != nil {
			return fail("load parquet", err)
		}
		countSQL = "SELECT count(*) FROM " + table
	case mode == Append:
		if !t.FullRefresh {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE "+Ident(ColSnapshotDate)+" = CAST(? AS DATE)", run.SnapshotDate); err != nil {
				return fail("replace the day's rows", err)
			}
		}
		q := fmt.Sprintf("INSERT INTO %s (%s, %s, %s) SELECT %s, ?, CAST(? AS DATE) FROM %s",
			table, colList, Ident(ColRunID), Ident(ColSnapshotDate), colList, src)
		if _, err := tx.ExecContext(ctx, q, run.ID, run.SnapshotDate); err != nil {
			return fail("load parquet", err)
		}
		countSQL = "SELECT count(*) FROM " + table + " WHERE " + Ident(ColRunID) + " = " + Literal(run.ID)
	case mode == Merge:
		// The rows the insert reports against the staged rows less the
		// repeats of a key: no scan of the table for the run's rows.
		n, w, fresh, err := mergeRows(ctx, tx, run, t, cols, src, mergeCounts, room)
		if err != nil {
			return err
		}
		got, want = n, w
		if mergeCounts {
			*t.NewRows = fresh
		}
	}
	n := got
	if countSQL != "" {
		if err := tx.QueryRowContext(ctx, countSQL).Scan(&n); err != nil {
			return fail("count rows", err)
		}
	}
	if n != want {
		return &WriteError{Object: t.Object, Step: "verify load", Path: t.Object,
			Err: fmt.Errorf("table has %d rows of this run, the run wrote %d", n, want)}
	}
	// The columns' comments, once the table is the one that stays (a merge
	// may have made a new one, keepOthers).
	for _, f := range t.Schema.Fields() {
		if d, ok := f.Metadata.GetValue(schemas.MetaDisplayName); ok && d != "" {
			if err := commentColumn(ctx, tx, table, f.Name, d); err != nil {
				return fail("comment column "+f.Name, err)
			}
		}
	}
	switch {
	case t.Cursor != "" && len(t.Files) > 0:
		if err := moveWatermark(ctx, tx, run, t, src); err != nil {
			return err
		}
	case t.Cursor == "":
		// Read whole, without a cursor: a watermark saved before says
		// nothing about this table (a replace stream's view, or a table a
		// later merge starts afresh), so it goes, and a stream given its
		// cursor back reads whole once.
		if _, err := tx.ExecContext(ctx, `DELETE FROM _sepipe_state WHERE stream = ?`, t.Object); err != nil {
			return &WriteError{Object: t.Object, Step: "drop watermark", Path: "_sepipe_state", Err: err}
		}
	}
	if err := recordSchema(ctx, tx, run, t); err != nil {
		return err
	}
	if err := insertRejects(ctx, tx, run.ID, t.Object, t.Rejects); err != nil {
		return err
	}
	if asView {
		return nil // its history has the rows already
	}
	return early.finish(ctx, tx, run, t, lake, room, false)
}

// checkFields refuses a stream whose schema has no fields (an object
// whose describe lists none), before any SQL is built from it: its
// column lists would be empty, and the statements would not parse
// ("INSERT INTO h (, snapshot_date) SELECT , ..."), failing the run's
// one transaction with a parser's error that names neither the stream
// nor the reason.
func checkFields(t Table) error {
	if t.Schema == nil || t.Schema.NumFields() == 0 {
		return schemas.ErrNoFields
	}
	return nil
}

// isView reports whether t's table is a view of its history's day (a
// replace stream's, in a run with a snapshot day): its rows are inserted
// into one table, not two.
func isView(run Run, t Table) bool {
	return (t.Mode == Replace || t.Mode == "") && run.SnapshotDate != ""
}

// startsAfresh reports whether a stream's load drops its table, of kind
// ("table", "view" or "" for none; relationKind), to start it afresh as
// the other kind (asView, isView): its mode changed from replace, whose
// table is a view of its history's day, to append or merge, whose table
// is one of its own, or back. The new table then holds the run's rows
// alone (a merge starts from an empty table). The one owner of the rule:
// loadTable drops by it, and Warehouse.StartsAfresh tells the pipeline
// before the run, so that its Iceberg table is rebuilt alike.
func startsAfresh(kind string, asView bool) bool {
	return (kind == "table" && asView) || (kind == "view" && !asView)
}

// StartsAfresh reports whether the next run's load of object, a stream
// in mode, on day (the run's snapshot day), starts its table afresh
// because the stream's mode changed between replace and append or merge
// (startsAfresh): the table then holds that run's rows alone. The
// output folder's lock, held from before the question to the run's
// commit, keeps the answer true until the load.
func (w *Warehouse) StartsAfresh(ctx context.Context, object string, mode WriteMode, day string) (bool, error) {
	kind, err := relationKind(ctx, w.db, object)
	if err != nil {
		return false, fmt.Errorf("warehouse %s: inspect table %s: %w", w.path, object, err)
	}
	return startsAfresh(kind, isView(Run{SnapshotDate: day}, Table{Mode: mode})), nil
}

// tablesWritten is how many tables a run inserts t's rows into: its
// history (in a run with a snapshot day) and its own table, unless that
// is a view of the history.
func tablesWritten(run Run, t Table) int {
	if run.SnapshotDate == "" || isView(run, t) {
		return 1
	}
	return 2
}

// replaceView makes a replace stream's table a view of its history as
// it stood on the run's day: the versions that hold on that day
// (asOfDay), each as many times as the day held it, which loadHistory
// has just folded in. The run's rows are then inserted into DuckDB once:
// loading them into a table of their own and again into the history was
// half of a load's time (issue 14). The view names the versions table,
// not a path, so the output folder stays portable; its columns are the
// stream's fields, with the types the versions hold them in (a type the
// stream once widened stays wide), named as the fields are: a column
// keeps the spelling of the field that made it, and a stream that now
// spells it otherwise (in another case; columnNamed) shows the new
// spelling, as a table a full refresh makes anew would.
func replaceView(ctx context.Context, tx *sql.Tx, run Run, t Table) error {
	cols := make([]string, t.Schema.NumFields())
	for i, f := range t.Schema.Fields() {
		cols[i] = "v." + Ident(f.Name) + " AS " + Ident(f.Name)
	}
	q := "CREATE OR REPLACE VIEW " + Ident(t.Object) + " AS SELECT " + strings.Join(cols, ", ") + " FROM (SELECT *, unnest(range(" + colRows + ")) FROM " +
		Ident(VersionsTable(t.Object)) + " v WHERE " + asOfDay("v", run.SnapshotDate) + ") v"
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: t.Object, Step: "create the view of the day", Path: t.Object, Err: err}
	}
	return nil
}
