package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// RebuiltHistory is what RebuildHistory made of one stream's history.
type RebuiltHistory struct {
	Object   string
	Days     int   // the lake's partitions: the days read
	Rows     int64 // the rows of every day, as the history view answers
	Versions int64 // the versions that hold them
}

// ErrNoPartitions is wrapped when a stream to rebuild has no partition in
// the lake to rebuild its history from.
var ErrNoPartitions = errors.New("the lake has no partition of the stream")

// RebuildHistory rebuilds the history of objects (every stream the
// warehouse keeps versions of, when none are named) from the lake, the
// record of every day read: each stream's versions are made again from
// its partitions, one day per partition, and its history view anew, all
// in one transaction (a process killed during it leaves the history as it
// was). The days keep the runs the warehouse recorded for them. A stream
// without a partition in the lake is an error naming it, and nothing is
// rebuilt. Publish afterwards for readers to see it.
func (w *Warehouse) RebuildHistory(ctx context.Context, objects ...string) ([]RebuiltHistory, error) {
	if w.lake == nil {
		return nil, fmt.Errorf("warehouse %s: rebuild the history: no lake (open the output folder with OpenState)", w.path)
	}
	if len(objects) == 0 {
		rows, err := w.db.QueryContext(ctx, `SELECT left(table_name, -9) FROM duckdb_tables()
			WHERE schema_name = current_schema() AND suffix(table_name, '_versions') ORDER BY 1`)
		if err != nil {
			return nil, fmt.Errorf("warehouse %s: list the histories: %w", w.path, err)
		}
		for rows.Next() {
			var o string
			if err := rows.Scan(&o); err != nil {
				rows.Close()
				return nil, err
			}
			objects = append(objects, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for _, o := range objects {
		if err := CheckName(o); err != nil {
			return nil, fmt.Errorf("rebuild the history of %q: %w", o, err)
		}
		days, err := w.lake.Partitions(o)
		if err != nil {
			return nil, fmt.Errorf("rebuild the history of %s: list %s: %w", o, w.lake.ObjectDir(o), err)
		}
		if len(days) == 0 {
			return nil, fmt.Errorf("rebuild the history of %s: %w (%s)", o, ErrNoPartitions, w.lake.ObjectDir(o))
		}
	}
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: begin: %w", w.path, err)
	}
	defer tx.Rollback() //nolint:errcheck
	var out []RebuiltHistory
	for _, o := range slices.Compact(slices.Sorted(slices.Values(objects))) {
		runs := map[string]string{}
		rows, err := tx.QueryContext(ctx, `SELECT strftime(day, '%Y-%m-%d'), run_id FROM _sepipe_history_days WHERE object = ? AND run_id IS NOT NULL`, o)
		if err != nil {
			return nil, &WriteError{Object: o, Step: "history: read the days", Path: "_sepipe_history_days", Err: err}
		}
		for rows.Next() {
			var d, r string
			if err := rows.Scan(&d, &r); err != nil {
				rows.Close()
				return nil, err
			}
			runs[d] = r
		}
		rows.Close()
		for _, q := range []string{
			"DROP VIEW IF EXISTS " + Ident(HistoryTable(o)),
			"DROP TABLE IF EXISTS " + Ident(VersionsTable(o)),
			"DELETE FROM _sepipe_history_days WHERE object = " + Literal(o),
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return nil, &WriteError{Object: o, Step: "history: rebuild", Path: VersionsTable(o), Err: err}
			}
		}
		if err := versionsFromLake(ctx, tx, *w.lake, o, "", runs); err != nil {
			return nil, err
		}
		if err := writeHistoryView(ctx, tx, o); err != nil {
			return nil, err
		}
		r := RebuiltHistory{Object: o}
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM _sepipe_history_days WHERE object = ?), (SELECT count(*) FROM `+Ident(HistoryTable(o))+`),
			(SELECT count(*) FROM `+Ident(VersionsTable(o))+`)`, o).Scan(&r.Days, &r.Rows, &r.Versions); err != nil {
			return nil, &WriteError{Object: o, Step: "history: count", Path: HistoryTable(o), Err: err}
		}
		out = append(out, r)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("warehouse %s: rebuild the history: %w", w.path, err)
	}
	return out, nil
}

// String is a line for a person: "course: 30 days, 690 rows in 40 versions".
func (r RebuiltHistory) String() string {
	return fmt.Sprintf("%s: %d days, %d rows in %d versions", r.Object, r.Days, r.Rows, r.Versions)
}
