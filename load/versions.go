package load

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/internal/faults"
)

// Versions: a stream's history is kept as versions, not as a copy of
// every day (issue 43). <stream>_versions holds one row per version of a
// row: its values, how many identical rows the stream's day held
// (_sepipe_rows), the first read day it was seen with them
// (_sepipe_valid_from), the read day it stopped being there
// (_sepipe_valid_to; null while current), the runs that opened and
// closed it. _sepipe_history_days records the
// days each stream was read (a committed run of the stream with a
// snapshot day), and <stream>_history is a view that expands the
// versions over those days: every row of every day, with the day column,
// exactly the rows the day's lake partition holds, as the daily-copy
// table of earlier releases answered.
//
// A version is a row's whole content: a row whose values change closes
// its version and opens one with the new values; a row gone from the
// day closes it; one that comes back opens a new one. Rows are matched by
// all their values (nulls equal), the exact rule for every mode and for
// streams with or without a primary key: two rows with the same values
// are the same version (counted), and a primary key, when the stream has
// one, is a column of each version, so "what changed" joins versions on
// it. The day's rows of every mode are what its lake partition holds:
// a replace stream's snapshot, an append or merge stream's rows read
// that day (a merge stream's table is its state; the history is what
// was read).
//
// The run's rows are folded into the versions (foldDay) from its staged
// files, or, for the files loaded while the run fetched, from the table
// of the day they went into (_sepipe_day_<stream>, dayTable, dropped by
// the fold); all in the run's one transaction, so the versions change
// with the run's other writes or not at all.

// VersionsTable is the name of the table of a stream's versions.
func VersionsTable(object string) string { return object + "_versions" }

// dayTable is the table a run loads a stream's rows of its day into
// before they are folded into its versions; it lives only inside the
// run's transaction.
func dayTable(object string) string { return "_sepipe_day_" + object }

// The versions' own columns (a field's name never starts with _sepipe:
// schemas renames such a field).
const (
	colRows      = "_sepipe_rows"
	colValidFrom = "_sepipe_valid_from"
	colValidTo   = "_sepipe_valid_to"
	colOpenedBy  = "_sepipe_opened_by"
	colClosedBy  = "_sepipe_closed_by"
)

// VersionColumn is one of the columns a versions table holds beside the
// stream's own.
type VersionColumn struct {
	Name, Type, Description string
	NotNull                 bool // always set
	Run                     bool // a run's id: two folders that hold the same history by other runs differ in it
}

// VersionColumns are a versions table's own columns, in order, with what
// each means: the one owner of their names and types (the table's DDL,
// the fold, and the dbt sources that document them).
var VersionColumns = []VersionColumn{
	{Name: colRows, Type: "BIGINT", Description: "How many identical rows each of the version's days held (1 but for repeated rows)", NotNull: true},
	{Name: colValidFrom, Type: "DATE", Description: "The first read day the row was there with these values", NotNull: true},
	{Name: colValidTo, Type: "DATE", Description: "The read day it stopped being there (changed or gone); null while current"},
	{Name: colOpenedBy, Type: "VARCHAR", Description: "The run that opened the version (null when rebuilt from the lake without a record of it)", Run: true},
	{Name: colClosedBy, Type: "VARCHAR", Description: "The run that closed the version", Run: true},
}

var versionDefs, versionCols = func() (defs, names []string) {
	for _, c := range VersionColumns {
		defs = append(defs, c.Name+" "+c.Type)
		names = append(names, c.Name)
	}
	return defs, names
}()

// isVersionColumn reports one of the versions' own columns (named as
// DuckDB compares names, sameName).
func isVersionColumn(c string) bool {
	return slices.ContainsFunc(versionCols, func(v string) bool { return sameName(v, c) })
}

