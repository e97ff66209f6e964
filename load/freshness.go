package load

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// StreamFreshness is what a warehouse knows of a stream's last commit:
// the snapshot day of the last run that committed it, that run, the rows
// it committed, and when that run finished.
type StreamFreshness struct {
	Stream       string
	SnapshotDate string // YYYY-MM-DD
	RunID        string
	Rows         int64
	CommittedAt  time.Time
}

// The rule of a stream's commits, over _sepipe_run_objects o joined to
// _sepipe_runs r: its rows that committed (a row of an older sepipe has
// no status), at the time their run finished (a run that committed and
// then died before it recorded its end: when it started).
const (
	committed   = "coalesce(o.status, 'committed') = 'committed'"
	committedAt = "coalesce(r.finished_at, r.started_at)"
)

// LastCommitSQL is a scalar SQL expression of when stream was last
// committed, by the rule Freshness reads (NULL: never), over the
// bookkeeping tables of the catalog (a DuckDB catalog.schema such as
// warehouse.main, where dbt attaches the warehouse).
func LastCommitSQL(catalog, stream string) string {
	return "(SELECT max(" + committedAt + ") FROM " + catalog + "._sepipe_run_objects o JOIN " + catalog +
		"._sepipe_runs r USING (run_id) WHERE o.object = " + Literal(stream) + " AND " + committed + ")"
}

// LastRunSQL is a scalar SQL expression of when the last run of the
// catalog (as LastCommitSQL's) finished.
func LastRunSQL(catalog string) string {
	return "(SELECT max(" + committedAt + ") FROM " + catalog + "._sepipe_runs r)"
}

// Freshness reads each stream's last commit from the warehouse's
// bookkeeping (_sepipe_run_objects and _sepipe_runs), by stream name. A
// stream that no run ever committed is not listed.
func (w *Warehouse) Freshness(ctx context.Context) ([]StreamFreshness, error) {
	if ok, err := w.HasTable(ctx, "_sepipe_run_objects"); err != nil || !ok {
		return nil, err // a warehouse only a listener has published: no run yet
	}
	rows, err := w.db.QueryContext(ctx, `
		SELECT o.object, strftime(r.snapshot_date, '%Y-%m-%d'), r.run_id, o.rows, `+committedAt+`
		FROM _sepipe_run_objects o JOIN _sepipe_runs r USING (run_id)
		WHERE `+committed+` AND r.snapshot_date IS NOT NULL
		QUALIFY row_number() OVER (PARTITION BY o.object ORDER BY r.snapshot_date DESC, `+committedAt+` DESC) = 1
		ORDER BY o.object`)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: freshness: %w", w.path, err)
	}
	defer rows.Close()
	var out []StreamFreshness
	for rows.Next() {
		var f StreamFreshness
		if err := rows.Scan(&f.Stream, &f.SnapshotDate, &f.RunID, &f.Rows, &f.CommittedAt); err != nil {
			return nil, fmt.Errorf("warehouse %s: freshness: %w", w.path, err)
		}
		f.CommittedAt = f.CommittedAt.UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}

// LastEvent is when the warehouse's newest webhook event was received
// (false when it holds none).
func (w *Warehouse) LastEvent(ctx context.Context) (time.Time, bool, error) {
	if ok, err := w.HasTable(ctx, EventsTable); err != nil || !ok {
		return time.Time{}, false, err
	}
	var t sql.NullTime
	if err := w.db.QueryRowContext(ctx, `SELECT max(received_at) FROM events`).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("warehouse %s: last event: %w", w.path, err)
	}
	return t.Time.UTC(), t.Valid, nil
}
