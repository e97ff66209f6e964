package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sepipe/sepipe/schemas"
)

// Column is one column of a table sepipe defines, as DuckDB has it.
type Column struct {
	Name    string
	Type    string // DuckDB's name for it, lower case: varchar, timestamp with time zone, json, ...
	NotNull bool
	Key     bool // part of the primary key
}

// OwnTables returns the columns of the tables sepipe itself defines (the
// events table and the _sepipe_ bookkeeping tables), in column order, as
// DuckDB creates them from sepipe's DDL (migrations included): the DDL is
// the one owner of their columns and types, and what documents them (the
// dbt sources) reads them from here.
func OwnTables(ctx context.Context) (map[string][]Column, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("own tables: open an in-memory database: %w", err)
	}
	defer closeDuckDB(db)
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, ownDDL); err != nil {
		return nil, fmt.Errorf("own tables: create: %w", err)
	}
	keys := map[[2]string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT table_name, unnest(constraint_column_names) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'`)
	if err != nil {
		return nil, fmt.Errorf("own tables: read keys: %w", err)
	}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return nil, err
		}
		keys[[2]string{t, c}] = true
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns()
		WHERE database_name = current_database() ORDER BY table_name, column_index`)
	if err != nil {
		return nil, fmt.Errorf("own tables: read columns: %w", err)
	}
	defer rows.Close()
	out := map[string][]Column{}
	for rows.Next() {
		var t, c, typ string
		var nullable bool
		if err := rows.Scan(&t, &c, &typ, &nullable); err != nil {
			return nil, err
		}
		out[t] = append(out[t], Column{Name: c, Type: strings.ToLower(typ), NotNull: !nullable, Key: keys[[2]string{t, c}]})
	}
	return out, rows.Err()
}

// ownDDL creates every table of sepipe's own, where it is missing: the
// one statement the warehouse runs at each open and OwnTables reads.
const ownDDL = metaDDL + namesDDL + lakeIntentsDDL + migrations + eventsDDL + historyDaysDDL

const metaDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_runs (
	run_id          VARCHAR PRIMARY KEY,
	started_at      TIMESTAMPTZ NOT NULL,
	finished_at     TIMESTAMPTZ,
	status          VARCHAR NOT NULL,
	snapshot_date   DATE,
	rows_per_object JSON,
	error           VARCHAR,
	published       BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS _sepipe_run_objects (
	run_id         VARCHAR NOT NULL,
	object         VARCHAR NOT NULL,
	rows           BIGINT NOT NULL,
	rejected_rows  BIGINT NOT NULL,
	pages          INTEGER,
	requests       INTEGER,
	retries        INTEGER,
	duration_ms    BIGINT,
	schema_version VARCHAR,
	files          INTEGER,
	PRIMARY KEY (run_id, object)
);
CREATE TABLE IF NOT EXISTS _sepipe_state (
	stream          VARCHAR PRIMARY KEY,
	cursor_field    VARCHAR NOT NULL,
	watermark       VARCHAR NOT NULL,
	run_id          VARCHAR NOT NULL,
	updated_at      TIMESTAMPTZ NOT NULL,
	snapshot_date   DATE NOT NULL,
	prior_watermark VARCHAR
);
CREATE TABLE IF NOT EXISTS _sepipe_schemas (
	object        VARCHAR NOT NULL,
	version       VARCHAR NOT NULL,
	describe_json  JSON NOT NULL,
	effective_json JSON NOT NULL,
	first_run_id  VARCHAR NOT NULL,
	first_seen_at TIMESTAMPTZ NOT NULL,
	last_run_id   VARCHAR NOT NULL,
	last_seen_at  TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (object, version)
);
CREATE TABLE IF NOT EXISTS _sepipe_rejects (
	run_id      VARCHAR NOT NULL,
	object      VARCHAR NOT NULL,
	page        INTEGER,
	row_in_page INTEGER,
	field       VARCHAR,
	raw_value   VARCHAR,
	reason      VARCHAR,
	raw_row     VARCHAR
);`

// migrations bring a warehouse written by an older sepipe up to date.
const migrations = `
ALTER TABLE _sepipe_runs ADD COLUMN IF NOT EXISTS published BOOLEAN DEFAULT true;
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS status VARCHAR DEFAULT 'committed';
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS reason VARCHAR;
ALTER TABLE _sepipe_rejects ADD COLUMN IF NOT EXISTS raw_row_bytes BLOB;
ALTER TABLE _sepipe_rejects ADD COLUMN IF NOT EXISTS raw_value_file VARCHAR;
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS nulled_values BIGINT DEFAULT 0;
ALTER TABLE _sepipe_state ADD COLUMN IF NOT EXISTS read_filters VARCHAR;`

// RecordFailure writes a run that did not commit data, so the history says
// it was tried.
func (w *Warehouse) RecordFailure(ctx context.Context, run Run) error {
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return fmt.Errorf("warehouse %s: begin: %w", w.path, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := insertOutcomes(ctx, tx, run); err != nil {
		return err
	}
	if err := insertRun(ctx, tx, run, nil, true); err != nil {
		return err
	}
	return tx.Commit()
}

// insertOutcomes records the streams a run did not commit.
func insertOutcomes(ctx context.Context, db execer, run Run) error {
	for _, o := range run.Others {
		if _, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_run_objects
			(run_id, object, rows, rejected_rows, status, reason) VALUES (?, ?, 0, 0, ?, ?)`,
			run.ID, o.Object, o.Status, o.Reason); err != nil {
			return &WriteError{Object: o.Object, Step: "record run object", Path: "_sepipe_run_objects", Err: err}
		}
	}
	return nil
}

func insertRun(ctx context.Context, db execer, run Run, rowsPer map[string]int64, published bool) error {
	var rows any
	if rowsPer != nil {
		b, _ := json.Marshal(rowsPer)
		rows = string(b)
	}
	var snap any
	if run.SnapshotDate != "" {
		snap = run.SnapshotDate
	}
	var errText any
	if run.Error != "" {
		errText = run.Error
	}
	_, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_runs
		(run_id, started_at, finished_at, status, snapshot_date, rows_per_object, error, published)
		VALUES (?, ?, ?, ?, CAST(? AS DATE), CAST(? AS JSON), ?, ?)`,
		run.ID, run.Started.UTC(), run.Finished.UTC(), run.Status, snap, rows, errText, published)
	if err != nil {
		return fmt.Errorf("record run %s in _sepipe_runs: %w", run.ID, err)
	}
	return nil
}

func recordSchema(ctx context.Context, tx *sql.Tx, run Run, t Table) error {
	if t.Describe == nil {
		return nil
	}
	eff, err := schemas.ToDescribe(t.Schema)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "record schema", Err: err}
	}
	d, _ := json.Marshal(t.Describe)
	e, _ := json.Marshal(eff)
	ver := schemas.Version(t.Describe)
	now := run.Finished.UTC()
	_, err = tx.ExecContext(ctx, `INSERT INTO _sepipe_schemas VALUES (?, ?, CAST(? AS JSON), CAST(? AS JSON), ?, ?, ?, ?)
		ON CONFLICT (object, version) DO UPDATE SET effective_json = excluded.effective_json, last_run_id = excluded.last_run_id, last_seen_at = excluded.last_seen_at`,
		t.Object, ver, string(d), string(e), run.ID, now, run.ID, now)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "record schema", Path: "_sepipe_schemas", Err: err}
	}
	return nil
}