// historyDaysDDL records the days each stream was read.
const historyDaysDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_history_days (
	object VARCHAR NOT NULL,
	day    DATE NOT NULL,
	run_id VARCHAR
);`

// daySource is where foldDay reads the run's rows of the day: the day
// table rows were loaded into while the run fetched, or the staged files
// (no copy of them first); types are its columns' DuckDB types. counts
// says that the fold's count of new rows is the run's (Table.NewRows):
// the count of new rows did not run before the load (loadTable).
type daySource struct {
	rel    string
	types  map[string]string
	counts bool
}

// filesSource is a daySource of the staged files of t, written with its
// schema; none is a relation of no row.
func filesSource(t Table) (daySource, error) {
	types := make(map[string]string, t.Schema.NumFields())
	empty := make([]string, 0, t.Schema.NumFields())
	for _, f := range t.Schema.Fields() {
		typ, err := columnType(f)
		if err != nil {
			return daySource{}, err
		}
		types[f.Name] = typ
		empty = append(empty, "CAST(NULL AS "+typ+") AS "+Ident(f.Name))
	}
	if len(t.Files) == 0 {
		return daySource{rel: "(SELECT " + strings.Join(empty, ", ") + " WHERE false)", types: types}, nil
	}
	return daySource{rel: readStaged(t.Files), types: types}, nil
}

// rowsQuerier runs queries of many rows (a *sql.DB or *sql.Tx).
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// column is a table's column: its name and DuckDB type.
type column struct{ name, typ string }

// orderedColumns lists table's columns in their order.
func orderedColumns(ctx context.Context, q rowsQuerier, table string) ([]column, error) {
	return queryColumns(ctx, q, `SELECT column_name, data_type FROM duckdb_columns()
		WHERE schema_name = current_schema() AND table_name = ? ORDER BY column_index`, table)
}

// describeColumns lists the columns a query returns.
func describeColumns(ctx context.Context, q rowsQuerier, query string) ([]column, error) {
	return queryColumns(ctx, q, "SELECT column_name, column_type FROM (DESCRIBE "+query+")")
}

// queryColumns reads columns, a name and a type a row, from query.
func queryColumns(ctx context.Context, q rowsQuerier, query string, args ...any) ([]column, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// defsOf is "name TYPE" of each of cols.
func defsOf(cols []column) []string {
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = Ident(c.name) + " " + c.typ
	}
	return defs
}

// dataColumns lists the columns of a versions table that hold the rows'
// values, in order.
func dataColumns(ctx context.Context, q rowsQuerier, object string) ([]column, error) {
	cols, err := orderedColumns(ctx, q, VersionsTable(object))
	if err != nil {
		return nil, err
	}
	out := cols[:0]
	for _, c := range cols {
		if !isVersionColumn(c.name) {
			out = append(out, c)
		}
	}
	return out, nil
}

func identList(cols []column, prefix string) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = prefix + Ident(c.name)
	}
	return strings.Join(s, ", ")
}

// createVersions creates object's versions table with the columns defs
// ("name TYPE").
func createVersions(ctx context.Context, tx *sql.Tx, object string, defs []string) error {
	v := VersionsTable(object)
	q := "CREATE TABLE " + Ident(v) + " (" + strings.Join(append(defs, versionDefs...), ", ") + ")"
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: object, Step: "history: create the versions table", Path: v, Err: err}
	}
	return nil
}

// ensureVersions makes object's versions table exist, with t's columns.
// When it did not, it is built from what the history was: an earlier
// release's daily-copy <stream>_history table (migrated, exactly), or
// the lake's partitions of days other than the run's (an earlier
// release's history view over the lake is dropped first). All in tx: a
// run killed while it migrates leaves the old history as it was.
func ensureVersions(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake) error {
	v := VersionsTable(t.Object)
	kind, err := relationKind(ctx, tx, v)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "history: inspect", Path: v, Err: err}
	}
	if kind == "" {
		if err := buildVersions(ctx, tx, t.Object, lake, run.SnapshotDate); err != nil {
			return err
		}
		if kind, err = relationKind(ctx, tx, v); err != nil {
			return &WriteError{Object: t.Object, Step: "history: inspect", Path: v, Err: err}
		}
	}
	if kind == "" {
		defs, err := columnDefs(t.Object, t.Schema, Replace)
		if err != nil {
			return &WriteError{Object: t.Object, Step: "history: derive table", Path: v, Err: err}
		}
		if err := createVersions(ctx, tx, t.Object, defs); err != nil {
			return err
		}
	}
	_, err = alignTo(ctx, tx, t.Object, v, t.Schema)
	return err
}

// buildVersions builds object's versions from its history as an earlier
// release kept it, when there is one: the daily-copy history table, or
// else the lake's partitions but skip's. It creates no table when there
// is neither.
func buildVersions(ctx context.Context, tx *sql.Tx, object string, lake *Lake, skip string) error {
	h := HistoryTable(object)
	kind, err := relationKind(ctx, tx, h)
	if err != nil {
		return &WriteError{Object: object, Step: "history: inspect", Path: h, Err: err}
	}
	switch kind {
	case "table":
		return migrateHistoryTable(ctx, tx, object)
	case "view": // an earlier release's view over the lake, or a view over versions lost
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+Ident(h)); err != nil {
			return &WriteError{Object: object, Step: "history: drop the old view", Path: h, Err: err}
		}
	}
	if lake == nil {
		return nil
	}
	return versionsFromLake(ctx, tx, *lake, object, skip, nil)
}

// migrateHistoryTable turns an earlier release's daily-copy history
// table into versions: the same rows on the same days, and the days the
// stream was read (those of its rows, and of its committed runs, which
// may have read no row), then drops the table; the view takes its name.
func migrateHistoryTable(ctx context.Context, tx *sql.Tx, object string) error {
	h := HistoryTable(object)
	fail := func(step string, err error) error {
		return &WriteError{Object: object, Step: "history: migrate: " + step, Path: h, Err: err}
	}
	cols, err := orderedColumns(ctx, tx, h)
	if err != nil {
		return fail("read columns", err)
	}
	have := make(map[string]string, len(cols))
	for _, c := range cols {
		have[c.name] = c.typ
	}
	day, err := historyDayColumn(ctx, tx, h, have, nil)
	if err != nil {
		return fail("day column", err)
	}
	data := slices.DeleteFunc(cols, func(c column) bool { return c.name == day })
	if err := createVersions(ctx, tx, object, defsOf(data)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO _sepipe_history_days (object, day, run_id)
		SELECT ?, day, max(run_id) FROM (
			SELECT DISTINCT `+Ident(day)+` AS day, NULL::VARCHAR AS run_id FROM `+Ident(h)+`
			UNION ALL
			SELECT r.snapshot_date, r.run_id FROM _sepipe_run_objects o JOIN _sepipe_runs r USING (run_id)
			WHERE o.object = ? AND o.status = ? AND r.snapshot_date IS NOT NULL)
		WHERE day IS NOT NULL GROUP BY day`, object, object, StreamCommitted); err != nil {
		return fail("record the days", err)
	}
	src := "(SELECT " + identList(data, "") + ", " + Ident(day) + " AS _sepipe_day FROM " + Ident(h) + " WHERE " + Ident(day) + " IS NOT NULL)"
	if err := rebuildVersions(ctx, tx, object, data, src); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE "+Ident(h)); err != nil {
		return fail("drop the daily copies", err)
	}
	return writeHistoryView(ctx, tx, object)
}

