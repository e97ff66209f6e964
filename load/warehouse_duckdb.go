package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver

	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/transform"
)

// Warehouse is the DuckDB file sepipe loads.
type Warehouse struct {
	db   *sql.DB
	path string
}

const metaDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_runs (
	run_id          VARCHAR PRIMARY KEY,
	started_at      TIMESTAMPTZ NOT NULL,
	finished_at     TIMESTAMPTZ,
	status          VARCHAR NOT NULL,
	snapshot_date   DATE,
	rows_per_object JSON,
	error           VARCHAR
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

// OpenWarehouse opens (creating if needed) the DuckDB file at path and
// makes sure sepipe's bookkeeping tables exist.
func OpenWarehouse(ctx context.Context, path string) (*Warehouse, error) {
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return nil, classifyOpen(path, err)
	}
	db.SetMaxOpenConns(1) // one connection: transactions stay on it
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, classifyOpen(path, err)
	}
	if _, err := db.ExecContext(ctx, metaDDL); err != nil {
		db.Close()
		return nil, fmt.Errorf("warehouse %s: create bookkeeping tables: %w", path, err)
	}
	return &Warehouse{db: db, path: path}, nil
}

func classifyOpen(path string, err error) error {
	if strings.Contains(err.Error(), "Could not set lock") || strings.Contains(err.Error(), "Conflicting lock") {
		return fmt.Errorf("warehouse %s: %w (close the other program, e.g. a duckdb shell, and retry): %v", path, ErrWarehouseLocked, err)
	}
	return fmt.Errorf("warehouse %s: open: %w", path, err)
}

// DB exposes the connection for queries.
func (w *Warehouse) DB() *sql.DB { return w.db }

// Path is the DuckDB file's path.
func (w *Warehouse) Path() string { return w.path }

// Close checkpoints and closes the warehouse.
func (w *Warehouse) Close() error { return w.db.Close() }

// Table is one object's data for a run: its schema and the Parquet files
// that hold its rows.
type Table struct {
	Object  string
	Schema  *arrow.Schema
	Files   []string
	Rows    int64 // rows in Files; checked after loading
	Rejects []transform.Reject
	Stats   ObjectStats
}

// ObjectStats is what a run did for one object.
type ObjectStats struct {
	Rows, RejectedRows       int64
	Pages, Requests, Retries int
	Duration                 time.Duration
}

// Run is a run's record in _sepipe_runs.
type Run struct {
	ID           string
	Started      time.Time
	Finished     time.Time
	Status       string // "succeeded", "failed"
	SnapshotDate string // YYYY-MM-DD
	Error        string
}

// DuckDBType returns the DuckDB column type for an Arrow type.
func DuckDBType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.Int64Type:
		return "BIGINT", nil
	case *arrow.Int32Type:
		return "INTEGER", nil
	case *arrow.Float64Type:
		return "DOUBLE", nil
	case *arrow.BooleanType:
		return "BOOLEAN", nil
	case *arrow.StringType, *arrow.LargeStringType:
		return "VARCHAR", nil
	case *arrow.DictionaryType:
		return DuckDBType(t.ValueType)
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return "TIMESTAMPTZ", nil
		}
		return "TIMESTAMP", nil
	}
	return "", fmt.Errorf("no DuckDB type for Arrow type %s", dt)
}

