package load_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/webhooktest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/service"
)

func TestEventsLoadIsIdempotentAndClosesTheWarehouse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := load.Lake{Root: t.TempDir()}
	path := lake.WarehousePath()
	var evs []service.Event
	for i := range 250 {
		evs = append(evs, *webhooktest.Received(i))
	}
	evs[1].Subscription = ""
	if ids, err := load.RecentEventIDs(ctx, path, 10); err != nil || len(ids) != 0 {
		t.Fatalf("no warehouse yet: %v %v", ids, err)
	}
	n, err := load.LoadEvents(ctx, lake, evs[:200])
	if err != nil || n != 200 {
		t.Fatalf("first load: %d new, %v", n, err)
	}
	// A replayed spool: half old, half new.
	n, err = load.LoadEvents(ctx, lake, evs[100:])
	if err != nil || n != 50 {
		t.Fatalf("second load: %d new, %v; want 50", n, err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("events reached the published warehouse before a publish")
	}
	if !lake.PublishPending() {
		t.Fatal("loaded events are not pending publication")
	}
	if err := load.PublishState(ctx, lake); err != nil {
		t.Fatal(err)
	}
	if lake.PublishPending() {
		t.Fatal("still pending after a publish")
	}
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var total, distinct, nullTimes, nullSubs int64
	var raw string
	var got time.Time
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT id), count(*) FILTER (time IS NULL), count(*) FILTER (subscription IS NULL) FROM events`).
		Scan(&total, &distinct, &nullTimes, &nullSubs); err != nil {
		t.Fatal(err)
	}
	if total != 250 || distinct != 250 || nullTimes != 84 || nullSubs != 1 {
		t.Errorf("events: %d rows, %d ids, %d null times, %d null subscriptions", total, distinct, nullTimes, nullSubs)
	}
	if err := db.QueryRow(`SELECT raw::VARCHAR, time FROM events WHERE id = 'ev-00007'`).Scan(&raw, &got); err != nil {
		t.Fatal(err)
	}
	if raw != string(evs[7].Raw) || !got.Equal(evs[7].Time) {
		t.Errorf("ev-00007: %s %s", raw, got)
	}
	var dataN int
	if err := db.QueryRow(`SELECT CAST(json_extract_string(raw, '$.data.n') AS INTEGER) FROM events WHERE id = 'ev-00042'`).Scan(&dataN); err != nil || dataN != 42 {
		t.Errorf("raw is not queryable JSON: %d %v", dataN, err)
	}
	db.Close()
	ids, err := load.RecentEventIDs(ctx, path, 3)
	if err != nil || len(ids) != 3 || ids[0] != "ev-00249" {
		t.Errorf("recent ids %v, %v", ids, err)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load.LoadEvents(ctx, load.Lake{Root: filepath.Join(blocked, "out")}, evs[:1]); err == nil || errors.Is(err, load.ErrWarehouseLocked) {
		t.Errorf("unopenable warehouse: %v", err)
	}
}