// versionsFromLake builds object's versions from its lake partitions
// (but skip's), columns unified by name as DuckDB's union_by_name does;
// the partitions' days are the stream's read days, each recorded with
// the run runs gives it (none when nil). It creates no table when the
// lake has no partition.
func versionsFromLake(ctx context.Context, tx *sql.Tx, lake Lake, object, skip string, runs map[string]string) error {
	v := VersionsTable(object)
	parts, err := partitionFiles(lake, object)
	if err != nil {
		return &WriteError{Object: object, Step: "history: list the lake", Path: lake.ObjectDir(object), Err: err}
	}
	var files, pairs, days []string
	for d, fs := range parts {
		if d == skip {
			continue
		}
		days = append(days, d)
		for _, f := range fs {
			files = append(files, f)
			pairs = append(pairs, "("+Literal(f)+", CAST("+Literal(d)+" AS DATE))")
		}
	}
	if len(files) == 0 {
		return nil
	}
	src := readStaged(files, withFile)
	cols, err := describeColumns(ctx, tx, "SELECT * EXCLUDE ("+fileColumn+") FROM "+src)
	if err != nil {
		return &WriteError{Object: object, Step: "history: read the lake", Path: lake.ObjectDir(object), Err: err}
	}
	if err := createVersions(ctx, tx, object, defsOf(cols)); err != nil {
		return err
	}
	for _, d := range days {
		if err := recordDay(ctx, tx, object, d, runs[d]); err != nil {
			return err
		}
	}
	rel := "(SELECT p.* EXCLUDE (" + fileColumn + "), d.day AS _sepipe_day FROM " + src + " p JOIN (VALUES " +
		strings.Join(pairs, ", ") + ") d(f, day) ON p." + fileColumn + " = d.f)"
	if err := rebuildVersions(ctx, tx, object, cols, rel); err != nil {
		return &WriteError{Object: object, Step: "history: load the lake's partitions", Path: v, Err: err}
	}
	return nil
}

