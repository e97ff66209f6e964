package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

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

// blockedLake is a stream whose recorded Iceberg commits a run could not
// settle: they stay recorded, the first one's error says why, and the
// stream is not read until they are settled or a rebuild of its table
// supersedes them (blockLake).
type blockedLake struct {
	runs    []string           // the runs whose intents of the stream stay recorded, oldest first
	intents []lakehouse.Intent // those intents (nil where one could not be read)
	err     error              // why the first could not be settled
}

// settleLakeIntents finishes or discards the Iceberg commits that runs
// recorded and did not mark: each is committed exactly once (Reconcile
// reads the table's snapshot log for the run id) or discarded. An intent
// that can be neither (a data file of its table is gone, the catalog or
// the store failed) blocks its stream alone, with the later intents of
// the stream, which must not be committed before it: the other streams
// settle, and the run goes on with them (blocked, by stream name). Only a
// failure to record what was settled fails the run.
func settleLakeIntents(ctx context.Context, wh *load.Warehouse, lh *lakehouse.Lakehouse, log *slog.Logger) (map[string]*blockedLake, error) {
	recorded, err := wh.RecordedLakeIntents(ctx)
	if err != nil || len(recorded) == 0 {
		return nil, err
	}
	if lh == nil {
		log.Warn("Iceberg commits recorded by earlier runs wait until output.lake.iceberg is configured again", "intents", len(recorded))
		return nil, nil
	}
	blocked := map[string]*blockedLake{}
	for _, li := range recorded {
		var in lakehouse.Intent
		jerr := json.Unmarshal(li.Intent, &in)
		if b := blocked[li.Stream]; b != nil {
			b.runs, b.intents = append(b.runs, li.RunID), append(b.intents, in)
			continue
		}
		block := func(err error) {
			blocked[li.Stream] = &blockedLake{runs: []string{li.RunID}, intents: []lakehouse.Intent{in}, err: err}
			log.Error("an earlier run's Iceberg commit could not be settled; the stream is not read until it is", "stream", li.Stream, "run", li.RunID, "err", err)
		}
		if jerr != nil {
			block(fmt.Errorf("the recorded Iceberg intent of run %s: %w", li.RunID, jerr))
			continue
		}
		r, err := lh.Reconcile(ctx, in)
		if err != nil {
			block(fmt.Errorf("settle the Iceberg commit of run %s: %w", li.RunID, err))
			continue
		}
		switch r.Status {
		case lakehouse.Committed, lakehouse.CommittedNow:
			if err := wh.MarkLakeIntent(ctx, li.RunID, li.Stream, load.LakeIntentCommitted, ""); err != nil {
				return nil, err
			}
			if r.Status == lakehouse.CommittedNow {
				log.Warn("committed to the Iceberg lake what a dead run had recorded", "dead_run", li.RunID, "stream", li.Stream, "snapshot", r.SnapshotID)
			}
		default:
			if err := lh.Discard(ctx, in); err != nil {
				block(fmt.Errorf("discard the Iceberg intent of run %s: %w", li.RunID, err))
				continue
			}
			if err := wh.MarkLakeIntent(ctx, li.RunID, li.Stream, load.LakeIntentDiscarded, r.Reason); err != nil {
				return nil, err
			}
			log.Error("a dead run's Iceberg commit could not be finished and was discarded; the table lacks that run's rows until the stream is synced again on that day",
				"dead_run", li.RunID, "stream", li.Stream, "day", in.Day, "reason", r.Reason)
		}
	}
	return blocked, nil
}

// lakeWayOut adds to err, an Iceberg commit of stream id that failed, what
// a person does about it when no later run can: a data file of the table
// is gone, and only a rebuild of the table (a full refresh of the stream)
// lets it take a commit again.
func lakeWayOut(id string, err error) error {
	if !errors.Is(err, lakehouse.ErrDataFileLost) {
		return err
	}
	return fmt.Errorf("%w; no later commit of the table can be made until it is rebuilt from the warehouse: run sepipe sync --full-refresh %s (the other streams go on committing)", err, id)
}

// rebuildsLake reports whether a stream's Iceberg table is rebuilt from
// the run's rows (Intent.Rebuild): a full refresh of an append or merge
// stream (streamStage.finish).
func rebuildsLake(mode load.WriteMode, fullRefresh bool) bool {
	return fullRefresh && mode != load.Replace
}

// holdBlocked takes out of the run's streams those whose earlier Iceberg
// commits could not be settled (pr.blocked), each a failed outcome naming
// why and the way out: reading them would stage a commit that must wait
// behind the blocked ones. A stream whose table the run rebuilds (a full
// refresh of an append or merge stream) is read: its rebuild supersedes
// them (pr.supersede).
func holdBlocked(streams []string, pr *prior, cfg Config) (read []string, outs []outcome) {
	for _, id := range streams {
		name := pr.name(id)
		b := pr.blocked[name]
		if b == nil {
			read = append(read, id)
			continue
		}
		mode, _ := load.ParseWriteMode(string(cfg.Streams[id].Mode))
		if rebuildsLake(mode, slices.Contains(cfg.FullRefresh, id)) {
			pr.supersede[name] = b
			read = append(read, id)
			continue
		}
		outs = append(outs, outcome{object: name, status: StatusFailed,
			err: &ObjectError{Object: name, Step: "lake", Err: lakeWayOut(id, b.err)}})
	}
	return read, outs
}

// commitLake commits the Iceberg intents of a committed run, one snapshot
// per stream, and marks each; it removes the staged files of the intents
// a stream's rebuild superseded. It returns the streams whose commit
// failed, by name: their intents stay recorded, and the next run settles
// them (or, when a data file of the table is gone, holds the stream until
// a full refresh rebuilds it).
func commitLake(ctx context.Context, wh *load.Warehouse, lh *lakehouse.Lakehouse, staged []*stagedObject, runID string, log *slog.Logger) map[string]error {
	failed := map[string]error{}
	for _, s := range staged {
		if s.err != nil || s.intent == nil {
			continue
		}
		r, err := lh.Commit(ctx, *s.intent)
		if err != nil {
			failed[s.object] = lakeWayOut(s.result.ServiceID, fmt.Errorf("stream %s: %w", s.object, err))
			continue
		}
		faults.At(faults.LakeCommitted, s.object)
		if err := wh.MarkLakeIntent(ctx, runID, s.object, load.LakeIntentCommitted, ""); err != nil {
			failed[s.object] = err
			continue
		}
		if r.Attempts > 1 {
			log.Info("the Iceberg commit was retried after other writers committed first", "stream", s.object, "attempts", r.Attempts)
		}
		for _, in := range s.superseded {
			if err := lh.Discard(ctx, in); err != nil {
				log.Warn("could not remove the files of an Iceberg commit the rebuild superseded (lake expire removes them)", "stream", s.object, "run", in.RunID, "err", err)
			}
		}
	}
	return failed
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
