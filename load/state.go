package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/sepipe/sepipe/service"
)

// State is a stream's incremental position.
type State struct {
	Stream      string
	CursorField string
	Watermark   string // RFC 3339 UTC for date cursors, the number's text otherwise
	RunID       string
	// SnapshotDate is the day of the run that saved the state, and
	// PriorWatermark the watermark before that day's first run ("" if the
	// day's first run read everything). A rerun on the same day reads from
	// PriorWatermark, so it replaces the day's partition with a whole one.
	SnapshotDate   string
	PriorWatermark string
	// ReadFilters is what the watermark's reads were filtered by besides
	// the cursor (Table.ReadFilters); FiltersKnown is false for a state
	// saved before sepipe recorded them.
	ReadFilters  string
	FiltersKnown bool
}

// SameRead reports whether a read filtered by filters (Table.ReadFilters)
// continues the reads the watermark was saved from: with other filters
// the rows older than the watermark that they let through were never
// read, so the stream must read whole. A state that predates the record
// is taken as the same read.
func (s State) SameRead(filters string) bool {
	return !s.FiltersKnown || s.ReadFilters == filters
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func stateOf(ctx context.Context, q querier, stream string) (State, bool, error) {
	s := State{Stream: stream}
	var prior, filters sql.NullString
	// read_filters through the row as JSON: a warehouse an older sepipe
	// wrote, opened read-only (sepipe plan), has no such column yet.
	err := q.QueryRowContext(ctx, `SELECT cursor_field, watermark, run_id, strftime(snapshot_date, '%Y-%m-%d'), prior_watermark,
		to_json(s) ->> 'read_filters' FROM _sepipe_state s WHERE stream = ?`, stream).
		Scan(&s.CursorField, &s.Watermark, &s.RunID, &s.SnapshotDate, &prior, &filters)
	s.PriorWatermark = prior.String
	s.ReadFilters, s.FiltersKnown = filters.String, filters.Valid
	if err == sql.ErrNoRows {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("read state of %q: %w", stream, err)
	}
	return s, true, nil
}

// State returns a stream's saved incremental position, if any.
func (w *Warehouse) State(ctx context.Context, stream string) (State, bool, error) {
	return stateOf(ctx, w.db, stream)
}

// StoredFields returns the fields an object's table was last loaded with
// (the effective schema of its latest recorded version), or nil when the
// object was never loaded.
func (w *Warehouse) StoredFields(ctx context.Context, object string) ([]service.Field, error) {
	return w.storedSchema(ctx, object, "effective_json")
}

// StoredDescribe returns the describe the service gave when an object was
// last loaded (that of its latest recorded version), or nil when the object
// was never loaded. It differs from StoredFields once a field was removed
// or narrowed: the table keeps the column, and its widest type.
func (w *Warehouse) StoredDescribe(ctx context.Context, object string) ([]service.Field, error) {
	return w.storedSchema(ctx, object, "describe_json")
}

// storedSchema reads column (effective_json or describe_json) of the
// object's latest recorded version.
func (w *Warehouse) storedSchema(ctx context.Context, object, column string) ([]service.Field, error) {
	var raw string
	err := w.db.QueryRowContext(ctx, `SELECT CAST(`+column+` AS VARCHAR) FROM _sepipe_schemas WHERE object = ? ORDER BY last_seen_at DESC LIMIT 1`, object).Scan(&raw)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stored schema of %q: %w", object, err)
	}
	var f []service.Field
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		return nil, fmt.Errorf("stored schema of %q is not valid: %w", object, err)
	}
	return f, nil
}

// KnownObjects lists every object the warehouse has a schema of: the
// streams earlier runs loaded.
func (w *Warehouse) KnownObjects(ctx context.Context) ([]string, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT DISTINCT object FROM _sepipe_schemas ORDER BY object`)
	if err != nil {
		return nil, fmt.Errorf("list known objects: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("list known objects: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Unfinished lists the streams a run of snapshot day date continues: when
// a quota deferred streams that day, those and the streams that failed
// that day, each unless a later run of the day committed it. Nothing when
// no stream of the day is still deferred: the run reads every stream. (A
// rerun after a night that deferred one stream and failed another must
// not read only the deferred one and leave the failed one stale.)
func (w *Warehouse) Unfinished(ctx context.Context, date string) ([]string, error) {
	var have int
	if err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_columns() WHERE table_name = '_sepipe_run_objects' AND column_name = 'status'`).Scan(&have); err != nil {
		return nil, fmt.Errorf("warehouse %s: list the unfinished streams of %s: %w", w.path, date, err)
	}
	if have == 0 {
		return nil, nil // a read-only warehouse of an older version: no stream was ever deferred
	}
	rows, err := w.db.QueryContext(ctx, `
		WITH pending AS (
			SELECT d.object, d.status FROM _sepipe_run_objects d JOIN _sepipe_runs r USING (run_id)
			WHERE d.status IN ($deferred, $failed) AND r.snapshot_date = CAST($day AS DATE)
			AND NOT EXISTS (
				SELECT 1 FROM _sepipe_run_objects c JOIN _sepipe_runs r2 USING (run_id)
				WHERE c.object = d.object AND c.status = $committed AND r2.snapshot_date = r.snapshot_date
				AND r2.started_at > r.started_at))
		SELECT object FROM pending WHERE EXISTS (SELECT 1 FROM pending WHERE status = $deferred)
		GROUP BY object ORDER BY object`,
		sql.Named("deferred", StreamDeferred), sql.Named("failed", StreamFailed), sql.Named("committed", StreamCommitted), sql.Named("day", date))
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: list the unfinished streams of %s: %w", w.path, date, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("warehouse %s: list the unfinished streams of %s: %w", w.path, date, err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Pending is a run that committed but whose lake partitions may not all be
// published (its process died in between).
type Pending struct {
	RunID        string
	SnapshotDate string
	Objects      []string
}

// PendingPublishes lists committed runs not marked published.
func (w *Warehouse) PendingPublishes(ctx context.Context) ([]Pending, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT r.run_id, strftime(r.snapshot_date, '%Y-%m-%d'), o.object
		FROM _sepipe_runs r JOIN _sepipe_run_objects o USING (run_id)
		WHERE NOT r.published ORDER BY r.started_at, o.object`)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: list unpublished runs: %w", w.path, err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var run, date, obj string
		if err := rows.Scan(&run, &date, &obj); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].RunID != run {
			out = append(out, Pending{RunID: run, SnapshotDate: date})
		}
		out[len(out)-1].Objects = append(out[len(out)-1].Objects, obj)
	}
	return out, rows.Err()
}

// MarkPublished records that a run's partitions are in the lake.
func (w *Warehouse) MarkPublished(ctx context.Context, runID string) error {
	if _, err := w.db.ExecContext(ctx, `UPDATE _sepipe_runs SET published = true WHERE run_id = ?`, runID); err != nil {
		return fmt.Errorf("mark run %s published: %w", runID, err)
	}
	return nil
}