// recordDay records that object was read on day by run (run "" when not
// known: a day rebuilt from the lake), replacing an earlier record of
// the day.
func recordDay(ctx context.Context, tx *sql.Tx, object, day, run string) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM _sepipe_history_days WHERE object = ? AND day = CAST(? AS DATE)", object, day); err != nil {
		return &WriteError{Object: object, Step: "history: record the day", Path: "_sepipe_history_days", Err: err}
	}
	var id any
	if run != "" {
		id = run
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO _sepipe_history_days (object, day, run_id) VALUES (?, CAST(? AS DATE), ?)", object, day, id); err != nil {
		return &WriteError{Object: object, Step: "history: record the day", Path: "_sepipe_history_days", Err: err}
	}
	return nil
}

// rebuildVersions replaces object's versions by those of src, a
// relation of the rows of every read day: the versions table's data
// columns cols and _sepipe_day. Each day of src must be one of the
// stream's read days (_sepipe_history_days). Rows of equal values on
// consecutive read days, in equal numbers, are one version (islands of
// consecutive days: the day's rank less the row's rank among its equals).
func rebuildVersions(ctx context.Context, tx *sql.Tx, object string, cols []column, src string) error {
	v := VersionsTable(object)
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+Ident(v)); err != nil {
		return &WriteError{Object: object, Step: "history: rebuild versions", Path: v, Err: err}
	}
	c, gc := identList(cols, ""), identList(cols, "g.")
	q := "INSERT INTO " + Ident(v) + " (" + c + ", " + strings.Join(versionCols, ", ") + `)
		WITH d AS (SELECT day, run_id, row_number() OVER (ORDER BY day) AS i FROM _sepipe_history_days WHERE object = ` + Literal(object) + `),
		g AS (SELECT ` + c + `, _sepipe_day, count(*) AS _sepipe_n FROM ` + src + ` s GROUP BY ALL),
		x AS (SELECT ` + gc + `, g._sepipe_n, d.i, d.i - row_number() OVER (PARTITION BY ` + gc + `, g._sepipe_n ORDER BY d.i) AS _sepipe_island
			FROM g JOIN d ON g._sepipe_day = d.day),
		y AS (SELECT ` + c + `, _sepipe_n, min(i) AS fi, max(i) AS li FROM x GROUP BY ` + c + `, _sepipe_n, _sepipe_island)
		SELECT ` + identList(cols, "y.") + `, y._sepipe_n, f.day, l.day, f.run_id, l.run_id
		FROM y JOIN d f ON f.i = y.fi LEFT JOIN d l ON l.i = y.li + 1`
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: object, Step: "history: rebuild versions", Path: v, Err: err}
	}
	return nil
}

