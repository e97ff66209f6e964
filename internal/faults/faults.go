package faults

import "sync/atomic"

// Point is a named step of the run protocol.
type Point string

// The points, in the order a run passes them.
const (
	// EarlyLoaded: one of a stream's part files is in the run's working
	// database transaction, loaded while the run still fetches (per
	// object); nothing is committed.
	EarlyLoaded Point = "early loaded"
	// Staged: every stream is staged as Parquet; nothing is committed.
	Staged Point = "staged"
	// HistoryFolded: a stream's rows of the day are folded into its
	// versions, in the run's transaction (per object); nothing is
	// committed.
	HistoryFolded Point = "history folded"
	// Committed: the working database's transaction committed the run.
	Committed Point = "committed"
	// SetAside: the lake partition an object's new one replaces was moved
	// aside (per object).
	SetAside Point = "set aside"
	// Published: an object's new lake partition is in place (per object).
	Published Point = "published"
	// PublishCopied: the working database's copy is beside the published
	// warehouse, not yet renamed over it.
	PublishCopied Point = "publish copied"
	// PublishRenamed: the copy replaced the published warehouse; the
	// publish is not yet recorded.
	PublishRenamed Point = "publish renamed"
	// LakeStaged: a stream's Iceberg data files are staged (per object);
	// nothing is recorded or committed.
	LakeStaged Point = "lake staged"
	// LakeCommitted: the Iceberg table has the run's snapshot (per
	// object); the intent is not yet marked committed.
	LakeCommitted Point = "lake committed"
	// HistoryMigrated: an earlier release's history is turned into
	// versions, in the transaction of the open that migrates it; nothing
	// is committed.
	HistoryMigrated Point = "history migrated"
	// EventsLoaded: webhook events are in the working database and still
	// in the spool.
	EventsLoaded Point = "events loaded"
)

// All lists every point; the kill tests cover each.
func All() []Point {
	return []Point{EarlyLoaded, LakeStaged, Staged, HistoryFolded, Committed, SetAside, Published, LakeCommitted, PublishCopied, PublishRenamed, EventsLoaded, HistoryMigrated}
}

// For names the point for one object, as hooks receive it: "published
// course".
func (p Point) For(object string) string {
	if object == "" {
		return string(p)
	}
	return string(p) + " " + object
}

var hook atomic.Pointer[func(name string)]

// Set installs f, called at every point with the point's name (Point.For);
// nil removes it. Tests only.
func Set(f func(name string)) {
	if f == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&f)
}

// At marks that the protocol reached p (for object, "" when the point is
// not per object).
func At(p Point, object string) {
	if f := hook.Load(); f != nil {
		(*f)(p.For(object))
	}
}
