package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/internal/flock"
	"github.com/sepipe/sepipe/schemas"
)

// RunLoad is a run's one transaction on the warehouse, begun before the
// run's streams are all staged. LoadFiles puts a stream's finished part
// files into its history (a replace stream's table is a view of it) while
// the run still fetches the rest (DuckDB's insert is most of a load's time, issue 14); Commit then
// loads what is left and records the run, exactly as Warehouse.Commit
// does. Nothing of the transaction is visible, or survives a killed
// process, before Commit returns.
//
// A RunLoad is not safe for concurrent use.
type RunLoad struct {
	w      *Warehouse
	tx     *sql.Tx
	run    Run
	counts bool // CountingNewRows
	early  map[string]*earlyTable
	done   bool
	room   loadRoom // the room the load's statements make, until the end
}

// earlyTable is what LoadFiles has put into one stream's history.
type earlyTable struct {
	day    string            // the history's day column
	cols   map[string]string // the history's column types
	schema *arrow.Schema     // the schema the files were written with
	files  []string
}

// ErrEarlyLoadStale is returned by RunLoad.Commit when its tables are not
// what LoadFiles loaded (a stream failed, or was read again into other
// files). The transaction is rolled
// back: begin again and commit from the staged files.
var ErrEarlyLoadStale = errors.New("the rows loaded while the run fetched are not the run's tables")

// ErrNotEarly is returned by RunLoad.LoadFiles for a stream that cannot
// load before the commit; the transaction goes on, and the commit loads
// the stream's files.
var ErrNotEarly = errors.New("the stream loads at the commit")

// BeginOption configures Begin.
type BeginOption func(*RunLoad)

// CountingNewRows says that the commit counts streams' new rows
// (Table.NewRows) against their tables as they were before the run: a
// stream whose table is a view of the run's day (a rerun on the same day)
// would change under that count, so LoadFiles gives it ErrNotEarly.
func CountingNewRows() BeginOption { return func(r *RunLoad) { r.counts = true } }

// Begin starts run's transaction (its ID and SnapshotDate; the rest of
// the record is given to Commit). The transaction outlives ctx
// (txContext): its statements take the context they are given, and it
// ends only by Commit or Rollback, which every caller defers, so that no
// rollback of database/sql's own races the warehouse's Close.
func (w *Warehouse) Begin(ctx context.Context, run Run, opts ...BeginOption) (*RunLoad, error) {
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: begin: %w", w.path, err)
	}
	r := &RunLoad{w: w, tx: tx, run: run, early: map[string]*earlyTable{}, room: loadRoom{w: w}}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// CanLoadEarly reports whether a run may hold the working database while
// it fetches: only where the state lock is real, so that Wanted can tell
// it to give the database up.
func CanLoadEarly() bool { return flock.Available }

// Wanted reports whether another sepipe process is waiting for the
// working database's lock. A sync that took it to load while it fetches
// gives it up (RunLoad.Rollback, Close) so that a listen batch or a
// publish is not held for the rest of the fetch.
func (w *Warehouse) Wanted() bool {
	return w.lake != nil && flock.Wanted(w.lake.stateWantPath())
}

// Configure applies opts' memory limit, threads and insertion order
// (their lock wait is for opening only) before the rest of the run is
// loaded: a run that began before its streams were staged learns only then
// how large its pages were.
func (r *RunLoad) Configure(ctx context.Context, opts ...OpenOption) error {
	o := openOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	return r.w.configureOn(ctx, r.tx, o)
}

// LoadFiles inserts the rows of t.Files, finished part files of a stream
// written with t.Schema, into the stream's history as the run's day (for
// an append or merge stream, the commit loads its own table). The first call for a stream prepares its history (created,
// aligned to t.Schema, the day's earlier rows deleted); a later call with
// a wider schema widens it again. See CountingNewRows for ErrNotEarly.
func (r *RunLoad) LoadFiles(ctx context.Context, t Table) error {
	if r.done {
		return r.ended()
	}
	if r.run.SnapshotDate == "" {
		return &WriteError{Object: t.Object, Step: "load early", Path: t.Object,
			Err: errors.New("only a run with a snapshot day loads while it fetches")}
	}
	if err := CheckName(t.Object); err != nil {
		return &WriteError{Object: t.Object, Step: "load", Err: err}
	}
	if err := checkFields(t); err != nil {
		return &WriteError{Object: t.Object, Step: "load early", Path: t.Object, Err: err}
	}
	// The room for the stream's columns first: the first call may fill its
	// history from the lake's earlier partitions (prepareHistory).
	e := r.early[t.Object]
	var cols int
	if e != nil {
		cols = max(t.Schema.NumFields()+1, len(e.cols)) // the history's, as align leaves them
	} else {
		n, err := columnCount(ctx, r.tx, t, 1)
		if err != nil {
			return err
		}
		cols = n
	}
	if err := r.room.forTable(ctx, r.tx, t.Object, cols, 1); err != nil { // its history
		return err
	}
	if e == nil {
		if r.counts {
			shows, err := showsDay(ctx, r.tx, t.Object, r.run.SnapshotDate)
			if err != nil {
				return &WriteError{Object: t.Object, Step: "load early: inspect the table", Path: t.Object, Err: err}
			}
			if shows {
				if err := r.room.doneTable(ctx, r.tx, t.Object); err != nil {
					return err
				}
				return fmt.Errorf("%s: %w: its table shows the run's day, and counting the new rows compares with it", t.Object, ErrNotEarly)
			}
		}
		day, have, err := prepareHistory(ctx, r.tx, t)
		if err != nil {
			return err
		}
		e = &earlyTable{day: day, cols: have, schema: t.Schema}
		r.early[t.Object] = e
	}
	if err := e.align(ctx, r.tx, t); err != nil {
		return err
	}
	if err := insertHistory(ctx, r.tx, r.run, t, t.Files, e.day, e.cols); err != nil {
		return err
	}
	if err := r.room.doneTable(ctx, r.tx, t.Object); err != nil {
		return err
	}
	e.files = append(e.files, t.Files...)
	return nil
}