// foldDay folds the run's rows of t's day, in its day table, into t's
// versions, records the day as read, drops the day table and makes the
// history view. A rerun on the stream's last read day first undoes that
// day's changes; a day before the last (a clock set back) rebuilds the
// versions from every day's rows.
func foldDay(ctx context.Context, tx *sql.Tx, run Run, t Table, src daySource, lake *Lake, room *loadRoom) (err error) {
	v, D := VersionsTable(t.Object), run.SnapshotDate
	fail := func(step string, err error) error {
		return &WriteError{Object: t.Object, Step: "history: " + step, Path: v, Err: err}
	}
	if err := ensureVersions(ctx, tx, run, t, lake); err != nil {
		return err
	}
	cols, err := dataColumns(ctx, tx, t.Object)
	if err != nil {
		return fail("read columns", err)
	}
	// The day's rows as the versions' columns: cast to the versions' type
	// (a column the history once widened stays wide), null for a column
	// the stream no longer has.
	exprs := make([]string, len(cols))
	for i, c := range cols {
		if s, ok := columnNamed(src.types, c.name); ok {
			exprs[i] = castTo(Ident(s), src.types[s], c.typ) + " AS " + Ident(c.name)
		} else {
			exprs[i] = "CAST(NULL AS " + c.typ + ") AS " + Ident(c.name)
		}
	}
	day := "SELECT " + strings.Join(exprs, ", ") + " FROM " + src.rel
	// The fold groups the day's rows with the current versions (foldBytes).
	var held int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+Ident(v)+" WHERE "+colValidTo+" IS NULL").Scan(&held); err != nil {
		return fail("count the current versions", err)
	}
	if room != nil {
		if _, err := room.set(ctx, tx, t.Object, "history: fold the day", foldBytes(t.Rows+held, len(cols), room.threads())); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				_, err = room.set(ctx, tx, t.Object, "history: fold the day", 0)
			}
		}()
	}
	last, err := lastReadDay(ctx, tx, t.Object)
	if err != nil {
		return fail("read the days", err)
	}
	switch {
	case last == D:
		// A rerun of the last day: undo its changes, then fold anew.
		for _, q := range []string{
			"DELETE FROM " + Ident(v) + " WHERE " + colValidFrom + " = CAST(? AS DATE)",
			"UPDATE " + Ident(v) + " SET " + colValidTo + " = NULL, " + colClosedBy + " = NULL WHERE " + colValidTo + " = CAST(? AS DATE)",
			"DELETE FROM _sepipe_history_days WHERE object = " + Literal(t.Object) + " AND day = CAST(? AS DATE)",
		} {
			if _, err := tx.ExecContext(ctx, q, D); err != nil {
				return fail("undo the day's changes", err)
			}
		}
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+Ident(v)+" WHERE "+colValidTo+" IS NULL").Scan(&held); err != nil {
			return fail("count the current versions", err)
		}
		fallthrough
	case readAfter(last, D):
		news, err := foldLatest(ctx, tx, run, t.Object, cols, day, held)
		if err != nil {
			return err
		}
		if news < 0 {
			news = t.Rows
		}
		if t.NewRows != nil && src.counts {
			*t.NewRows = news
		}
		if err := recordDay(ctx, tx, t.Object, D, run.ID); err != nil {
			return err
		}
	default:
		// A day before the last: every day's rows again, the run's day
		// from the run.
		all := Ident("_sepipe_redo_" + t.Object)
		q := "CREATE TABLE " + all + " AS SELECT " + identList(cols, "v.") + ", d.day AS _sepipe_day FROM " + expanded(t.Object) +
			" v JOIN _sepipe_history_days d ON d.object = " + Literal(t.Object) + " AND " + dayCovered("v", "d") +
			" WHERE d.day <> CAST(" + Literal(D) + " AS DATE)" +
			" UNION ALL SELECT *, CAST(" + Literal(D) + " AS DATE) FROM (" + day + ")"
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fail("read every day's rows", err)
		}
		if err := recordDay(ctx, tx, t.Object, D, run.ID); err != nil {
			return err
		}
		if err := rebuildVersions(ctx, tx, t.Object, cols, all); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+all); err != nil {
			return fail("drop every day's rows", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+Ident(dayTable(t.Object))); err != nil {
		return fail("drop the day's rows", err)
	}
	if err := writeHistoryView(ctx, tx, t.Object); err != nil {
		return err
	}
	faults.At(faults.HistoryFolded, t.Object)
	return nil
}

// foldLatest folds the rows of a day after every read day (the query
// day) into object's versions: a current version whose values the day
// does not hold as many times closes on the day, and values the day holds
// that no current version holds as many times open a version. It returns
// the day's rows the current versions did not hold (the table's new rows,
// as countNew counts them). A stream with no current version inserts the
// day's rows grouped, in one statement. Else one grouping of the current
// versions with the day's rows makes a table of the differences (spilled
// under the memory limit, as a temporary table would not be), dropped in
// the same transaction; the versions it closes are found by their values
// (no id: numbering the new versions cost more than the insert).
func foldLatest(ctx context.Context, tx *sql.Tx, run Run, object string, cols []column, day string, held int64) (news int64, err error) {
	v := VersionsTable(object)
	fold := Ident("_sepipe_fold_" + object)
	fail := func(step string, err error) (int64, error) {
		return 0, &WriteError{Object: object, Step: "history: " + step, Path: v, Err: err}
	}
	c := identList(cols, "")
	insert := "INSERT INTO " + Ident(v) + " (" + c + ", " + strings.Join(versionCols, ", ") + ") "
	if held == 0 {
		if _, err := tx.ExecContext(ctx, insert+"SELECT "+c+", count(*), CAST(? AS DATE), NULL, ?, NULL FROM ("+day+") GROUP BY "+c,
			run.SnapshotDate, run.ID); err != nil {
			return fail("open the day's versions", err)
		}
		return -1, nil // every row is new: the caller knows how many
	}
	q := "CREATE TABLE " + fold + " AS SELECT " + c + ", count(*) FILTER (_sepipe_new) AS _sepipe_n, max(_sepipe_was) AS _sepipe_was FROM (" +
		"SELECT " + c + ", " + colRows + " AS _sepipe_was, false AS _sepipe_new FROM " + Ident(v) + " WHERE " + colValidTo + " IS NULL" +
		" UNION ALL SELECT *, CAST(NULL AS BIGINT), true FROM (" + day + ")" +
		") GROUP BY " + c + " HAVING _sepipe_was IS DISTINCT FROM _sepipe_n"
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fail("compare the day with the current versions", err)
	}
	var closing int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FILTER (WHERE _sepipe_was IS NOT NULL), coalesce(sum(_sepipe_n - coalesce(_sepipe_was, 0)) FILTER (WHERE _sepipe_n > coalesce(_sepipe_was, 0)), 0) FROM "+fold).Scan(&closing, &news); err != nil {
		return fail("count the changes", err)
	}
	if closing > 0 {
		same := make([]string, len(cols))
		for i, col := range cols {
			same[i] = "v." + Ident(col.name) + " IS NOT DISTINCT FROM f." + Ident(col.name)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+Ident(v)+" v SET "+colValidTo+" = CAST(? AS DATE), "+colClosedBy+" = ? FROM (SELECT * FROM "+fold+
			" WHERE _sepipe_was IS NOT NULL) f WHERE v."+colValidTo+" IS NULL AND "+strings.Join(same, " AND "), run.SnapshotDate, run.ID); err != nil {
			return fail("close the versions the day changed", err)
		}
	}
	if _, err := tx.ExecContext(ctx, insert+"SELECT "+c+", _sepipe_n, CAST(? AS DATE), NULL, ?, NULL FROM "+fold+" WHERE _sepipe_n > 0",
		run.SnapshotDate, run.ID); err != nil {
		return fail("open the day's new versions", err)
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE "+fold); err != nil {
		return fail("drop the comparison", err)
	}
	return news, nil
}