// Ident quotes a DuckDB identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Literal quotes a DuckDB string literal.
func Literal(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// CreateTableSQL is the DDL of an object's table, derived from its schema.
func CreateTableSQL(object string, s *arrow.Schema) (string, error) {
	var b strings.Builder
	b.WriteString("CREATE OR REPLACE TABLE " + Ident(object) + " (")
	for i, f := range s.Fields() {
		t, err := DuckDBType(f.Type)
		if err != nil {
			return "", fmt.Errorf("object %q field %q: %w", object, f.Name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Ident(f.Name) + " " + t)
	}
	b.WriteString(")")
	return b.String(), nil
}

// Commit loads every table of a run and records the run, in one
// transaction. Each object's table is replaced by the rows of its files.
// If anything fails, nothing of the run is in the warehouse.
func (w *Warehouse) Commit(ctx context.Context, run Run, tables []Table) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("warehouse %s: begin: %w", w.path, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	rowsPer := map[string]int64{}
	for _, t := range tables {
		if err := loadTable(ctx, tx, run.ID, t); err != nil {
			return err
		}
		rowsPer[t.Object] = t.Rows
		st := t.Stats
		if _, err := tx.ExecContext(ctx, `INSERT INTO _sepipe_run_objects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			run.ID, t.Object, t.Rows, st.RejectedRows, st.Pages, st.Requests, st.Retries,
			st.Duration.Milliseconds(), schemas.SchemaVersion(t.Schema), len(t.Files)); err != nil {
			return &WriteError{Object: t.Object, Step: "record run object", Path: "_sepipe_run_objects", Err: err}
		}
	}
	if err := insertRun(ctx, tx, run, rowsPer); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("warehouse %s: commit run %s: %w", w.path, run.ID, err)
	}
	return nil
}

// RecordFailure writes a run that did not commit data, so the history says
// it was tried.
func (w *Warehouse) RecordFailure(ctx context.Context, run Run) error {
	return insertRun(ctx, w.db, run, nil)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertRun(ctx context.Context, db execer, run Run, rowsPer map[string]int64) error {
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
	_, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_runs VALUES (?, ?, ?, ?, CAST(? AS DATE), CAST(? AS JSON), ?)`,
		run.ID, run.Started.UTC(), run.Finished.UTC(), run.Status, snap, rows, errText)
	if err != nil {
		return fmt.Errorf("record run %s in _sepipe_runs: %w", run.ID, err)
	}
	return nil
}

func loadTable(ctx context.Context, tx *sql.Tx, runID string, t Table) error {
	ddl, err := CreateTableSQL(t.Object, t.Schema)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "derive table", Err: err}
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return &WriteError{Object: t.Object, Step: "create table", Path: t.Object, Err: err}
	}
	for _, f := range t.Schema.Fields() {
		if d, ok := f.Metadata.GetValue(schemas.MetaDisplayName); ok && d != "" {
			q := "COMMENT ON COLUMN " + Ident(t.Object) + "." + Ident(f.Name) + " IS " + Literal(d)
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return &WriteError{Object: t.Object, Step: "comment column " + f.Name, Path: t.Object, Err: err}
			}
		}
	}
	if len(t.Files) > 0 {
		cols := make([]string, t.Schema.NumFields())
		for i, f := range t.Schema.Fields() {
			cols[i] = Ident(f.Name)
		}
		files := make([]string, len(t.Files))
		for i, f := range t.Files {
			files[i] = Literal(f)
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM read_parquet([%s])",
			Ident(t.Object), strings.Join(cols, ", "), strings.Join(cols, ", "), strings.Join(files, ", "))
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return &WriteError{Object: t.Object, Step: "load parquet", Path: t.Object, Err: err}
		}
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+Ident(t.Object)).Scan(&n); err != nil {
		return &WriteError{Object: t.Object, Step: "count rows", Path: t.Object, Err: err}
	}
	if n != t.Rows {
		return &WriteError{Object: t.Object, Step: "verify load", Path: t.Object,
			Err: fmt.Errorf("table has %d rows, the run wrote %d", n, t.Rows)}
	}
	return insertRejects(ctx, tx, runID, t.Object, t.Rejects)
}

func insertRejects(ctx context.Context, tx *sql.Tx, runID, object string, rejects []transform.Reject) error {
	const chunk = 256
	for len(rejects) > 0 {
		n := min(chunk, len(rejects))
		var b strings.Builder
		b.WriteString("INSERT INTO _sepipe_rejects VALUES ")
		args := make([]any, 0, n*8)
		for i, r := range rejects[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, runID, object, r.Page, r.Row, r.Field, r.RawValue, r.Reason, r.RawRow)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return &WriteError{Object: object, Step: "record rejects", Path: "_sepipe_rejects", Err: err}
		}
		rejects = rejects[n:]
	}
	return nil
}

// IsLocked reports whether err says the warehouse is locked.
func IsLocked(err error) bool { return errors.Is(err, ErrWarehouseLocked) }