// ended is the error of a RunLoad used after its Commit or Rollback.
func (r *RunLoad) ended() error {
	return fmt.Errorf("warehouse %s: run %s: its transaction has ended", r.w.path, r.run.ID)
}

// Forget deletes the rows LoadFiles inserted for object: its stream is
// being read again, and its part files are about to go.
func (r *RunLoad) Forget(ctx context.Context, object string) error {
	if r.done {
		return r.ended()
	}
	e := r.early[object]
	if e == nil || len(e.files) == 0 {
		return nil
	}
	h := dayTable(object)
	if _, err := r.tx.ExecContext(ctx, "DELETE FROM "+Ident(h)+" WHERE "+Ident(e.day)+" = CAST(? AS DATE)", r.run.SnapshotDate); err != nil {
		return &WriteError{Object: object, Step: "history: forget the rows loaded early", Path: h, Err: err}
	}
	e.files = nil
	return nil
}

// Loaded is how many part files LoadFiles has put in for object.
func (r *RunLoad) Loaded(object string) int {
	if e := r.early[object]; e != nil {
		return len(e.files)
	}
	return 0
}

// Rollback ends the transaction and drops everything in it.
func (r *RunLoad) Rollback() error {
	if r.done {
		return nil
	}
	r.done = true
	err := r.tx.Rollback()
	r.lowerMemory()
	return err
}

// lowerMemory gives the configured threads back when a failed count of
// new rows left one (countNew), and the configured memory limit once the
// transaction has ended, when a merge or a count raised it (loadRoom), but for what deletes
// still pin (Warehouse.deletePins): only a checkpoint frees that, not the
// commit (nor all of it a rollback), and the session's checkpoint runs at
// the publish or Close, without the limit (closeDB; a checkpoint under the
// load's limit could fail). So a second run on the same warehouse (the
// commit from the staged files after a stale early load) keeps room for
// the first one's pins. It is no failure of the run when DuckDB refuses
// (the run has ended; the publish resets the limit anyway).
func (r *RunLoad) lowerMemory() {
	_ = r.room.reset(context.Background(), r.w.db) // a failed count's one thread, a failed table's
	if !r.room.raised {
		return
	}
	if _, err := r.w.db.Exec("SET memory_limit = " + Literal(r.w.roomLimit(0))); err == nil {
		r.room.raised = false
	}
}

