package load

import (
	"context"
	"fmt"
	"time"
)

// Lake intents: a run that also commits to an Iceberg lake (package
// lakehouse, wired by pipeline) records each stream's staged change, its
// Intent as JSON, in the transaction that commits the run (Commit, from
// Table.LakeIntent), and marks it once the lake committed it or it was
// discarded. An intent still recorded is one a dead run left: the next run
// reconciles it. The JSON is the lakehouse's; load stores it, never reads
// it.
const lakeIntentsDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_lake_intents (
	run_id     VARCHAR NOT NULL,
	stream     VARCHAR NOT NULL,
	intent     JSON NOT NULL,
	status     VARCHAR NOT NULL,
	reason     VARCHAR,
	updated_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (run_id, stream)
);`

// Statuses of a lake intent.
const (
	LakeIntentRecorded  = "recorded"  // committed with the run; the lake commit may not have happened
	LakeIntentCommitted = "committed" // the lake holds the run's snapshot
	LakeIntentDiscarded = "discarded" // it could not be committed; its files were removed
)

// LakeIntent is one recorded intent.
type LakeIntent struct {
	RunID  string
	Stream string
	Intent []byte // the lakehouse's JSON
}

// RecordedLakeIntents lists the intents recorded and not yet marked, oldest
// run first.
func (w *Warehouse) RecordedLakeIntents(ctx context.Context) ([]LakeIntent, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT run_id, stream, CAST(intent AS VARCHAR) FROM _sepipe_lake_intents
		WHERE status = ? ORDER BY run_id, stream`, LakeIntentRecorded)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: list lake intents: %w", w.path, err)
	}
	defer rows.Close()
	var out []LakeIntent
	for rows.Next() {
		var li LakeIntent
		var js string
		if err := rows.Scan(&li.RunID, &li.Stream, &js); err != nil {
			return nil, fmt.Errorf("warehouse %s: list lake intents: %w", w.path, err)
		}
		li.Intent = []byte(js)
		out = append(out, li)
	}
	return out, rows.Err()
}

// MarkLakeIntent sets a recorded intent's status (LakeIntentCommitted or
// LakeIntentDiscarded, with the reason).
func (w *Warehouse) MarkLakeIntent(ctx context.Context, runID, stream, status, reason string) error {
	if status != LakeIntentCommitted && status != LakeIntentDiscarded {
		return fmt.Errorf("mark lake intent %s/%s: unknown status %q", runID, stream, status)
	}
	var r any
	if reason != "" {
		r = reason
	}
	if _, err := w.db.ExecContext(ctx, `UPDATE _sepipe_lake_intents SET status = ?, reason = ?, updated_at = ? WHERE run_id = ? AND stream = ?`,
		status, r, time.Now().UTC(), runID, stream); err != nil {
		return fmt.Errorf("mark lake intent of run %s, stream %s %s: %w", runID, stream, status, err)
	}
	return nil
}

func recordLakeIntent(ctx context.Context, db execer, run Run, t Table) error {
	if len(t.LakeIntent) == 0 {
		return nil
	}
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, `INSERT INTO _sepipe_lake_intents VALUES (?, ?, CAST(? AS JSON), ?, NULL, ?)`,
		run.ID, t.Object, string(t.LakeIntent), LakeIntentRecorded, now); err != nil {
		return &WriteError{Object: t.Object, Step: "record lake intent", Path: "_sepipe_lake_intents", Err: err}
	}
	for _, old := range t.LakeSupersedes {
		if _, err := db.ExecContext(ctx, `UPDATE _sepipe_lake_intents SET status = ?, reason = ?, updated_at = ? WHERE run_id = ? AND stream = ? AND status = ?`,
			LakeIntentDiscarded, "superseded by run "+run.ID+", which rebuilt the table", now, old, t.Object, LakeIntentRecorded); err != nil {
			return &WriteError{Object: t.Object, Step: "supersede lake intent of run " + old, Path: "_sepipe_lake_intents", Err: err}
		}
	}
	return nil
}
