package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
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
	// huge values (load.RunSettings, load.WithPinnedBytes) and what a merge's
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
	// Steps is how long each step of the run took, by name (StepFetch,
	// StepLoad, StepPublish, StepIceberg): the steps it reached.
	Steps map[string]time.Duration
}

// The steps of a run, as Result.Steps names them.
const (
	StepFetch   = "fetch"   // read, decode and stage every stream (the early load beside)
	StepLoad    = "load"    // the working database's transaction
	StepPublish = "publish" // the lake's partitions and the warehouse
	StepIceberg = "iceberg" // the Iceberg lake's commits
)

// NewRunID returns a sortable, unique run id: UTC time plus random bits.
func NewRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
