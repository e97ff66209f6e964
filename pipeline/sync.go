package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// Source is what a sync needs from the service: report objects and their
// describes, pages of report objects and of lists, and which interfaces
// it holds credentials for (extract.Source, which *extract.Client
// implements).
type Source = extract.Source

var _ Source = (*extract.Client)(nil)

// StreamConfig says how one object is read and written.
type StreamConfig struct {
	// Mode is replace (default: the table is the latest snapshot), append or
	// merge (upsert on PrimaryKey).
	Mode load.WriteMode
	// PrimaryKey names the fields that identify a row; required by merge.
	PrimaryKey []string
	// Cursor makes the stream incremental: a field (date or number) whose
	// value grows whenever a row changes. Each run reads rows with
	// Cursor >= saved watermark - Lookback.
	Cursor   string
	Lookback time.Duration
	// Contract decides what a changed describe does (default evolve).
	Contract schemas.Contract
	// Filters are sent with every read of the stream.
	Filters []extract.Filter
}

// Config says what to sync and where.
type Config struct {
	// Out is the output folder: lake/, warehouse.duckdb and .sepipe/.
	Out string
	// Only limits the run to these streams: report object ids and
	// collection names (see Collections) alike. Empty means every stream
	// the source can read: every report object, and every collection whose
	// interface the source holds the credential for (Source.CanRead; the
	// webhook collections need the developer API token).
	Only []string
	// Selection, when set, is the run's streams as Select resolved them
	// (a command that checked its configuration's include, exclude and
	// streams against the same list): Only is then not read, and the
	// report objects are not listed again.
	Selection *Selection
	// Continuation says what the run reads on a snapshot day on which a
	// quota deferred streams: by default only those unfinished among its
	// streams (Only, or every stream), or all of them when none is.
	Continuation Continuation
	// Streams configures streams by id; a stream without an entry is a
	// replace stream under the evolve contract.
	Streams map[string]StreamConfig
	// FullRefresh names streams to reset: their state is dropped and their
	// tables rebuilt from a full read. Other streams are untouched.
	FullRefresh []string
	// ObjectConcurrency is how many objects are read at once (default 2).
	// Pages of each object are fetched by the client's own workers, all
	// under the client's one request budget.
	ObjectConcurrency int
	// Logger receives progress and warnings (default: discard).
	Logger *slog.Logger
	// Now gives the run's clock (default time.Now); the snapshot date is
	// Now's UTC date.
	Now func() time.Time
	// Allocator for record batches (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// LockWait is how long the run waits for another sepipe process (a
	// `sepipe listen` loading or publishing a batch of events) to release
	// the output folder's working database before it fails with
	// load.ErrWarehouseLocked (default 2 min; negative: no wait). Readers
	// of the published warehouse never make it wait.
	LockWait time.Duration
	// DuckDBMemory caps DuckDB's memory while the run loads the warehouse
	// (default "64MB"; DuckDB spills beyond it), so a load's memory does not
	// grow with the size of an object, and sets DuckDB's threads: one for
	// each 32 MiB of it, at most one a processor (load.WithThreads; "1GB"
	// gives up to 29). The run raises it for what DuckDB cannot spill:
	// huge values (pinnedFor, load.WithPinnedBytes) and what a merge's
	// deletes pin until the publish; and, when they need more, for the
	// count of new rows and a merge's key check and join (load.loadRoom).
	DuckDBMemory string
	// MaxValueBytes is the longest value (its JSON text) a stream stores
	// in its table (default DefaultMaxValueBytes). A longer one is null in
	// the row, recorded in _sepipe_rejects, and kept whole in a file of
	// the stream's lake partition (raw_value_file): a value of hundreds of
	// megabytes would otherwise take several times its size in memory at
	// every stage, and DuckDB holds every such value of a batch at once.
	MaxValueBytes int
	// CountNewRows makes the run count, per stream, the rows whose content
	// the table did not hold before (ObjectResult.NewRows); it costs a scan
	// of each table during the load.
	CountNewRows bool
	// Progress, if set, is told as objects start, pages land and objects
	// finish. Its methods are called from several goroutines at once.
	Progress Progress
	// Iceberg, when set, is an Iceberg lake (catalog and warehouse) each
	// run also commits its streams to, exactly once across the warehouse
	// and the catalog (lake.go, docs/scale-out.md). The output folder's
	// own lake is written as always.
	Iceberg *lakehouse.Config
}

// Progress receives a run's progress, for progress bars and logs. Calls
// come from worker goroutines, concurrently; they must not block.
type Progress interface {
	// ObjectStarted is called once per object before its first page.
	ObjectStarted(object string)
	// PageDone is called after each page is written: rows in the page, and
	// the object's page total as the service reported it (-1 if unknown).
	PageDone(object string, page, rows, totalPages int)
	// ObjectDone is called once per object, with its result (Err set on
	// failure), before the run commits.
	ObjectDone(r ObjectResult)
}

type noProgress struct{}

func (noProgress) ObjectStarted(string)           {}
func (noProgress) PageDone(string, int, int, int) {}
func (noProgress) ObjectDone(ObjectResult)        {}

