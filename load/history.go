package load

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/lakefile"
)

// History: every stream has a table <stream>_history holding each day's
// lake partition, with the day in a snapshot_date column. It is a table,
// loaded in the run's transaction from the same staged files as the
// stream's table, not a view over the lake: a view would name the lake by
// path, and DuckDB resolves a path when the view is read, against the
// reader's working directory, so an output folder moved, copied or
// mounted elsewhere would break it. The day comes from the run that wrote
// the partition, never from parsing a path.

// HistoryTable is the name of the table of every snapshot of a stream.
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

// loadHistory puts a run's partition of t into its history table,
// replacing that day's rows, and returns the table's day column. A history
// table that does not exist yet is first filled from the stream's earlier
// partitions in the lake. A run without a snapshot day has no partition
// and no history ("" and no error).
func loadHistory(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake) (day string, err error) {
	if run.SnapshotDate == "" {
		return "", nil
	}
	day, cols, err := prepareHistory(ctx, tx, run, t, lake)
	if err != nil {
		return "", err
	}
	return day, insertHistory(ctx, tx, run, t, t.Files, day, cols)
}

// prepareHistory makes t's history table ready for the run's rows: it
// exists (filled from the lake's earlier partitions when it did not), has
// t's columns, and holds no rows of the run's day. It returns the day
// column and the table's column types.
func prepareHistory(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake) (day string, cols map[string]string, err error) {
	h := HistoryTable(t.Object)
	fail := func(step string, err error) (string, map[string]string, error) {
		return "", nil, &WriteError{Object: t.Object, Step: step, Path: h, Err: err}
	}
	kind, err := relationKind(ctx, tx, h)
	if err != nil {
		return fail("history: inspect", err)
	}
	if kind == "view" { // an earlier sepipe's view over the lake
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+Ident(h)); err != nil {
			return fail("history: drop the old view", err)
		}
		kind = ""
	}
	if kind == "" && lake != nil {
		if err := backfillHistory(ctx, tx, *lake, t.Object, run.SnapshotDate); err != nil {
			return "", nil, err
		}
	}
	fields := fieldNames(t.Schema)
	have, err := tableColumns(ctx, tx, h)
	if err != nil {
		return fail("history: read columns", err)
	}
	if len(have) == 0 {
		day = HistoryDayColumn(fields)
		defs, err := columnDefs(t.Object, t.Schema, Replace)
		if err != nil {
			return fail("history: derive table", err)
		}
		defs = append(defs, Ident(day)+" DATE")
		if _, err := tx.ExecContext(ctx, "CREATE TABLE "+Ident(h)+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fail("history: create table", err)
		}
	} else {
		if day, err = historyDayColumn(ctx, tx, h, have, fields); err != nil {
			return fail("history: day column", err)
		}
	}
	cols, err = alignTo(ctx, tx, t.Object, h, t.Schema)
	if err != nil {
		return "", nil, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+Ident(h)+" WHERE "+Ident(day)+" = CAST(? AS DATE)", run.SnapshotDate); err != nil {
		return fail("history: replace the day's rows", err)
	}
	return day, cols, nil
}

// insertHistory inserts the rows of files, written with t's schema, into
// t's history table as the run's day; cols are the table's column types
// (prepareHistory, alignTo), by the columns' spelling, which may differ
// from the fields' in case (columnNamed).
func insertHistory(ctx context.Context, tx *sql.Tx, run Run, t Table, files []string, day string, cols map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	h := HistoryTable(t.Object)
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

// backfillHistory creates a stream's history table from its partitions in
// the lake, except the day skip (the run's own, loaded next), when it has
// any; columns of files written under different schemas are unified by
// name as DuckDB's union_by_name does.
func backfillHistory(ctx context.Context, tx *sql.Tx, lake Lake, object, skip string) error {
	h := HistoryTable(object)
	parts, err := partitionFiles(lake, object)
	if err != nil {
		return &WriteError{Object: object, Step: "history: list the lake", Path: lake.ObjectDir(object), Err: err}
	}
	var files, pairs []string
	for _, d := range slices.Sorted(maps.Keys(parts)) {
		if d == skip {
			continue
		}
		for _, f := range parts[d] {
			files = append(files, f)
			pairs = append(pairs, "("+Literal(f)+", CAST("+Literal(d)+" AS DATE))")
		}
	}
	if len(files) == 0 {
		return nil
	}
	src := readStaged(files, withFile)
	var cols []string
	rows, err := tx.QueryContext(ctx, "SELECT column_name FROM (DESCRIBE SELECT * FROM "+src+")")
	if err != nil {
		return &WriteError{Object: object, Step: "history: read the lake", Path: lake.ObjectDir(object), Err: err}
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return err
		}
		cols = append(cols, c)
	}
	rows.Close()
	day := HistoryDayColumn(slices.DeleteFunc(cols, func(c string) bool { return c == fileColumn }))
	q := "CREATE TABLE " + Ident(h) + " AS SELECT p.* EXCLUDE (" + fileColumn + "), d.day AS " + Ident(day) +
		" FROM " + src + " p JOIN (VALUES " + strings.Join(pairs, ", ") + ") d(f, day) ON p." + fileColumn + " = d.f"
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: object, Step: "history: load the lake's partitions", Path: h, Err: err}
	}
	return nil
}

// historyFromViews turns the history views of a warehouse an earlier
// sepipe wrote (views over the lake by absolute path) into history tables
// loaded from the lake, in one transaction.
func (w *Warehouse) historyFromViews(ctx context.Context) error {
	rows, err := w.db.QueryContext(ctx, `SELECT view_name FROM duckdb_views() WHERE schema_name = current_schema() AND NOT internal AND suffix(view_name, '_history')`)
	if err != nil {
		return fmt.Errorf("warehouse %s: list views: %w", w.path, err)
	}
	var views []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		views = append(views, v)
	}
	rows.Close()
	if len(views) == 0 || w.lake == nil {
		return nil
	}
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	for _, v := range views {
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+Ident(v)); err != nil {
			return fmt.Errorf("warehouse %s: drop view %s: %w", w.path, v, err)
		}
		if err := backfillHistory(ctx, tx, *w.lake, strings.TrimSuffix(v, "_history"), ""); err != nil {
			return err
		}
	}
	return tx.Commit()
}
