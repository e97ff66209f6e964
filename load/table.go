package load

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// WriteMode is how a stream's rows go into its table (lakefile, the one
// owner of the modes, which the Iceberg lake shares):
//   - Replace makes the table hold exactly this run's rows (a snapshot);
//   - Append adds this run's rows; a rerun on the same snapshot day
//     replaces that day's rows instead of adding them twice;
//   - Merge upserts this run's rows on the primary key.
type WriteMode = lakefile.WriteMode

// Write modes.
const (
	Replace = lakefile.Replace
	Append  = lakefile.Append
	Merge   = lakefile.Merge
)

// ParseWriteMode reads a mode name; "" is Replace.
func ParseWriteMode(s string) (WriteMode, error) { return lakefile.ParseWriteMode(s) }

// Bookkeeping columns of append and merge tables (lakefile owns them).
const (
	ColRunID        = lakefile.ColRunID
	ColSnapshotDate = lakefile.DayColumnAlt
)

// Table is one object's data for a run: its schema, the Parquet files that
// hold its rows, and how they go into its table.
type Table struct {
	// Object is the stream's name (Names): its table, its lake folder and
	// its key in sepipe's bookkeeping. ServiceID is the id the service
	// gives it, when that differs ("" means the same).
	Object    string
	ServiceID string
	Schema    *arrow.Schema // the effective schema: the table's shape after this run
	Files     []string
	Rows      int64 // rows in Files; checked after loading
	Rejects   []transform.Reject
	Stats     ObjectStats

	Mode       WriteMode
	PrimaryKey []string // Merge only
	Cursor     string   // incremental cursor field; its max becomes the stream's watermark
	// FutureCursors, when set, receives how many of the run's rows have a
	// date cursor later than the run's start plus FutureCursorSlack: the
	// watermark does not move to them (see moveWatermark).
	FutureCursors *int64
	// ReadFilters is what the rows were read with besides the cursor (the
	// stream's configured filters, as text), saved with the watermark: a
	// watermark holds only for reads with the same filters (State).
	ReadFilters string
	FullRefresh bool // rebuild the table from this run's rows whatever the mode

	Describe []service.Field // the live describe, recorded in _sepipe_schemas

	// LakeIntent, when set, is the stream's staged change of an Iceberg
	// lake (lakehouse.Intent as JSON), recorded in _sepipe_lake_intents
	// in the run's transaction (lakeintents.go).
	LakeIntent []byte
	// LakeSupersedes names runs whose recorded intents of this stream the
	// LakeIntent replaces (a rebuild of the Iceberg table, after commits
	// that could not be made): the same transaction marks them discarded,
	// so no later run commits them after the rebuild.
	LakeSupersedes []string

	// NewRows, when set, receives how many of the run's rows were not in
	// the table before (by content: a changed row counts, an unchanged one
	// does not; for a merge stream, the keys it added and the rows it
	// changed, a key read twice counting once, except in a full refresh
	// or where its table was a view: those count as a replace stream's).
	// Counting costs a scan of the table and the files (for a merge, a
	// hash of each row on both sides of the join that finds the rows it
	// replaces).
	NewRows *int64
}

// ObjectStats is what a run did for one object.
type ObjectStats struct {
	Rows, RejectedRows       int64
	NulledValues             int64 // values null in a kept row: they did not fit their column
	Pages, Requests, Retries int
	Duration                 time.Duration
}

// Run is a run's record in _sepipe_runs.
type Run struct {
	ID           string
	Started      time.Time
	Finished     time.Time
	Status       string // "succeeded", "partial", "failed"
	SnapshotDate string // YYYY-MM-DD
	Error        string
	// Others are the streams the run did not commit, each recorded in
	// _sepipe_run_objects with its status and reason.
	Others []StreamOutcome
}

// Statuses of a stream in _sepipe_run_objects.
const (
	StreamCommitted = "committed" // its data is in the warehouse
	StreamFailed    = "failed"    // an error; its table keeps its last good data
	StreamSkipped   = "skipped"   // the tenant is not entitled to its interface (403, or 404 for the whole base)
	StreamDeferred  = "deferred"  // the service's request quota would not cover it (announced, or a 429's long Retry-After); a later run of the day continues it
)

// StreamOutcome is a stream a run did not commit: failed, skipped or
// deferred, and why.
type StreamOutcome struct {
	Object string
	Status string // StreamFailed, StreamSkipped or StreamDeferred
	Reason string
}
