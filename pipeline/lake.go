package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
)

// The Iceberg lake (Config.Iceberg) is a second lake beside the output
// folder's own: the run protocol of docs/scale-out.md, wired here.
//
//   - recoverAndRead settles every intent a dead run recorded and did not
//     mark (settleLakeIntents);
//   - each stream's batches go to its Iceberg table's stage writer as they
//     go to its local Parquet writers (objectSink): an Intent, no snapshot;
//   - the Intent (JSON) is recorded in _sepipe_lake_intents by the
//     transaction that commits the run (load.Table.LakeIntent);
//   - after that transaction and the local lake's publish, each Intent is
//     committed (one snapshot per stream, idempotent by run id) and marked
//     (commitLake);
//   - a run that does not commit removes what it staged (discardLake).

// openLake opens the configured Iceberg lake, or returns nil when there
// is none.
func openLake(ctx context.Context, cfg Config) (*lakehouse.Lakehouse, error) {
	if cfg.Iceberg == nil {
		return nil, nil
	}
	lh, err := lakehouse.Open(ctx, *cfg.Iceberg, lakehouse.WithAllocator(cfg.Allocator))
	if err != nil {
		return nil, fmt.Errorf("open the Iceberg lake: %w", err)
	}
	// One clear error before anything is read, not one per stream.
	if err := lh.CheckWarehouse(ctx); err != nil {
		lh.Close()
		return nil, fmt.Errorf("open the Iceberg lake: %w", err)
	}
	return lh, nil
}

// settleLakeIntents finishes or discards the Iceberg commits that runs
// recorded and did not mark: each is committed exactly once (Reconcile
// reads the table's snapshot log for the run id) or discarded.
func settleLakeIntents(ctx context.Context, wh *load.Warehouse, lh *lakehouse.Lakehouse, log *slog.Logger) error {
	recorded, err := wh.RecordedLakeIntents(ctx)
	if err != nil || len(recorded) == 0 {
		return err
	}
	if lh == nil {
		log.Warn("Iceberg commits recorded by earlier runs wait until output.lake.iceberg is configured again", "intents", len(recorded))
		return nil
	}
	for _, li := range recorded {
		var in lakehouse.Intent
		if err := json.Unmarshal(li.Intent, &in); err != nil {
			return fmt.Errorf("the recorded Iceberg intent of run %s, stream %s: %w", li.RunID, li.Stream, err)
		}
		r, err := lh.Reconcile(ctx, in)
		if err != nil {
			return fmt.Errorf("settle the Iceberg commit of run %s, stream %s: %w", li.RunID, li.Stream, err)
		}
		switch r.Status {
		case lakehouse.Committed, lakehouse.CommittedNow:
			if err := wh.MarkLakeIntent(ctx, li.RunID, li.Stream, load.LakeIntentCommitted, ""); err != nil {
				return err
			}
			if r.Status == lakehouse.CommittedNow {
				log.Warn("committed to the Iceberg lake what a dead run had recorded", "dead_run", li.RunID, "stream", li.Stream, "snapshot", r.SnapshotID)
			}
		default:
			if err := lh.Discard(ctx, in); err != nil {
				return fmt.Errorf("discard the Iceberg intent of run %s, stream %s: %w", li.RunID, li.Stream, err)
			}
			if err := wh.MarkLakeIntent(ctx, li.RunID, li.Stream, load.LakeIntentDiscarded, r.Reason); err != nil {
				return err
			}
			log.Error("a dead run's Iceberg commit could not be finished and was discarded; the table lacks that run's rows until the stream is synced again on that day",
				"dead_run", li.RunID, "stream", li.Stream, "day", in.Day, "reason", r.Reason)
		}
	}
	return nil
}

// commitLake commits the Iceberg intents of a committed run, one snapshot
// per stream, and marks each. An error leaves its intent recorded: the
// next run settles it.
func commitLake(ctx context.Context, wh *load.Warehouse, lh *lakehouse.Lakehouse, staged []*stagedObject, runID string, log *slog.Logger) error {
	var errs []error
	for _, s := range staged {
		if s.err != nil || s.intent == nil {
			continue
		}
		r, err := lh.Commit(ctx, *s.intent)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", s.object, err))
			continue
		}
		faults.At(faults.LakeCommitted, s.object)
		if err := wh.MarkLakeIntent(ctx, runID, s.object, load.LakeIntentCommitted, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Attempts > 1 {
			log.Info("the Iceberg commit was retried after other writers committed first", "stream", s.object, "attempts", r.Attempts)
		}
	}
	return errors.Join(errs...)
}

// discardLake removes the Iceberg files a run staged and will not commit.
func discardLake(ctx context.Context, lh *lakehouse.Lakehouse, staged []*stagedObject, log *slog.Logger) {
	if lh == nil {
		return
	}
	ctx = context.WithoutCancel(ctx) // a cancelled run cleans up too
	for _, s := range staged {
		if s == nil || s.intent == nil {
			continue
		}
		if err := lh.Discard(ctx, *s.intent); err != nil {
			log.Warn("could not remove the Iceberg files of a run that did not commit (lake expire removes them)", "stream", s.object, "err", err)
		}
	}
}