// Commit loads every table of a run, moves the incremental state, records
// the schema versions, the rejects and the run, all in one transaction:
// either all of it is in the warehouse or none of it. The run is recorded
// as not yet published; MarkPublished finishes it once the lake has its
// partitions. Each table's history table gets the run's partition in the
// same transaction; the files LoadFiles loaded are not loaded again.
// When tables do not hold what LoadFiles loaded, Commit rolls back and
// returns ErrEarlyLoadStale. The transaction has ended when it returns.
func (r *RunLoad) Commit(ctx context.Context, run Run, tables []Table) error {
	if r.done {
		return r.ended()
	}
	defer r.Rollback() //nolint:errcheck // no-op after the commit
	if run.ID != r.run.ID || run.SnapshotDate != r.run.SnapshotDate {
		return fmt.Errorf("warehouse %s: commit run %s (%s) in the transaction of run %s (%s)", r.w.path, run.ID, run.SnapshotDate, r.run.ID, r.run.SnapshotDate)
	}
	if err := r.check(tables); err != nil {
		return err
	}
	tx := r.tx
	rowsPer := map[string]int64{}
	for _, t := range tables {
		if err := CheckName(t.Object); err != nil {
			return &WriteError{Object: t.Object, Step: "load", Err: err}
		}
		cols, err := columnCount(ctx, tx, t, 2)
		if err != nil {
			return err
		}
		if err := r.room.forCommit(ctx, tx, t.Object, cols, tablesWritten(run, t)); err != nil {
			return err
		}
		if err := loadTable(ctx, tx, run, t, r.w.lake, r.early[t.Object], &r.room); err != nil {
			return err
		}
		if err := r.room.doneTable(ctx, tx, t.Object); err != nil {
			return err
		}
		if err := recordName(ctx, tx, run.ID, t); err != nil {
			return err
		}
		if err := recordLakeIntent(ctx, tx, run, t); err != nil {
			return err
		}
		rowsPer[t.Object] = t.Rows
		st := t.Stats
		if _, err := tx.ExecContext(ctx, `INSERT INTO _sepipe_run_objects
			(run_id, object, rows, rejected_rows, nulled_values, pages, requests, retries, duration_ms, schema_version, files, status)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			run.ID, t.Object, t.Rows, st.RejectedRows, st.NulledValues, st.Pages, st.Requests, st.Retries,
			st.Duration.Milliseconds(), schemas.SchemaVersion(t.Schema), len(t.Files), StreamCommitted); err != nil {
			return &WriteError{Object: t.Object, Step: "record run object", Path: "_sepipe_run_objects", Err: err}
		}
	}
	if err := insertOutcomes(ctx, tx, run); err != nil {
		return err
	}
	if err := insertRun(ctx, tx, run, rowsPer, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// The transaction outlives ctx; a run cancelled before its commit
		// commits nothing, as it would have bound to ctx.
		return fmt.Errorf("warehouse %s: commit run %s: %w", r.w.path, run.ID, err)
	}
	r.done = true
	err := tx.Commit()
	r.lowerMemory()
	if err != nil {
		return fmt.Errorf("warehouse %s: commit run %s: %w", r.w.path, run.ID, err)
	}
	return nil
}

// check refuses tables that do not hold what LoadFiles loaded: each
// stream loaded early must be among tables, with files that include the
// ones loaded, and may count its new rows only if Begin was told so
// (CountingNewRows: that count compares with the table as it was).
func (r *RunLoad) check(tables []Table) error {
	for object, e := range r.early {
		i := slices.IndexFunc(tables, func(t Table) bool { return t.Object == object })
		if i < 0 {
			return fmt.Errorf("%w: %s is not committed", ErrEarlyLoadStale, object)
		}
		t := tables[i]
		if t.NewRows != nil && !r.counts {
			return fmt.Errorf("%w: %s counts its new rows against a table that may have changed", ErrEarlyLoadStale, object)
		}
		for _, f := range e.files {
			if !slices.Contains(t.Files, f) {
				return fmt.Errorf("%w: %s does not hold %s", ErrEarlyLoadStale, object, f)
			}
		}
	}
	return nil
}

// align widens the history for t's schema when it is not the one the
// loaded files were written with.
//
// The history's day column was chosen for the first schema
// (prepareHistory). A later one may bring a field of the day column's
// name, in any case (a stream read again, wider): alignTo would take the
// day column for the field's (DuckDB compares names ignoring case),
// change its type, and the insert would name it twice. So the day column
// first moves aside, to _sepipe_snapshot_date, exactly as prepareHistory
// moves it for a stream that has the field from the start
// (historyDayColumn): a rename keeps the rows of every day, those loaded
// early included, and the field then gets a column of its own. Every
// later statement of the run names the day column by e.day (Forget, the
// commit's insert and replaceView), so nothing still names the old one.
func (e *earlyTable) align(ctx context.Context, tx *sql.Tx, t Table) error {
	if e.schema.Equal(t.Schema) {
		return nil
	}
	h := dayTable(t.Object)
	day, err := historyDayColumn(ctx, tx, h, e.cols, fieldNames(t.Schema))
	if err != nil {
		return &WriteError{Object: t.Object, Step: "history: day column", Path: h, Err: err}
	}
	e.day = day
	cols, err := alignTo(ctx, tx, t.Object, h, t.Schema)
	if err != nil {
		return err
	}
	e.schema, e.cols = t.Schema, cols
	return nil
}

// finish puts a stream's run into its history: all of it (loadHistory)
// when nothing was loaded early (e is nil), else the files LoadFiles has
// not loaded into the day table, then folds the day table into the
// versions (foldDay). counts: the fold counts t's new rows.
func (e *earlyTable) finish(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake, room *loadRoom, counts bool) error {
	if e == nil {
		return loadHistory(ctx, tx, run, t, lake, room, counts)
	}
	if err := e.align(ctx, tx, t); err != nil {
		return err
	}
	rest := slices.DeleteFunc(slices.Clone(t.Files), func(f string) bool { return slices.Contains(e.files, f) })
	if err := insertHistory(ctx, tx, run, t, rest, e.day, e.cols); err != nil {
		return err
	}
	return foldDay(ctx, tx, run, t, daySource{rel: Ident(dayTable(t.Object)), types: e.cols, counts: counts}, lake, room)
}

// showsDay reports whether object is a view (a replace stream's table)
// of its history's rows of day. The view names the day as a literal;
// whatever DuckDB makes of its text, the date is in it.
func showsDay(ctx context.Context, tx *sql.Tx, object, day string) (bool, error) {
	var text string
	err := tx.QueryRowContext(ctx, `SELECT sql FROM duckdb_views() WHERE schema_name = current_schema() AND view_name = ?`, object).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && strings.Contains(text, day), err
}
