package load

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/lakefile"
)

// History: every stream has a view <stream>_history of each day's lake
// partition, with the day in a snapshot_date column, over the stream's
// versions (versions.go), which are tables in the warehouse loaded in the
// run's transaction from the same staged files as the stream's table, not
// a view over the lake: a view would name the lake by path, and DuckDB
// resolves a path when the view is read, against the reader's working
// directory, so an output folder moved, copied or mounted elsewhere would
// break it. The day comes from the run that wrote the partition, never
// from parsing a path.

// HistoryTable is the name of the view of every snapshot of a stream.
func HistoryTable(object string) string { return object + "_history" }

// Day columns of a history table: snapshot_date, or, for a stream with a
// field of that name, _sepipe_snapshot_date (the field keeps its values).
const (
	historyDay    = lakefile.DayColumn
	historyDayAlt = lakefile.DayColumnAlt
)

// HistoryDayColumn is the day column of a new history table of a stream
// whose fields are named fields (lakefile.DayColumnFor, the Iceberg
// lake's rule too): snapshot_date, or _sepipe_snapshot_date when a field
// is called snapshot_date in any case (the field keeps its values). An
// existing table's moves to it when such a field comes.
func HistoryDayColumn(fields []string) string { return lakefile.DayColumnFor(fields) }

// hasColumn reports whether cols (column names) holds name, ignoring case
// as DuckDB does (sameName).
func hasColumn(cols []string, name string) bool {
	return slices.ContainsFunc(cols, func(c string) bool { return sameName(c, name) })
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

// relationKind says whether name is a table, a view or neither.
func relationKind(ctx context.Context, q querier, name string) (string, error) {
	var kind string
	err := q.QueryRowContext(ctx, `SELECT 'table' FROM duckdb_tables() WHERE schema_name = current_schema() AND table_name = ?
		UNION ALL SELECT 'view' FROM duckdb_views() WHERE schema_name = current_schema() AND view_name = ? AND NOT internal`, name, name).Scan(&kind)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return kind, err
}

// loadHistory puts a run's partition of t into its history: its staged
// files folded into the versions (foldDay), read once, with no copy
// first. A run without a snapshot day has no partition and no history.
// counts: the fold counts t's new rows (loadTable, foldCounts).
func loadHistory(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake, room *loadRoom, counts bool) error {
	if run.SnapshotDate == "" {
		return nil
	}
	src, err := filesSource(t)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "history: derive table", Path: t.Object, Err: err}
	}
	src.counts = counts
	return foldDay(ctx, tx, run, t, src, lake, room)
}

// prepareHistory makes t's day table (dayTable) for the run's rows, with
// t's columns and a day column, and returns the day column and the
// table's column types.
func prepareHistory(ctx context.Context, tx *sql.Tx, t Table) (day string, cols map[string]string, err error) {
	h := dayTable(t.Object)
	fail := func(step string, err error) (string, map[string]string, error) {
		return "", nil, &WriteError{Object: t.Object, Step: step, Path: h, Err: err}
	}
	day = HistoryDayColumn(fieldNames(t.Schema))
	defs, err := columnDefs(t.Object, t.Schema, Replace)
	if err != nil {
		return fail("history: derive table", err)
	}
	defs = append(defs, Ident(day)+" DATE")
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TABLE "+Ident(h)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return fail("history: create the day's table", err)
	}
	if cols, err = tableColumns(ctx, tx, h); err != nil {
		return fail("history: read columns", err)
	}
	return day, cols, nil
}

