package load_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepipe/sepipe/load"
)

// TestLakeIntents: a table's lake intent is recorded by the run's
// transaction, or not at all when the transaction fails; it is listed
// until marked, and its status is one of the known ones.
func TestLakeIntents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, wh := newWarehouse(t)
	now := time.Now()
	intent := []byte(`{"table":["sepipe","thing"],"run_id":"r1","files":["s3://b/x.parquet"]}`)

	// The intent's table loads, the next one does not: nothing is recorded.
	good := stage(t, lake, "r0", "2026-11-23", 20)
	good.LakeIntent = intent
	bad := stage(t, lake, "r0-other", "2026-11-23", 10)
	bad.Object, bad.Rows = "other", 11
	if err := wh.Commit(ctx, load.Run{ID: "r0", Started: now, Status: "succeeded"}, []load.Table{good, bad}); err == nil {
		t.Fatal("a commit with a table that does not verify succeeded")
	}
	if got, err := wh.RecordedLakeIntents(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after a failed commit: %v, %v; want no intent", got, err)
	}

	good = stage(t, lake, "r1", "2026-11-23", 20)
	good.LakeIntent = intent
	plain := stage(t, lake, "r1-plain", "2026-11-23", 5)
	plain.Object = "plain" // no lake intent
	if err := wh.Commit(ctx, load.Run{ID: "r1", Started: now, Status: "succeeded"}, []load.Table{good, plain}); err != nil {
		t.Fatal(err)
	}
	got, err := wh.RecordedLakeIntents(ctx)
	if err != nil || len(got) != 1 || got[0].RunID != "r1" || got[0].Stream != "thing" {
		t.Fatalf("recorded: %+v, %v; want r1/thing", got, err)
	}
	if string(got[0].Intent) != string(intent) {
		t.Errorf("intent %s, want %s", got[0].Intent, intent)
	}
	if err := wh.MarkLakeIntent(ctx, "r1", "thing", "done", ""); err == nil {
		t.Error("an unknown status was accepted")
	}
	if err := wh.MarkLakeIntent(ctx, "r1", "thing", load.LakeIntentDiscarded, "its files are gone"); err != nil {
		t.Fatal(err)
	}
	if got, err := wh.RecordedLakeIntents(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after marking: %+v, %v", got, err)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM _sepipe_lake_intents WHERE status = 'discarded' AND reason = 'its files are gone'`); n != 1 {
		t.Errorf("discarded intents with the reason: %d", n)
	}
}