// dayCovered is the condition that day d (a row of _sepipe_history_days)
// is one of version v's days.
func dayCovered(v, d string) string {
	return d + ".day >= " + v + "." + colValidFrom + " AND (" + v + "." + colValidTo + " IS NULL OR " + d + ".day < " + v + "." + colValidTo + ")"
}

// writeHistoryView makes <stream>_history the view of every row of every
// read day: each version on each of its days, as many times as the day
// held it, with the day column (HistoryDayColumn of its columns).
func writeHistoryView(ctx context.Context, tx *sql.Tx, object string) error {
	cols, err := dataColumns(ctx, tx, object)
	if err != nil {
		return &WriteError{Object: object, Step: "history: read columns", Path: VersionsTable(object), Err: err}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	day := HistoryDayColumn(names)
	q := "CREATE OR REPLACE VIEW " + Ident(HistoryTable(object)) + " AS SELECT " + identList(cols, "v.") + ", d.day AS " + Ident(day) +
		" FROM " + expanded(object) + " v JOIN _sepipe_history_days d ON d.object = " + Literal(object) + " AND " + dayCovered("v", "d")
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: object, Step: "history: create the view", Path: HistoryTable(object), Err: err}
	}
	return nil
}

// foldsLatest reports whether a run of day folds object's day after
// every day it was read (foldLatest), into versions that exist.
func foldsLatest(ctx context.Context, tx *sql.Tx, object, day string) (bool, error) {
	kind, err := relationKind(ctx, tx, VersionsTable(object))
	if err != nil || kind != "table" {
		return false, err
	}
	last, err := lastReadDay(ctx, tx, object)
	return readAfter(last, day), err
}

// lastReadDay is the last day object was read (YYYY-MM-DD), "" when none.
func lastReadDay(ctx context.Context, tx *sql.Tx, object string) (string, error) {
	var last sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT strftime(max(day), '%Y-%m-%d') FROM _sepipe_history_days WHERE object = ?`, object).Scan(&last)
	return last.String, err
}

// readAfter reports whether day comes after last, the last day a stream
// was read ("" when none): the fold of the day only adds to the versions
// (foldLatest), and its new rows are the fold's to count.
func readAfter(last, day string) bool { return last == "" || last < day }

// expanded is object's versions, each as many times as its days held it
// (an unnest, a projection: no join), as a relation to name v.
func expanded(object string) string {
	return "(SELECT *, unnest(range(" + colRows + ")) AS _sepipe_k FROM " + Ident(VersionsTable(object)) + ")"
}

// asOfDay is the condition that a version of v holds on day (a date
// literal's text): the table as it stood that day.
func asOfDay(v, day string) string {
	return v + "." + colValidFrom + " <= DATE " + Literal(day) + " AND (" + v + "." + colValidTo + " IS NULL OR " + v + "." + colValidTo + " > DATE " + Literal(day) + ")"
}