// insertHistory inserts the rows of files, written with t's schema, into
// t's day table as the run's day; cols are the table's column types
// (prepareHistory, alignTo), by the columns' spelling, which may differ
// from the fields' in case (columnNamed).
func insertHistory(ctx context.Context, tx *sql.Tx, run Run, t Table, files []string, day string, cols map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	h := dayTable(t.Object)
	fail := func(step string, err error) error {
		return &WriteError{Object: t.Object, Step: step, Path: h, Err: err}
	}
	names := make([]string, t.Schema.NumFields())
	exprs := make([]string, t.Schema.NumFields())
	for i, f := range t.Schema.Fields() {
		names[i] = Ident(f.Name)
		from, err := columnType(f)
		if err != nil {
			return fail("history: derive table", err)
		}
		col, _ := columnNamed(cols, f.Name) // alignTo made one for every field
		exprs[i] = castTo(Ident(f.Name), from, cols[col])
	}
	q := fmt.Sprintf("INSERT INTO %s (%s, %s) SELECT %s, CAST(? AS DATE) FROM %s",
		Ident(h), strings.Join(names, ", "), Ident(day), strings.Join(exprs, ", "), readStaged(files))
	if _, err := tx.ExecContext(ctx, q, run.SnapshotDate); err != nil {
		return fail("history: load parquet", err)
	}
	return nil
}

// historyDayColumn finds the day column of an existing history table.
// When the stream now has a field called snapshot_date, the day column
// of that name moves to _sepipe_snapshot_date.
func historyDayColumn(ctx context.Context, tx *sql.Tx, h string, have map[string]string, fields []string) (string, error) {
	if _, ok := have[historyDayAlt]; ok {
		return historyDayAlt, nil
	}
	if _, ok := have[historyDay]; !ok {
		return "", fmt.Errorf("history table %s has no %s column", h, historyDay)
	}
	if !hasColumn(fields, historyDay) {
		return historyDay, nil
	}
	_, err := tx.ExecContext(ctx, "ALTER TABLE "+Ident(h)+" RENAME COLUMN "+Ident(historyDay)+" TO "+Ident(historyDayAlt))
	return historyDayAlt, err
}

// partitionFiles lists a stream's published partitions with their files:
// the day each was written for (the folder sepipe named) and its Parquet
// files, by name, without globbing.
func partitionFiles(lake Lake, object string) (map[string][]string, error) {
	days, err := lake.Partitions(object)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, d := range days {
		dir := lake.PartitionDir(object, d)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".parquet") {
				abs, err := filepath.Abs(filepath.Join(dir, e.Name()))
				if err != nil {
					return nil, err
				}
				out[d] = append(out[d], abs)
			}
		}
	}
	return out, nil
}

// historyToVersions migrates the history of a warehouse an earlier
// sepipe wrote, in one transaction, on opening it: each daily-copy
// history table becomes versions (exactly: the view answers with the
// same rows on the same days), and each history view over the lake by
// absolute path (older still) becomes versions loaded from the lake. A
// process killed during it leaves the warehouse as it was, and the next
// open migrates it again. It reports whether it migrated anything.
func (w *Warehouse) historyToVersions(ctx context.Context) (bool, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT table_name, 'table' FROM duckdb_tables() WHERE schema_name = current_schema() AND suffix(table_name, '_history')
		UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE schema_name = current_schema() AND NOT internal AND suffix(view_name, '_history')
			AND NOT EXISTS (SELECT 1 FROM duckdb_tables() t WHERE t.schema_name = current_schema() AND t.table_name = left(view_name, -8) || '_versions')`)
	if err != nil {
		return false, fmt.Errorf("warehouse %s: list histories: %w", w.path, err)
	}
	type old struct{ name, kind string }
	var olds []old
	for rows.Next() {
		var o old
		if err := rows.Scan(&o.name, &o.kind); err != nil {
			rows.Close()
			return false, err
		}
		olds = append(olds, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(olds) == 0 {
		return false, nil
	}
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck
	migrated := false
	for _, o := range olds {
		object := strings.TrimSuffix(o.name, "_history")
		if o.kind == "view" && w.lake == nil {
			continue
		}
		migrated = true
		if err := buildVersions(ctx, tx, object, w.lake, ""); err != nil {
			return false, err
		}
		if kind, err := relationKind(ctx, tx, VersionsTable(object)); err != nil {
			return false, err
		} else if kind == "table" {
			if err := writeHistoryView(ctx, tx, object); err != nil {
				return false, err
			}
		}
	}
	faults.At(faults.HistoryMigrated, "")
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("warehouse %s: migrate the history to versions: %w", w.path, err)
	}
	return migrated, nil
}
