package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

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

// eventsChunk is how many rows one INSERT statement carries.
const eventsChunk = 100

// LoadEvents opens the output folder's working database (OpenState, with
// opts), inserts evs into events in one transaction and closes it again,
// so it holds the state lock only for the batch; the events reach the
// published warehouse with the next publish (PublishState). Inserts are
// INSERT OR IGNORE on id: an event loaded before (a replayed spool, a late
// redelivery) is not loaded twice. It returns how many rows were new. When
// another sepipe process holds the state lock longer than the wait, the
// error wraps ErrWarehouseLocked and nothing is loaded.
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
	// The transaction outlives ctx (its statements do not): a transaction
	// bound to ctx is rolled back by database/sql in a goroutine of its
	// own when ctx ends, racing the Close below (see txContext).
	tx, err := wh.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return 0, wrap("begin", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, eventsDDL); err != nil {
		return 0, wrap("create table", err)
	}
	var before int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&before); err != nil {
		return 0, wrap("count", err)
	}
	for start := 0; start < len(evs); start += eventsChunk {
		chunk := evs[start:min(start+eventsChunk, len(evs))]
		var q strings.Builder
		q.WriteString(`INSERT OR IGNORE INTO events (id, type, time, received_at, subscription, raw) VALUES `)
		args := make([]any, 0, 6*len(chunk))
		for i, ev := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?)")
			var t, sub any
			if !ev.Time.IsZero() {
				t = ev.Time.UTC()
			}
			if ev.Subscription != "" {
				sub = ev.Subscription
			}
			args = append(args, ev.ID, ev.Type, t, ev.ReceivedAt.UTC(), sub, string(ev.Raw))
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return 0, wrap("insert", err)
		}
	}
	var after int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&after); err != nil {
		return 0, wrap("count", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap("commit", err)
	}
	return after - before, nil
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
