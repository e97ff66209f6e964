package webhooks

import "time"

// Observer is told what a listener does, for sepipe's metrics
// (internal/monitor): each delivery's outcome, each load and each publish.
// Its methods are called from many goroutines at once and must not block.
type Observer interface {
	// Delivered: a delivery was answered 200, OutcomeAccepted (stored) or
	// OutcomeDuplicate (stored before).
	Delivered(outcome string)
	// Refused: a delivery was refused, for reason (Refused*).
	Refused(reason string)
	// Loaded: events were loaded into the working database (new: those
	// not there before), taking took.
	Loaded(events, new int, took time.Duration)
	// Published: the working database was published at at, taking took.
	Published(took time.Duration, at time.Time)
}

// Outcomes of a delivery answered 200.
const (
	OutcomeAccepted  = "accepted"
	OutcomeDuplicate = "duplicate"
)

// Reasons a delivery is refused (its status in brackets).
const (
	RefusedMethod    = "method"        // not GET or POST (405)
	RefusedSignature = "bad_signature" // no signature, none well formed or matching, no timestamp (401)
	RefusedStale     = "stale"         // a timestamp outside the window, or not Unix seconds (400)
	RefusedTooLarge  = "too_large"     // a body or query past the max body, or an event the spool cannot hold (413)
	RefusedBusy      = "busy"          // no room in the bytes in flight, or past its source's share (503)
	RefusedCut       = "cut"           // its body stopped arriving: a deadline, a dropped connection (503)
	RefusedMalformed = "malformed"     // not an event with an id and a type, or text the warehouse cannot store (400)
	RefusedNotStored = "not_stored"    // the spool could not store it: a full disk, a failed fsync (503)
)

// Refusals lists every reason, for a metric's labels.
var Refusals = []string{RefusedMethod, RefusedSignature, RefusedStale, RefusedTooLarge, RefusedBusy, RefusedCut, RefusedMalformed, RefusedNotStored}

// NoObserver observes nothing.
type NoObserver struct{}

func (NoObserver) Delivered(string)                   {}
func (NoObserver) Refused(string)                     {}
func (NoObserver) Loaded(int, int, time.Duration)     {}
func (NoObserver) Published(time.Duration, time.Time) {}
