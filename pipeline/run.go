package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"golang.org/x/sync/errgroup"
)

// Sync runs one sync of the report objects from src into cfg.Out, in the
// steps pipeline's documentation lists: prepare (select the streams, open
// the Iceberg lake, finish what a dead run left), stage every stream (read
// and decode its pages into staged files, the early load beside), commit
// the working database in one transaction, publish the lake's partitions,
// commit to the Iceberg lake, publish the warehouse. A run that committed
// but could not publish the warehouse or commit to the Iceberg lake
// returns its Result with the error.
func Sync(ctx context.Context, src Source, cfg Config) (*Result, error) {
	cfg.setDefaults()
	r := &syncRun{cfg: cfg, src: src, log: cfg.Logger, lake: load.Lake{Root: cfg.Out}}
	if err := r.lake.CheckWritable(); err != nil {
		return nil, err
	}
	unlock, err := lockOut(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if r.lh != nil {
		defer r.lh.Close()
	}
	if r.nothingLeft() {
		return r.res, nil
	}
	defer r.lake.Discard(r.res.RunID) //nolint:errcheck // best effort; the next run cleans too
	step := r.timed(StepFetch)
	early, err := r.stage(ctx)
	step()
	if early != nil {
		defer early.abort()
	}
	if err != nil {
		return nil, err
	}
	step = r.timed(StepLoad)
	err = r.commit(ctx, early)
	step()
	if err != nil {
		return nil, err
	}
	defer r.wh.Close()
	// Committed: publishing it finishes even when ctx ends now (a SIGTERM
	// here exited 1, "committed nothing", and left the warehouse behind
	// the run until the next night; found by review).
	ctx = context.WithoutCancel(ctx)
	step = r.timed(StepPublish)
	err = r.publishLake(ctx)
	step()
	if err != nil {
		return nil, err
	}
	step = func() {}
	if r.lh != nil {
		step = r.timed(StepIceberg)
	}
	lakeErr := r.commitIceberg(ctx)
	step()
	step = r.timed(StepPublish)
	defer step()
	return r.publishWarehouse(ctx, lakeErr)
}

// timed starts timing a step; the function it returns ends it, adding
// the time to the result's steps.
func (r *syncRun) timed(name string) func() {
	start := time.Now()
	return func() {
		if r.res.Steps == nil {
			r.res.Steps = map[string]time.Duration{}
		}
		r.res.Steps[name] += time.Since(start)
	}
}

// syncRun is one run of Sync: what each step leaves the next.
type syncRun struct {
	cfg  Config
	src  Source
	log  *slog.Logger
	lake load.Lake
	lh   *lakehouse.Lakehouse // the Iceberg lake; nil without one

	res     *Result
	pr      *prior          // what the warehouse knew before the run
	streams []string        // the streams the run reads
	outs    []outcome       // streams that will not commit
	staged  []*stagedObject // what each stream of streams staged
	run     load.Run        // the run's record
	runErr  *RunError       // the streams that did not commit, and why
	wh      *load.Warehouse // the working database, from the commit on
	nothing bool            // a continuation with nothing left to read
}

// prepare starts the run's result, resolves its streams (Select), opens
// the Iceberg lake, finishes what a dead run left and reads what the
// warehouse knows (recoverAndRead), and notes the streams the run will
// not read: those of an interface the tenant may not use, and those whose
// earlier Iceberg commits could not be settled (holdBlocked).
func (r *syncRun) prepare(ctx context.Context) error {
	cfg := r.cfg
	started := cfg.Now()
	r.res = &Result{
		RunID:        NewRunID(started),
		SnapshotDate: started.UTC().Format("2006-01-02"),
		Started:      started,
		Warehouse:    r.lake.WarehousePath(),
		Lake:         r.lake.LakeDir(),
	}
	r.log = r.log.With("run", r.res.RunID)
	r.run = load.Run{ID: r.res.RunID, Started: started, SnapshotDate: r.res.SnapshotDate, Status: "succeeded"}
	r.runErr = &RunError{RunID: r.res.RunID}

	sel, err := cfg.selection(ctx, r.src)
	if err != nil {
		return err
	}
	ids, reportObjects, reportingDenied := sel.Streams(), sel.Asked, sel.ReportingDenied
	if r.lh, err = openLake(ctx, cfg); err != nil {
		return err
	}
	r.pr, err = recoverAndRead(ctx, r.lake, r.lh, append(slices.Clone(ids), reportObjects...), cfg.Streams, cfg.FullRefresh, r.res.SnapshotDate, cfg.LockWait, r.log)
	if err != nil {
		if r.lh != nil {
			r.lh.Close()
		}
		return err
	}
	if reportingDenied != nil {
		var names []string
		for _, id := range reportObjects {
			names = append(names, r.pr.name(id))
		}
		if len(names) == 0 {
			for _, k := range r.pr.known {
				if !isCollection(k) {
					names = append(names, k)
				}
			}
		}
		if len(names) == 0 {
			names = []string{"(" + extract.IfaceReporting + ")"}
		}
		for _, n := range names {
			r.outs = append(r.outs, outcome{object: n, status: StatusSkipped, err: &ObjectError{Object: n, Step: "list", Err: reportingDenied}})
		}
	}
	streams, cont := cfg.Continuation.streams(ids, cfg.FullRefresh, func(id string) bool { return slices.Contains(r.pr.unfinished, r.pr.name(id)) })
	if cont && len(streams) > 0 {
		r.log.Info("continuing the streams a quota deferred, or that failed, earlier today", "streams", streams)
	}
	if cont && len(streams) == 0 { // ContinueOnly, and nothing is left
		r.nothing = true
		return nil
	}
	streams, held := holdBlocked(streams, r.pr, cfg)
	r.streams, r.outs = streams, append(r.outs, held...)
	return nil
}

// nothingLeft reports whether the run has nothing to do: it continues a
// day on which a quota deferred streams (ContinueOnly), and none is left.
func (r *syncRun) nothingLeft() bool {
	if !r.nothing {
		return false
	}
	r.log.Info("nothing left to continue today", "snapshot_date", r.res.SnapshotDate)
	r.res.Finished = r.cfg.Now()
	return true
}

// stage reads every stream of the run into staging, ObjectConcurrency at
// a time (stager), with the early load beside, which puts the
// streams' part files into their histories, in the run's transaction,
// while the run fetches. It returns the early loader (for the commit, and
// to abort) and an error only when the run was cancelled: a stream's
// failure is kept in its stagedObject.
func (r *syncRun) stage(ctx context.Context) (*earlyLoader, error) {
	cfg := r.cfg
	r.log.Info("run started", "out", cfg.Out, "snapshot_date", r.res.SnapshotDate, "streams", len(r.streams))
	r.staged = make([]*stagedObject, len(r.streams))
	g, gctx := errgroup.WithContext(ctx)
	// The early load lives in the run's context, not the group's: that
	// ends when the group does, and with it the transaction.
	early := newEarlyLoader(ctx, r.run, cfg.CountNewRows, func(ctx context.Context) (*load.Warehouse, error) {
		return load.OpenState(ctx, r.lake, load.EarlySettings(cfg.DuckDBMemory)...)
	}, r.log)
	g.SetLimit(cfg.ObjectConcurrency)
	st := &stager{src: r.src, lake: r.lake, lh: r.lh, early: early, res: r.res, cfg: cfg, pr: r.pr, log: r.log}
	for i, id := range r.streams {
		g.Go(func() error {
			r.staged[i] = st.stage(gctx, id)
			// A stream's failure is recorded, not returned: the others go
			// on. Only cancellation stops the group.
			return context.Cause(gctx)
		})
	}
	if err := g.Wait(); err != nil {
		discardLake(ctx, r.lh, r.staged, r.log)
		return early, fmt.Errorf("run %s cancelled: %w", r.res.RunID, err)
	}
	if err := context.Cause(ctx); err != nil {
		discardLake(ctx, r.lh, r.staged, r.log)
		return early, fmt.Errorf("run %s cancelled: %w", r.res.RunID, err)
	}
	faults.At(faults.Staged, "")
	return early, nil
}

// commit loads what the streams staged into the working database, with
// state and the run record, in one transaction: the one the early load
// began, when it did. A run that commits no stream is recorded (and
// published) as failed or partial, and returns its *RunError; one whose
// transaction fails, the error. On success r.wh is the working database,
// for the steps after.
func (r *syncRun) commit(ctx context.Context, early *earlyLoader) error {
	cfg, log := r.cfg, r.log
	var tables []load.Table
	for _, s := range r.staged {
		if s.err != nil {
			r.outs = append(r.outs, outcome{object: s.object, status: classify(s.object, s.err), err: s.err})
			continue
		}
		s.result.NewRows = -1
		if cfg.CountNewRows {
			s.table.NewRows = &s.result.NewRows
		}
		s.table.FutureCursors = &s.result.FutureCursors
		tables = append(tables, s.table)
	}
	settings := load.RunSettings(cfg.DuckDBMemory, pages(r.staged))
	wh, rl := early.finish()
	if rl != nil {
		for _, s := range r.staged {
			if n := rl.Loaded(s.object); n > 0 {
				log.Debug("part files loaded while the run fetched", "stream", s.object, "files", n)
			}
		}
		// The early load ran on one thread, beside the fetch; the rest
		// gets the threads of the settings (as many as the memory limit
		// leaves room for, load.WithThreads).
		if err := rl.Configure(ctx, settings...); err != nil {
			_ = rl.Rollback()
			_ = wh.Close()
			wh, rl = nil, nil
			log.Debug("the run loads its rows after the fetch instead of during it", "err", err)
		}
	}
	if wh == nil {
		var err error
		if wh, err = load.OpenState(ctx, r.lake, append(settings, load.WithLockWait(cfg.LockWait))...); err != nil {
			discardLake(ctx, r.lh, r.staged, log)
			return err
		}
	}
	for _, o := range r.outs {
		oe, ok := o.err.(*ObjectError)
		if !ok {
			oe = &ObjectError{Object: o.object, Step: "read", Err: o.err}
		}
		switch o.status {
		case StatusSkipped:
			r.runErr.Skipped = append(r.runErr.Skipped, oe)
		case StatusDeferred:
			r.runErr.Deferred = append(r.runErr.Deferred, oe)
		default:
			r.runErr.Failed = append(r.runErr.Failed, oe)
		}
		r.run.Others = append(r.run.Others, o.record())
	}
	warnUnread(log, r.outs)
	if r.incomplete() {
		// Partial when other streams committed; a run that committed
		// nothing and failed nothing (a quota deferred its streams) is
		// recorded partial too, as its exit code says (RunError.Status).
		r.runErr.Partial = len(tables) > 0
		r.run.Status, r.run.Error = r.runErr.Status(), r.runErr.Error()
	}
	r.run.Finished = cfg.Now()
	// A failed run is recorded and published too: _sepipe_runs is what a
	// dashboard of the pipeline's health reads.
	recordFailure := func() {
		if err := wh.RecordFailure(ctx, r.run); err != nil {
			log.Error("could not record the failed run", "err", err)
		} else if err := wh.Publish(ctx); err != nil {
			log.Warn("could not publish the failed run's record", "err", err)
		}
		wh.Close()
	}
	if len(tables) == 0 {
		if rl != nil {
			_ = rl.Rollback()
		}
		recordFailure()
		return r.runErr
	}
	err := func() error {
		if rl != nil {
			err := rl.Commit(ctx, r.run, tables)
			if err == nil {
				return nil
			}
			// Stale, or an error the early rows may have caused (DuckDB's
			// memory holding them): nothing of the transaction stays, so
			// the run loads once more from the staged files.
			log.Debug("the rows loaded while the run fetched are loaded again from the staged files", "err", err)
		}
		return wh.Commit(ctx, r.run, tables)
	}()
	if err != nil {
		// Nothing recorded the intents: no later run commits them.
		discardLake(ctx, r.lh, r.staged, log)
		r.run.Status, r.run.Error = "failed", err.Error()
		recordFailure()
		return fmt.Errorf("run %s: load warehouse: %w", r.res.RunID, err)
	}
	faults.At(faults.Committed, "")
	r.wh = wh
	return nil
}

// incomplete reports whether some streams of the run did not commit.
func (r *syncRun) incomplete() bool { return len(r.outs) > 0 }

// withRunErr keeps, with an error of a step after the commit, the run's
// own (streams failed or deferred beside the committed ones), for the
// exit code and for what a schedule retries or continues.
func (r *syncRun) withRunErr(err error) error {
	if r.incomplete() {
		return fmt.Errorf("%w; %w", err, r.runErr)
	}
	return err
}

// publishLake publishes the lake partitions of the committed streams by
// renaming them into place, and records the run published. A death from
// here on is finished by the next run (recoverAndRead).
func (r *syncRun) publishLake(ctx context.Context) error {
	res := r.res
	for _, o := range r.outs {
		res.Objects = append(res.Objects, ObjectResult{Object: o.object, Status: o.status, Err: o.err})
	}
	for _, s := range r.staged {
		if s.err != nil {
			continue
		}
		if err := r.lake.Publish(res.RunID, s.object, res.SnapshotDate); err != nil {
			return r.withRunErr(fmt.Errorf("run %s %w: publishing the lake failed (the next run finishes it): %w", res.RunID, ErrNotPublished, err))
		}
		faults.At(faults.Published, s.object)
		s.result.Files = publishedFiles(r.lake, s, res.SnapshotDate)
		res.Objects = append(res.Objects, s.result)
		if n := s.result.FutureCursors; n > 0 {
			r.log.Warn("rows whose cursor is later than the run could be (a day of clock skew allowed) did not move the watermark; they are read again each run until the day comes: check the service's values",
				"stream", s.object, "rows", n, "cursor", s.table.Cursor)
		}
	}
	if err := r.wh.MarkPublished(ctx, res.RunID); err != nil {
		return r.withRunErr(fmt.Errorf("run %s %w: its lake partitions are published, recording it failed (the next run finishes it): %w", res.RunID, ErrNotPublished, err))
	}
	return nil
}

// commitIceberg commits the recorded intents to the Iceberg lake and
// notes, on each stream's result, why its commit did not follow. One
// that fails stays recorded; the next run settles it (or, when a data
// file of the table is gone, holds the stream until a full refresh
// rebuilds it). It returns the failures joined (nil without a lake).
func (r *syncRun) commitIceberg(ctx context.Context) error {
	if r.lh == nil {
		return nil
	}
	failed := commitLake(ctx, r.wh, r.lh, r.staged, r.res.RunID, r.log)
	var errs []error
	for i := range r.res.Objects {
		if e := failed[r.res.Objects[i].Object]; e != nil {
			r.res.Objects[i].LakeErr = e
			errs = append(errs, e)
		}
	}
	lakeErr := errors.Join(errs...)
	if errors.Is(lakeErr, lakehouse.ErrDataFileLost) {
		r.log.Error("the run committed, but an Iceberg table lost a data file and cannot take its commit", "err", lakeErr)
	} else if lakeErr != nil {
		r.log.Error("the run committed, but committing it to the Iceberg lake failed; the next run finishes it", "err", lakeErr)
	}
	return lakeErr
}

// publishWarehouse publishes the working database over the output
// folder's warehouse.duckdb, where readers' new connections see the run,
// and returns the run's result: from here the run is committed and its
// lake published, and what is left to finish it does not take its result
// away (the summary of a run whose publish a writer blocked was not
// printed).
func (r *syncRun) publishWarehouse(ctx context.Context, lakeErr error) (*Result, error) {
	res := r.res
	sort.Slice(res.Objects, func(i, j int) bool { return res.Objects[i].Object < res.Objects[j].Object })
	if err := r.wh.Publish(ctx); err != nil {
		res.Finished = r.cfg.Now()
		if errors.Is(err, load.ErrPublishBlocked) {
			return res, r.withRunErr(fmt.Errorf("run %s committed, but publishing %s failed (the next run or `sepipe publish` finishes it): %w", res.RunID, r.lake.WarehousePath(), err))
		}
		return res, r.withRunErr(fmt.Errorf("run %s %w: publishing %s failed (the next run or `sepipe publish` finishes it): %w", res.RunID, ErrNotPublished, r.lake.WarehousePath(), err))
	}
	res.Finished = r.cfg.Now()
	if errors.Is(lakeErr, lakehouse.ErrDataFileLost) {
		return res, r.withRunErr(fmt.Errorf("run %s committed, but %w: %w", res.RunID, ErrLakePending, lakeErr))
	}
	if lakeErr != nil {
		return res, r.withRunErr(fmt.Errorf("run %s committed, but %w (the next run finishes it): %w", res.RunID, ErrLakePending, lakeErr))
	}
	r.log.Info("run finished", "status", r.run.Status, "objects", len(r.staged)-countFailed(r.staged), "duration", res.Finished.Sub(res.Started).Round(time.Millisecond))
	if r.incomplete() {
		return res, r.runErr
	}
	return res, nil
}

// countFailed counts the staged streams that failed.
func countFailed(staged []*stagedObject) int {
	n := 0
	for _, s := range staged {
		if s.err != nil {
			n++
		}
	}
	return n
}

// warnUnread gives one warning per interface the tenant may not use, one
// for the streams a quota deferred that a later window holds, and one for
// those no window holds.
func warnUnread(log *slog.Logger, outs []outcome) {
	byIface := map[string][]string{}
	first := map[string]error{}
	for _, o := range outs {
		if o.status != StatusSkipped {
			continue
		}
		iface := streamInterface(o.object)
		byIface[iface] = append(byIface[iface], o.object)
		if first[iface] == nil {
			first[iface] = o.err
		}
	}
	for _, iface := range slices.Sorted(maps.Keys(byIface)) {
		log.Warn(skippedNote(iface, byIface[iface], errors.Unwrap(first[iface])))
	}
	var later, never []string // deferred streams a later window holds, and those none does
	for _, o := range outs {
		switch {
		case o.status != StatusDeferred || slices.Contains(later, o.object) || slices.Contains(never, o.object):
		case noWindowHolds(o.err):
			never = append(never, o.object)
		default:
			later = append(later, o.object)
		}
	}
	if len(later) > 0 {
		log.Warn("the service's request quota would not cover these streams (an announced quota, or a 429 asking to wait past requests.max_wait); they keep their last good data and the next run of the day continues them", "streams", later)
	}
	if len(never) > 0 {
		log.Warn("these streams need more requests than the service's quota allows in a whole window, so no run reads them within one; they keep their last good data: "+extract.ExceedsAdvice, "streams", never)
	}
}

// pages is what the streams' pages weigh for DuckDB's memory at the
// commit (load.RunSettings).
func pages(staged []*stagedObject) load.Pages {
	var p load.Pages
	for _, s := range staged {
		if s != nil {
			p.Largest = max(p.Largest, s.largestPage)
			p.HugeBytes += s.hugeBytes
		}
	}
	return p
}
