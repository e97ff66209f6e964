package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// prior is what the warehouse knew before this run.
type prior struct {
	fields     map[string][]service.Field // effective fields per object
	describes  map[string][]service.Field // the describe recorded with them, per report object
	state      map[string]load.State
	known      []string // every stream (by name) earlier runs loaded
	unfinished []string // streams (by name) deferred, or failed beside a deferred one, earlier on the run's snapshot day and not committed since
	names      *load.Names
	// afresh: merge streams (by name) whose table the run's load starts
	// afresh, their mode having been replace (load.Warehouse.StartsAfresh);
	// asked only with an Iceberg lake, whose table is then rebuilt from the
	// run's rows as well.
	afresh map[string]bool
	// blocked: streams (by name) whose earlier Iceberg commits could not
	// be settled (settleLakeIntents); supersede: those of them whose
	// table the run rebuilds, which supersedes those commits (holdBlocked).
	blocked, supersede map[string]*blockedLake
}

// describeChanges is what changed in a report object's describe since the
// run that last loaded it: resolved (the live describe against the table's
// effective fields) on the run that meets a change, and nothing on the runs
// after it, whose table keeps a removed field's column or a narrowed
// field's wider type (a warning each night for a change made once).
func (p *prior) describeChanges(id string, live []service.Field, resolved schemas.Diff) schemas.Diff {
	recorded, ok := p.describes[id]
	if !ok || recorded == nil {
		return resolved
	}
	return schemas.Compare(id, recorded, live)
}

// name is the table and folder name of a stream's service id.
func (p *prior) name(id string) string {
	if n, ok := p.names.Name(id); ok {
		return n
	}
	return id // not reached: recoverAndRead names every id of the run
}

// recover finishes what a dead run left (a lake partition or a published
// warehouse it did not finish publishing) and reads the working database's
// schemas and state. It holds the working database only for that.
func recoverAndRead(ctx context.Context, lake load.Lake, lh *lakehouse.Lakehouse, objects []string, streams map[string]StreamConfig, reset []string, day string, lockWait time.Duration, log *slog.Logger) (pr *prior, err error) {
	wh, err := load.OpenState(ctx, lake, load.WithLockWait(lockWait))
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	defer func() {
		if err != nil {
			return
		}
		if perr := wh.Publish(ctx); errors.Is(perr, load.ErrPublishBlocked) {
			log.Warn("the published warehouse is not up to date: "+perr.Error(), "path", lake.WarehousePath())
		} else if perr != nil {
			err = perr
		}
	}()
	// A partition set aside by a dead publish goes back first, so that
	// finishing the publish below replaces it like any other.
	if err := lake.Repair(); err != nil {
		return nil, fmt.Errorf("repair lake %s: %w", lake.LakeDir(), err)
	}
	if err := lake.ClearScratch(); err != nil {
		// A leftover that cannot go takes disk space, nothing more: new
		// scratch files have names of their own.
		log.Warn("could not clear the scratch folder", "path", lake.ScratchDir(), "err", err)
	}
	pending, err := wh.PendingPublishes(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		for _, o := range p.Objects {
			if lake.Staged(p.RunID, o, p.SnapshotDate) {
				if err := lake.Publish(p.RunID, o, p.SnapshotDate); err != nil {
					return nil, fmt.Errorf("finish publishing run %s: %w", p.RunID, err)
				}
			}
		}
		if err := wh.MarkPublished(ctx, p.RunID); err != nil {
			return nil, err
		}
		log.Warn("finished publishing a run that died after committing", "dead_run", p.RunID, "objects", p.Objects)
	}
	// Whatever else a dead run left in staging was never committed.
	if err := lake.DiscardAll(); err != nil {
		return nil, fmt.Errorf("clean staging in %s: %w", lake.Root, err)
	}
	blocked, err := settleLakeIntents(ctx, wh, lh, log)
	if err != nil {
		return nil, err
	}
	pr = &prior{fields: map[string][]service.Field{}, describes: map[string][]service.Field{}, state: map[string]load.State{}, afresh: map[string]bool{},
		blocked: blocked, supersede: map[string]*blockedLake{}}
	if pr.names, err = wh.Names(ctx); err != nil {
		return nil, err
	}
	pr.names.Assign(objects, Collections)
	if pr.known, err = wh.KnownObjects(ctx); err != nil {
		return nil, err
	}
	if pr.unfinished, err = wh.Unfinished(ctx, day); err != nil {
		return nil, err
	}
	for _, o := range objects {
		if mode, _ := load.ParseWriteMode(string(streams[o].Mode)); lh != nil && mode == load.Merge {
			if pr.afresh[pr.name(o)], err = wh.StartsAfresh(ctx, pr.name(o), mode, day); err != nil {
				return nil, err
			}
		}
		if slices.Contains(reset, o) {
			continue // full refresh: start from nothing
		}
		f, err := wh.StoredFields(ctx, pr.name(o))
		if err != nil {
			return nil, err
		}
		pr.fields[o] = f
		if pr.describes[o], err = wh.StoredDescribe(ctx, pr.name(o)); err != nil {
			return nil, err
		}
		if st, ok, err := wh.State(ctx, pr.name(o)); err != nil {
			return nil, err
		} else if ok {
			pr.state[o] = st
		}
	}
	return pr, nil
}