func (c *Config) setDefaults() {
	if c.ObjectConcurrency <= 0 {
		c.ObjectConcurrency = 2
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Progress == nil {
		c.Progress = noProgress{}
	}
	if c.LockWait == 0 {
		c.LockWait = 2 * time.Minute
	}
	if c.DuckDBMemory == "" {
		c.DuckDBMemory = "64MB"
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
}

// selection is the run's streams: Config.Selection, or Select of Only,
// FullRefresh and Streams.
func (c *Config) selection(ctx context.Context, src Source) (*Selection, error) {
	if c.Selection != nil {
		return c.Selection, nil
	}
	return Select(ctx, src, Ask{Objects: c.Only, FullRefresh: c.FullRefresh, Streams: c.Streams})
}

// DefaultMaxValueBytes is Config.MaxValueBytes by default: 16 MiB, far
// above any field a report or an item carries, and a bound on what one
// value costs a run.
const DefaultMaxValueBytes = 16 << 20

// ObjectResult is what a run did for one object.
type ObjectResult struct {
	Object       string // the stream's name: its table and lake folder
	ServiceID    string // the service's id of the stream (often the same)
	Mode         load.WriteMode
	Rows         int64 // rows loaded
	RejectedRows int64 // rows left out: not objects, or without a merge key's value
	// NulledValues counts values stored as null in a kept row because they
	// did not fit their column's type (each is in _sepipe_rejects).
	NulledValues int64
	// FutureCursors counts rows of an incremental stream whose date cursor
	// is later than the run's start plus load.FutureCursorSlack: a bad
	// value, which does not move the watermark (a warning).
	FutureCursors int64
	Pages         int
	Requests      int
	Retries       int
	Duration      time.Duration
	SchemaVersion string
	NewRows       int64        // rows whose content the table did not hold; -1 when not counted
	Diff          schemas.Diff // describe changes since the last run (empty on the first)
	Since         string       // incremental: the cursor value read from, "" for a full read
	UnknownFields []string     // keys the service sent that describe did not list
	// RepairedValues counts text values stored with U+FFFD in place of
	// bytes that were not valid UTF-8.
	RepairedValues int64
	// LongValues counts values longer than Config.MaxValueBytes: null in
	// the table, kept whole in the lake partition's raw-values folder.
	LongValues int64
	Files      []string // published Parquet files
	// Status is StatusOK when the stream committed, else StatusFailed,
	// StatusSkipped or StatusDeferred, with Err saying why.
	Status string
	Err    error // nil when the object committed
	// LakeErr, for a stream that committed, says why its Iceberg commit
	// did not follow (nil when it did, or without an Iceberg lake):
	// pending for the next run, or, wrapping lakehouse.ErrDataFileLost,
	// not possible until a full refresh rebuilds the table.
	LakeErr error
}

// Result is a run's outcome.
type Result struct {
	RunID        string
	SnapshotDate string
	Started      time.Time
	Finished     time.Time
	Objects      []ObjectResult // sorted by object id
	Warehouse    string
	Lake         string
}

// NewRunID returns a sortable, unique run id: UTC time plus random bits.
func NewRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

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

// Sync runs one sync of the report objects from src into cfg.Out. A run
// that committed but could not publish the warehouse or commit to the
// Iceberg lake returns its Result with the error.
func Sync(ctx context.Context, src Source, cfg Config) (*Result, error) {
	cfg.setDefaults()
	log := cfg.Logger
	lake := load.Lake{Root: cfg.Out}
	if err := lake.CheckWritable(); err != nil {
		return nil, err
	}
	unlock, err := lockOut(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer unlock()

	started := cfg.Now()
	res := &Result{
		RunID:        NewRunID(started),
		SnapshotDate: started.UTC().Format("2006-01-02"),
		Started:      started,
		Warehouse:    lake.WarehousePath(),
		Lake:         lake.LakeDir(),
	}
	log = log.With("run", res.RunID)

	sel, err := cfg.selection(ctx, src)
	if err != nil {
		return nil, err
	}
	ids, reportObjects, reportingDenied := sel.Streams(), sel.Asked, sel.ReportingDenied
	lh, err := openLake(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if lh != nil {
		defer lh.Close()
	}
	pr, err := recoverAndRead(ctx, lake, lh, append(slices.Clone(ids), reportObjects...), cfg.Streams, cfg.FullRefresh, res.SnapshotDate, cfg.LockWait, log)
	if err != nil {
		return nil, err
	}
	var outs []outcome // streams that will not commit
	if reportingDenied != nil {
		var names []string
		for _, id := range reportObjects {
			names = append(names, pr.name(id))
		}
		if len(names) == 0 {
			for _, k := range pr.known {
				if !isCollection(k) {
					names = append(names, k)
				}
			}
		}
		if len(names) == 0 {
			names = []string{"(" + extract.IfaceReporting + ")"}
		}
		for _, n := range names {
			outs = append(outs, outcome{object: n, status: StatusSkipped, err: &ObjectError{Object: n, Step: "list", Err: reportingDenied}})
		}
	}
	streams, cont := cfg.Continuation.streams(ids, cfg.FullRefresh, func(id string) bool { return slices.Contains(pr.unfinished, pr.name(id)) })
	if cont && len(streams) > 0 {
		log.Info("continuing the streams a quota deferred, or that failed, earlier today", "streams", streams)
	}
	if cont && len(streams) == 0 { // ContinueOnly, and nothing is left
		log.Info("nothing left to continue today", "snapshot_date", res.SnapshotDate)
		res.Finished = cfg.Now()
		return res, nil
	}
	streams, held := holdBlocked(streams, pr, cfg)
	outs = append(outs, held...)
	log.Info("run started", "out", cfg.Out, "snapshot_date", res.SnapshotDate, "streams", len(streams))
	defer lake.Discard(res.RunID) //nolint:errcheck // best effort; the next run cleans too

	run := load.Run{ID: res.RunID, Started: started, SnapshotDate: res.SnapshotDate, Status: "succeeded"}
	staged := make([]*stagedObject, len(streams))
	g, gctx := errgroup.WithContext(ctx)
	// The early load puts the streams' part files into their histories,
	// in the run's transaction, while the run fetches. It lives in the
	// run's context, not the group's: that ends when the group does, and
	// with it the transaction.
	early := newEarlyLoader(ctx, run, cfg.CountNewRows, func(ctx context.Context) (*load.Warehouse, error) {
		return load.OpenState(ctx, lake, load.WithLockWait(0), load.WithMemoryLimit(earlyMemory(cfg.DuckDBMemory)), load.WithThreads(1), load.WithRowsInAnyOrder())
	}, log)
	defer early.abort()
	g.SetLimit(cfg.ObjectConcurrency)
	for i, id := range streams {
		g.Go(func() error {
			staged[i] = stageStream(gctx, src, lake, lh, early, res, id, cfg, pr, log)
			// A stream's failure is recorded, not returned: the others go
			// on. Only cancellation stops the group.
			return context.Cause(gctx)
		})
	}
	if err := g.Wait(); err != nil {
		discardLake(ctx, lh, staged, log)
		return nil, fmt.Errorf("run %s cancelled: %w", res.RunID, err)
	}
	if err := context.Cause(ctx); err != nil {
		discardLake(ctx, lh, staged, log)
		return nil, fmt.Errorf("run %s cancelled: %w", res.RunID, err)
	}
	faults.At(faults.Staged, "")

	var tables []load.Table
	runErr := &RunError{RunID: res.RunID}
	for _, s := range staged {
		if s.err != nil {
			outs = append(outs, outcome{object: s.object, status: classify(s.object, s.err), err: s.err})
			continue
		}
		s.result.NewRows = -1
		if cfg.CountNewRows {
			s.table.NewRows = &s.result.NewRows
		}
		s.table.FutureCursors = &s.result.FutureCursors
		tables = append(tables, s.table)
	}

	// Commit what succeeded, with state and the run record, in one
	// transaction: the one the early load began, when it did.
	settings := []load.OpenOption{load.WithMemoryLimit(cfg.DuckDBMemory), load.WithPinnedBytes(pinnedFor(staged)),
		load.WithThreads(threadsFor(staged)), load.WithRowsInAnyOrder()}
	wh, rl := early.finish()
	if rl != nil {
		for _, s := range staged {
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
		if wh, err = load.OpenState(ctx, lake, append(settings, load.WithLockWait(cfg.LockWait))...); err != nil {
			discardLake(ctx, lh, staged, log)
			return nil, err
		}
	}
	defer wh.Close()
	for _, o := range outs {
		oe, ok := o.err.(*ObjectError)
		if !ok {
			oe = &ObjectError{Object: o.object, Step: "read", Err: o.err}
		}
		switch o.status {
		case StatusSkipped:
			runErr.Skipped = append(runErr.Skipped, oe)
		case StatusDeferred:
			runErr.Deferred = append(runErr.Deferred, oe)
		default:
			runErr.Failed = append(runErr.Failed, oe)
		}
		run.Others = append(run.Others, o.record())
	}
	warnUnread(log, outs)
	incomplete := len(outs) > 0
	if incomplete {
		// Partial when other streams committed; a run that committed
		// nothing and failed nothing (a quota deferred its streams) is
		// recorded partial too, as its exit code says (RunError.Status).
		runErr.Partial = len(tables) > 0
		run.Status, run.Error = runErr.Status(), runErr.Error()
	}
	run.Finished = cfg.Now()
	// A failed run is recorded and published too: _sepipe_runs is what a
	// dashboard of the pipeline's health reads.
	recordFailure := func() {
		if err := wh.RecordFailure(ctx, run); err != nil {
			log.Error("could not record the failed run", "err", err)
		} else if err := wh.Publish(ctx); err != nil {
			log.Warn("could not publish the failed run's record", "err", err)
		}
	}
	if len(tables) == 0 {
		if rl != nil {
			_ = rl.Rollback()
		}
		recordFailure()
		return nil, runErr
	}
	commit := func() error {
		if rl != nil {
			err := rl.Commit(ctx, run, tables)
			if err == nil {
				return nil
			}
			// Stale, or an error the early rows may have caused (DuckDB's
			// memory holding them): nothing of the transaction stays, so
			// the run loads once more from the staged files.
			log.Debug("the rows loaded while the run fetched are loaded again from the staged files", "err", err)
		}
		return wh.Commit(ctx, run, tables)
	}
	if err := commit(); err != nil {
		// Nothing recorded the intents: no later run commits them.
		discardLake(ctx, lh, staged, log)
		run.Status, run.Error = "failed", err.Error()
		recordFailure()
		return nil, fmt.Errorf("run %s: load warehouse: %w", res.RunID, err)
	}
	faults.At(faults.Committed, "")
	// Committed: publishing it finishes even when ctx ends now (a SIGTERM
	// here exited 1, "committed nothing", and left the warehouse behind
	// the run until the next night; found by review).
	ctx = context.WithoutCancel(ctx)

	// Publish the lake partitions of the committed objects. A death from
	// here on is finished by the next run (recoverAndRead). An error from
	// here on keeps the run's own (streams failed or deferred beside the
	// committed ones: withRunErr), for the exit code and for what a
	// schedule retries or continues.
	withRunErr := func(err error) error {
		if incomplete {
			return fmt.Errorf("%w; %w", err, runErr)
		}
		return err
	}
	var published []string
	for _, o := range outs {
		res.Objects = append(res.Objects, ObjectResult{Object: o.object, Status: o.status, Err: o.err})
	}
	for _, s := range staged {
		if s.err != nil {
			continue
		}
		if err := lake.Publish(res.RunID, s.object, res.SnapshotDate); err != nil {
			return nil, withRunErr(fmt.Errorf("run %s %w: publishing the lake failed (the next run finishes it): %w", res.RunID, ErrNotPublished, err))
		}
		faults.At(faults.Published, s.object)
		published = append(published, s.object)
		s.result.Files = publishedFiles(lake, s, res.SnapshotDate)
		res.Objects = append(res.Objects, s.result)
		if n := s.result.FutureCursors; n > 0 {
			log.Warn("rows whose cursor is later than the run could be (a day of clock skew allowed) did not move the watermark; they are read again each run until the day comes: check the service's values",
				"stream", s.object, "rows", n, "cursor", s.table.Cursor)
		}
	}
	if err := wh.MarkPublished(ctx, res.RunID); err != nil {
		return nil, withRunErr(fmt.Errorf("run %s %w: its lake partitions are published, recording it failed (the next run finishes it): %w", res.RunID, ErrNotPublished, err))
	}
	// Commit the recorded intents to the Iceberg lake. One that fails
	// stays recorded; the next run settles it (or, when a data file of the
	// table is gone, holds the stream until a full refresh rebuilds it).
	var lakeErr error
	if lh != nil {
		failed := commitLake(ctx, wh, lh, staged, res.RunID, log)
		var errs []error
		for i := range res.Objects {
			if e := failed[res.Objects[i].Object]; e != nil {
				res.Objects[i].LakeErr = e
				errs = append(errs, e)
			}
		}
		if lakeErr = errors.Join(errs...); errors.Is(lakeErr, lakehouse.ErrDataFileLost) {
			log.Error("the run committed, but an Iceberg table lost a data file and cannot take its commit", "err", lakeErr)
		} else if lakeErr != nil {
			log.Error("the run committed, but committing it to the Iceberg lake failed; the next run finishes it", "err", lakeErr)
		}
	}
	// From here the run is committed and its lake published: what is left
	// to finish it does not take its result away (the summary of a run
	// whose publish a writer blocked was not printed).
	sort.Slice(res.Objects, func(i, j int) bool { return res.Objects[i].Object < res.Objects[j].Object })
	// Publish the warehouse: readers' new connections see the run.
	if err := wh.Publish(ctx); err != nil {
		res.Finished = cfg.Now()
		if errors.Is(err, load.ErrPublishBlocked) {
			return res, withRunErr(fmt.Errorf("run %s committed, but publishing %s failed (the next run or `sepipe publish` finishes it): %w", res.RunID, lake.WarehousePath(), err))
		}
		return res, withRunErr(fmt.Errorf("run %s %w: publishing %s failed (the next run or `sepipe publish` finishes it): %w", res.RunID, ErrNotPublished, lake.WarehousePath(), err))
	}
	res.Finished = cfg.Now()
	if errors.Is(lakeErr, lakehouse.ErrDataFileLost) {
		return res, withRunErr(fmt.Errorf("run %s committed, but %w: %w", res.RunID, ErrLakePending, lakeErr))
	}
	if lakeErr != nil {
		return res, withRunErr(fmt.Errorf("run %s committed, but %w (the next run finishes it): %w", res.RunID, ErrLakePending, lakeErr))
	}
	log.Info("run finished", "status", run.Status, "objects", len(tables), "duration", res.Finished.Sub(started).Round(time.Millisecond))
	if incomplete {
		return res, runErr
	}
	return res, nil
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

// hugePage: a run with a page body this large loads on one DuckDB thread,
// so that one huge value is held at a time.
const hugePage = 16 << 20

func largestPage(staged []*stagedObject) int {
	largest := 0
	for _, s := range staged {
		if s != nil {
			largest = max(largest, s.largestPage)
		}
	}
	return largest
}

// threadsFor is the DuckDB threads of a run's load: one when a page was
// huge (a thread holds one huge value at a time), else 0, as many as the
// memory limit has room for (load.WithThreads).
func threadsFor(staged []*stagedObject) int {
	if largestPage(staged) >= hugePage {
		return 1
	}
	return 0
}

// pinnedFor is what DuckDB keeps pinned of a run's huge pages until the
// commit (load.WithPinnedBytes): the bytes of every huge page plus twice
// the largest.
func pinnedFor(staged []*stagedObject) int64 {
	var need int64
	for _, s := range staged {
		if s != nil {
			need += s.hugeBytes
		}
	}
	return need + 2*int64(largestPage(staged))
}

// earlyMemoryLimit is DuckDB's memory limit while a run loads during its
// fetch (at most the configured one): the fetch's own buffers are live
// then, and what DuckDB's pool holds adds to the run's peak. Measured at
// 1 M rows and 50 requests a second, part files of one row group: 16 MB
// 239-250 MB peak RSS, 24 MB 258-265 MB, the same load time; 64 MB (part
// files of two row groups) 299 MB.
const earlyMemoryLimit = 16 << 20

func earlyMemory(configured string) string {
	if n := load.SizeBytes(configured); n > 0 && n <= earlyMemoryLimit {
		return configured
	}
	return fmt.Sprintf("%dMiB", earlyMemoryLimit>>20)
}

func publishedFiles(lake load.Lake, s *stagedObject, date string) []string {
	out := make([]string, len(s.table.Files))
	dir := lake.PartitionDir(s.object, date)
	for i, f := range s.table.Files {
		out[i] = filepath.Join(dir, filepath.Base(f))
	}
	return out
}

type stagedObject struct {
	largestPage int   // bytes of the object's largest page
	hugeBytes   int64 // bytes of its pages of hugePage or more
	object      string
	table       load.Table
	intent      *lakehouse.Intent  // staged in the Iceberg lake; nil without one
	superseded  []lakehouse.Intent // recorded intents the intent's rebuild supersedes (holdBlocked)
	result      ObjectResult
	err         *ObjectError
}

// stageStream reads one stream, a report object or a collection, and
// writes it into staging. Both kinds take the one path: an Arrow schema
// (from /describe, or inferred from a collection's items), the transform
// decoder with per-value rejects, the same Parquet sink and the same
// table. It never returns an error: a failure is kept in the result.
func stageStream(ctx context.Context, src Source, lake load.Lake, lh *lakehouse.Lakehouse, el *earlyLoader, run *Result, id string, cfg Config, pr *prior, log *slog.Logger) *stagedObject {
	t0 := time.Now()
	name := pr.name(id) // the table's and the lake folder's name
	so := &stagedObject{object: name}
	cfg.Progress.ObjectStarted(name)
	fail := func(step string, err error) *stagedObject {
		so.err = &ObjectError{Object: id, Step: step, Err: err}
		status := classify(id, err)
		if status == StatusFailed {
			log.Error("stream failed", "stream", id, "step", step, "err", err)
		}
		cfg.Progress.ObjectDone(ObjectResult{Object: name, ServiceID: id, Status: status, Err: so.err})
		return so
	}
	if err := load.CheckName(name); err != nil {
		return fail("name", err)
	}
	sc := cfg.Streams[id]
	mode, _ := load.ParseWriteMode(string(sc.Mode))
	contract, _ := schemas.ParseContract(string(sc.Contract))
	fullRefresh := slices.Contains(cfg.FullRefresh, id)
	dir := lake.StagingDir(run.RunID, name, run.SnapshotDate)
	var pk = sc.PrimaryKey // the key rows are checked (and merged) on
	raw := &rawValues{lake: lake, run: run.RunID, object: name, date: run.SnapshotDate}
	early := el.stream(name)
	writers := func(schema *arrow.Schema) writerSet {
		ws := writerSet{parquet: func(first, step int) (load.Writer, error) {
			opts := []load.ParquetOption{load.InsideFolder(lake.Root), load.WithParquetAllocator(cfg.Allocator),
				load.WithFileNumbers(first, step), load.WithFileDone(func(path string) { early.file(schema, path) })}
			if partFileRows > 0 {
				opts = append(opts, load.WithRowsPerFile(partFileRows))
			}
			return load.NewParquetWriter(dir, name, schema, opts...)
		}, raw: raw, early: early}
		if lh != nil {
			ws.lake = func() (*lakehouse.StageWriter, error) {
				spec := lakehouse.TableSpec{Stream: name, Schema: schema, Mode: mode}
				for _, c := range columnsOf(schema, tableKey(sc, mode, pk)) {
					if c != "" {
						spec.PrimaryKey = append(spec.PrimaryKey, c)
					}
				}
				w, err := lh.NewStageWriter(ctx, spec, lakehouse.Run{ID: run.RunID, Day: run.SnapshotDate})
				if err != nil {
					return nil, fmt.Errorf("iceberg lake: %w", err)
				}
				return w, nil
			}
		}
		return ws
	}
	var (
		schema   *arrow.Schema
		sink     *objectSink
		describe []service.Field
		diff     schemas.Diff
		since    string
		stats    extract.ReadStats
	)
	if isCollection(id) {
		if len(pk) == 0 {
			pk = []string{"id"} // items carry an id (docs/service-interface.md)
		}
		cr := &collectionRead{name: id, contract: contract, stored: pr.fields[id], keys: pk, required: mode == load.Merge,
			spool: lake.SpoolPath(run.RunID, name), create: func() (*os.File, error) { return lake.CreateSpool(run.RunID, name) }, writers: writers, opts: []transform.Option{transform.WithAllocator(cfg.Allocator), transform.WithMaxValueBytes(cfg.MaxValueBytes)}, log: log}
		defer cr.close()
		var err error
		stats, err = cr.read(ctx, src, cfg.Progress)
		if err == nil {
			err = cr.finish(cfg.Progress)
		}
		if err != nil {
			if cr.sink != nil {
				cr.sink.abort()
			}
			return fail("read", err)
		}
		schema, sink, describe = cr.schema, cr.sink, cr.live
		_, diff = schemas.ResolveInferred(contract, id, pr.fields[id], cr.fields)
		if !diff.Empty() && pr.fields[id] != nil {
			log.Info("the collection's items call for new or wider columns", "stream", id, "contract", contract, "diff", diff.String())
		}
	} else {
		live, err := src.Describe(ctx, id)
		if err != nil {
			return fail("describe", err)
		}
		describe = live
		fields, d, err := schemas.Resolve(contract, id, pr.fields[id], live)
		diff = d
		if err != nil {
			return fail("schema", err)
		}
		diff = pr.describeChanges(id, live, d)
		if !diff.Empty() {
			log.Warn("the object's describe changed", "object", id, "contract", contract, "diff", diff.String())
			added := slices.ContainsFunc(diff.Changes, func(c schemas.Change) bool { return c.Kind == schemas.FieldAdded })
			if added && sc.Cursor != "" && !fullRefresh && contract == schemas.Evolve {
				log.Warn("new columns of an incremental stream stay null for rows it does not reread; run with --full-refresh to backfill them", "object", id)
			}
		}
		if schema, err = schemas.FromDescribe(id, fields); err != nil {
			return fail("schema", err)
		}
		var query extract.Query
		var aside string
		if query, since, aside, err = streamQuery(id, sc, fields, pr.state[id], fullRefresh, run.SnapshotDate); err != nil {
			return fail("config", err)
		}
		if aside != "" {
			log.Warn("the saved watermark does not hold for this read: reading whole",
				"stream", id, "watermark", pr.state[id].Watermark, "cursor", sc.Cursor, "because", aside)
		}
		opts := []transform.Option{transform.WithAllocator(cfg.Allocator), transform.WithMaxValueBytes(cfg.MaxValueBytes)}
		if len(pk) > 0 {
			// A key read twice in one read is drift, not data; the decoder
			// yields the keys in the pass that decodes the page.
			opts = append(opts, transform.WithKeyFields(mode == load.Merge, pk...))
		}
		dec, err := transform.NewDecoder(schema, opts...)
		if err != nil {
			return fail("schema", err)
		}
		defer dec.Release()
		if sink, err = newObjectSink(writers(schema)); err != nil {
			return fail("write", err)
		}
		stats, err = src.ReadObject(ctx, id, query, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
			if p.Restart {
				// The pages did not add up and the client reads the object
				// again from page 1: drop everything written so far.
				return service.PageInfo{}, sink.restart()
			}
			r, err := dec.DecodePage(p.Number, p.Body)
			if err != nil {
				return service.PageInfo{}, err
			}
			sink.notePage(len(p.Body))
			defer r.Record.Release()
			if err := sink.add(r, p.Body); err != nil {
				return service.PageInfo{}, err
			}
			cfg.Progress.PageDone(name, p.Number, r.Info.Rows, r.Info.TotalPages)
			return r.Info, nil
		})
		if err != nil {
			sink.abort()
			return fail("read", err)
		}
	}
	so.largestPage, so.hugeBytes = sink.largestPage, sink.hugeBytes
	files, rows, err := sink.close()
	if err != nil {
		sink.abort()
		return fail("write", err)
	}
	if len(sink.unknown) > 0 {
		what := "the service sent fields that describe does not list; they were not stored"
		if isCollection(id) {
			what = "the items hold fields the contract keeps out of the table (under freeze their values are in _sepipe_rejects)"
		}
		log.Warn(what, "stream", id, "contract", contract, "fields", sink.unknown)
	}
	dur := time.Since(t0)
	so.table = load.Table{
		Object:      name,
		ServiceID:   id,
		Schema:      schema,
		Files:       files,
		Rows:        rows,
		Rejects:     sink.rejects,
		Mode:        mode,
		PrimaryKey:  columnsOf(schema, tableKey(sc, mode, pk)),
		Cursor:      columnsOf(schema, []string{sc.Cursor})[0],
		ReadFilters: readFilters(sc),
		FullRefresh: fullRefresh,
		Describe:    describe,
		Stats: load.ObjectStats{
			Rows: rows, RejectedRows: sink.rejectedRows, NulledValues: sink.nulled,
			Pages: stats.Pages, Requests: stats.Requests, Retries: stats.Retries, Duration: dur,
		},
	}
	if sink.intent != nil && (rebuildsLake(mode, fullRefresh) || (pr.afresh[name] && mode == load.Merge)) {
		// The warehouse's table is rebuilt from this run's rows (a full
		// refresh of an append or merge stream, or a stream become a merge
		// stream whose table starts afresh: load.Warehouse.StartsAfresh);
		// so is the Iceberg table, which for a merge stream is that table.
		// A replace or append stream's Iceberg table is its history, every
		// day: its full refresh, or a mode change, replaces only its day.
		sink.intent.Rebuild = true
	}
	if b := pr.supersede[name]; b != nil && sink.intent != nil && sink.intent.Rebuild {
		// Earlier commits that could not be made (a data file of the
		// table gone) give way to the rebuild, in the run's transaction.
		so.table.LakeSupersedes, so.superseded = b.runs, b.intents
	}
	if sink.intent != nil {
		js, err := json.Marshal(sink.intent)
		if err != nil {
			sink.abort()
			return fail("write", err)
		}
		so.intent, so.table.LakeIntent = sink.intent, js
		faults.At(faults.LakeStaged, name)
	}
	so.result = ObjectResult{
		Object: name, ServiceID: id, Mode: mode, Status: StatusOK, Diff: diff, Since: since, Rows: rows, RejectedRows: sink.rejectedRows,
		Pages: stats.Pages, Requests: stats.Requests, Retries: stats.Retries,
		Duration: dur, SchemaVersion: schemas.SchemaVersion(schema), UnknownFields: sink.unknown,
		RepairedValues: sink.repaired, LongValues: sink.long, NulledValues: sink.nulled,
	}
	if sink.repaired > 0 {
		log.Warn("text values that were not valid UTF-8 were stored with U+FFFD in place of the invalid bytes",
			"stream", id, "values", sink.repaired)
	}
	if sink.long > 0 {
		log.Warn("values longer than max_value_bytes are null in the table; each is kept whole in a file of the lake partition (_sepipe_rejects.raw_value_file)",
			"stream", id, "values", sink.long, "max_value_bytes", cfg.MaxValueBytes)
	}
	if sink.nulled > 0 || sink.rejectedRows > 0 {
		log.Warn("values that do not fit their column's type are null in their rows, and rows that cannot be placed are left out; each is in _sepipe_rejects",
			"stream", id, "values", sink.nulled, "rows_left_out", sink.rejectedRows)
	}
	log.Info("stream staged", "stream", id, "rows", rows, "pages", stats.Pages,
		"requests", stats.Requests, "retries", stats.Retries, "duration", dur.Round(time.Millisecond))
	cfg.Progress.ObjectDone(so.result)
	return so
}

// tableKey is the key a stream's table has: the configured one, and for
// a merge stream the key it merges on (a collection merges on id unless
// told otherwise).
func tableKey(sc StreamConfig, mode load.WriteMode, pk []string) []string {
	if mode == load.Merge {
		return pk
	}
	return sc.PrimaryKey
}

// columnsOf maps field ids (as the config names them) to their columns.
func columnsOf(s *arrow.Schema, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if id != "" {
			out[i] = schemas.ColumnName(s, id)
		}
	}
	return out
}

// objectSink takes the decoded pages of one object's concurrent page
// workers. It has one Parquet writer per core (writer k of n numbers its
// part files k, k+n, k+2n, ...): a worker encodes its page with whichever
// writer is free, so pages are encoded in parallel, not one at a time
// behind a lock. Each writer buffers at most one row group.
type objectSink struct {
	newWriter writerSet
	writers   []load.Writer
	free      chan load.Writer // the writers not in use
	// lake is the stream's Iceberg stage writer (nil without an Iceberg
	// lake): it gets every batch the Parquet writers get, one at a time.
	lake   *lakehouse.StageWriter
	lakeMu sync.Mutex
	intent *lakehouse.Intent // set by close when there is a lake

	mu           sync.Mutex // guards what follows
	rejects      []transform.Reject
	rejectedRows int64
	nulled       int64
	repaired     int64
	long         int64 // values over the limit, kept in files
	largestPage  int   // bytes of the largest page body
	hugeBytes    int64 // bytes of the page bodies of hugePage or more
	unknown      []string
}

// partFileRows, when set, is the rows of a part file (tests: many files
// from a small tenant, so that the early load has files to load).
var partFileRows int64

// sinkWriters is how many Parquet writers an object has: one per core, at
// most 4 (past that, the service is the limit, and memory grows with each).
func sinkWriters() int { return min(max(runtime.GOMAXPROCS(0), 1), 4) }

// writerSet makes an object sink's writers for one schema: Parquet writer
// k of n, and the Iceberg stage writer when the run has an Iceberg lake.
type writerSet struct {
	parquet func(first, step int) (load.Writer, error)
	lake    func() (*lakehouse.StageWriter, error) // nil: no Iceberg lake
	raw     *rawValues                             // where values too long for the warehouse go
	early   *earlyStream                           // told of finished files; nil: the stream loads at the commit
}

// rawValues keeps the values of one stream that were longer than
// Config.MaxValueBytes, each in a file of its own in the stream's staged
// partition (load.Lake.WriteRawValue): stored whole, but never copied
// through the decoder, the Parquet writers and DuckDB.
type rawValues struct {
	lake              load.Lake
	run, object, date string

	mu   sync.Mutex
	next int
}

// keep saves the value of each oversize reject of r from body, the page r
// was decoded from, and records the file in the reject.
func (k *rawValues) keep(r *transform.Result, body []byte) error {
	if k == nil {
		return nil
	}
	for i := range r.Rejects {
		rj := &r.Rejects[i]
		if !rj.Oversize {
			continue
		}
		k.mu.Lock()
		k.next++
		name := fmt.Sprintf("value-%06d.json", k.next)
		k.mu.Unlock()
		path, err := k.lake.WriteRawValue(k.run, k.object, k.date, name, body[rj.Start:rj.End])
		if err != nil {
			return err
		}
		rj.RawFile = path
		rj.Reason += "; kept whole in " + path
	}
	return nil
}

// drop removes what was kept (the stream is read again).
func (k *rawValues) drop() error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	k.next = 0
	k.mu.Unlock()
	return k.lake.DropRawValues(k.run, k.object, k.date)
}

func newObjectSink(newWriter writerSet) (*objectSink, error) {
	s := &objectSink{newWriter: newWriter}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *objectSink) open() error {
	n := sinkWriters()
	s.writers = make([]load.Writer, 0, n)
	s.free = make(chan load.Writer, n)
	for k := range n {
		w, err := s.newWriter.parquet(k, n)
		if err != nil {
			s.abort()
			return err
		}
		s.writers = append(s.writers, w)
		s.free <- w
	}
	if s.newWriter.lake != nil {
		lw, err := s.newWriter.lake()
		if err != nil {
			s.abort()
			return err
		}
		s.lake = lw
	}
	return nil
}

// restart drops what was written (the client is reading the object again)
// and starts new writers. ReadObject calls it with no page in flight.
func (s *objectSink) restart() error { return s.restartWith(s.newWriter) }

// restartWith drops what was written and starts writers made by
// newWriter (a collection whose schema widened writes with the new one).
func (s *objectSink) restartWith(newWriter writerSet) error {
	s.abort()
	if err := s.newWriter.raw.drop(); err != nil {
		return err
	}
	s.mu.Lock()
	s.rejects, s.rejectedRows, s.nulled, s.repaired, s.long, s.unknown = nil, 0, 0, 0, 0, nil
	s.newWriter = newWriter
	s.mu.Unlock()
	return s.open()
}

// notePage records a page body's size (DuckDB's memory limit must hold the
// largest value the load reads).
func (s *objectSink) notePage(n int) {
	s.mu.Lock()
	s.largestPage = max(s.largestPage, n)
	if n >= hugePage {
		s.hugeBytes += int64(n)
		s.newWriter.early.huge()
	}
	s.mu.Unlock()
}

// add writes a decoded page; body is the page r was decoded from (its
// values too long for the warehouse are kept from it).
func (s *objectSink) add(r transform.Result, body []byte) error {
	if err := s.newWriter.raw.keep(&r, body); err != nil {
		return err
	}
	w := <-s.free
	err := w.Write(r.Record)
	s.free <- w
	if err != nil {
		return err
	}
	if s.lake != nil {
		s.lakeMu.Lock()
		err := s.lake.Write(r.Record)
		s.lakeMu.Unlock()
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejects = append(s.rejects, r.Rejects...)
	s.rejectedRows += int64(r.RejectedRows)
	s.nulled += int64(r.NulledValues)
	s.repaired += int64(r.RepairedValues)
	for _, rj := range r.Rejects {
		if rj.Oversize {
			s.long++
		}
	}
	for _, u := range r.UnknownFields {
		if !slices.Contains(s.unknown, u) {
			s.unknown = append(s.unknown, u)
		}
	}
	return nil
}

// close finishes every writer and returns the part files, in name order,
// and the rows they hold. A writer that got no rows leaves no file, except
// that an object with no rows gets one empty file.
func (s *objectSink) close() (files []string, rows int64, err error) {
	for _, w := range s.writers {
		rows += w.Rows()
	}
	for i, w := range s.writers {
		if w.Rows() == 0 && (rows > 0 || i > 0) {
			w.Abort()
			continue
		}
		if err := w.Close(); err != nil {
			return nil, 0, err
		}
		files = append(files, w.Files()...)
	}
	sort.Strings(files)
	if s.lake != nil {
		if err := s.lake.Close(); err != nil {
			return nil, 0, err
		}
		in := s.lake.Intent()
		s.intent = &in
	}
	return files, rows, nil
}

// abort closes and removes whatever the writers wrote, after taking out
// of the run's transaction what the early load put in.
func (s *objectSink) abort() {
	s.newWriter.early.forget()
	for _, w := range s.writers {
		w.Abort()
	}
	s.writers = nil
	if s.lake != nil {
		_ = s.lake.Abort()
		s.lake, s.intent = nil, nil
	}
}
