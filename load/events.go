package load

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/sepipe/sepipe/service"
)

// EventsTable is the warehouse table of webhook events.
const EventsTable = "events"

// eventsDDL creates the events table. subscription is the delivery URL's
// ?subscription= value (NULL without one); raw is the event as received.
const eventsDDL = `
CREATE TABLE IF NOT EXISTS events (
	id           VARCHAR PRIMARY KEY,
	type         VARCHAR NOT NULL,
	time         TIMESTAMPTZ,
	received_at  TIMESTAMPTZ NOT NULL,
	subscription VARCHAR,
	raw          JSON NOT NULL
);`

// eventsBatch is the temporary table a batch of events is appended to
// before it is inserted into events.
const eventsBatch = "sepipe_events_batch"

// LoadEvents opens the output folder's working database (OpenState, with
// opts), inserts evs into events in one transaction and closes it again,
// so it holds the state lock only for the batch; the events reach the
// published warehouse with the next publish (PublishState). Inserts are
// INSERT OR IGNORE on id: an event loaded before (a replayed spool, a late
// redelivery) is not loaded twice. It returns how many rows were new. When
// another sepipe process holds the state lock longer than the wait, the
// error wraps ErrWarehouseLocked and nothing is loaded.
//
// The events go through DuckDB's appender into a temporary table of the
// connection, and from there into events by one INSERT: bound
// parameters, a hundred rows a statement, loaded about 11,000 events a
// second, slower than the listener acknowledges them (issue 40).
func LoadEvents(ctx context.Context, lake Lake, evs []service.Event, opts ...OpenOption) (inserted int64, err error) {
	if len(evs) == 0 {
		return 0, nil
	}
	wh, err := OpenState(ctx, lake, opts...)
	if err != nil {
		return 0, err
	}
	path := wh.path
	defer func() {
		if cerr := wh.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("warehouse %s: close: %w", path, cerr)
		}
	}()
	wrap := func(step string, err error) error {
		return &WriteError{Object: EventsTable, Step: step, Path: path, Err: err}
	}
	// The temporary table, the appender and the transaction share the
	// pool's one connection.
	conn, err := wh.db.Conn(ctx)
	if err != nil {
		return 0, wrap("connect", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE OR REPLACE TEMP TABLE `+eventsBatch+
		` (id VARCHAR, type VARCHAR, time TIMESTAMPTZ, received_at TIMESTAMPTZ, subscription VARCHAR, raw VARCHAR)`); err != nil {
		return 0, wrap("create batch table", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS temp.`+eventsBatch) //nolint:errcheck // the connection closes anyway
	if err := conn.Raw(func(dc any) error { return appendEvents(ctx, dc, evs) }); err != nil {
		return 0, wrap("append", err)
	}
	// The transaction outlives ctx (its statements do not): a transaction
	// bound to ctx is rolled back by database/sql in a goroutine of its
	// own when ctx ends, racing the Close below (see txContext).
	tx, err := conn.BeginTx(txContext(ctx), nil)
	if err != nil {
		return 0, wrap("begin", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, eventsDDL); err != nil {
		return 0, wrap("create table", err)
	}
	var before, after int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&before); err != nil {
		return 0, wrap("count", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO events (id, type, time, received_at, subscription, raw)
		SELECT id, type, time, received_at, subscription, raw::JSON FROM temp.`+eventsBatch); err != nil {
		return 0, wrap("insert", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&after); err != nil {
		return 0, wrap("count", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap("commit", err)
	}
	return after - before, nil
}

// appendEvents appends evs to the batch table through DuckDB's appender
// on the driver connection dc.
func appendEvents(ctx context.Context, dc any, evs []service.Event) error {
	c, ok := dc.(driver.Conn)
	if !ok {
		return fmt.Errorf("not a DuckDB connection: %T", dc)
	}
	a, err := duckdb.NewAppender(c, "temp", "main", eventsBatch)
	if err != nil {
		return err
	}
	for i := range evs {
		ev := &evs[i]
		var t, sub driver.Value
		if !ev.Time.IsZero() {
			t = ev.Time.UTC()
		}
		if ev.Subscription != "" {
			sub = ev.Subscription
		}
		if err := a.AppendRow(ev.ID, ev.Type, t, ev.ReceivedAt.UTC(), sub, string(ev.Raw)); err != nil {
			a.Close()
			return fmt.Errorf("event %.64q: %w", ev.ID, err)
		}
		if i%4096 == 0 && ctx.Err() != nil {
			a.Close()
			return context.Cause(ctx)
		}
	}
	return a.CloseWithCancel(ctx)
}

// RecentEventIDs returns the ids of the n events most recently received
// into the warehouse at path (the published one: reading it never waits
// for a writer), to seed a receiver's deduplication. A missing warehouse
// or events table gives none. The warehouse is opened read-only and
// closed before returning.
func RecentEventIDs(ctx context.Context, path string, n int) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	wh, err := OpenReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	db := wh.db
	var has int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND database_name = current_database() AND table_name = 'events'`).Scan(&has); err != nil || has == 0 {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT id FROM events ORDER BY received_at DESC LIMIT ?`, n)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: recent event ids: %w", path, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
