package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/lakehouse"
)

// ErrUnknownObject is wrapped when a requested object is not in the service.
var ErrUnknownObject = errors.New("unknown report object")

// ErrBusy is wrapped when another run holds the output folder.
var ErrBusy = errors.New("another sepipe run is using this output folder")

// ErrLakePending is wrapped when a run committed (warehouse and local
// lake) but committing it to the Iceberg lake failed: its intents stay
// recorded and the next run commits them (or discards those it cannot).
var ErrLakePending = errors.New("its Iceberg commit is pending")

// ErrNotPublished is wrapped when a run committed but publishing it (the
// lake's partitions, the warehouse) failed: the data is safe in the
// working database and the next run, or sepipe publish, finishes it.
var ErrNotPublished = errors.New("committed, not yet published")

// ObjectError is one object's failure in a run, naming the step.
type ObjectError struct {
	Object string
	Step   string // describe, schema, read, write, load, publish
	Err    error
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("object %q: %s: %v", e.Object, e.Step, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Mendable reports whether another run may read the stream where this one
// failed: not when it failed for its configuration (a key, cursor or
// filter that does not fit), its name or its schema (a freeze contract, a
// describe the table cannot take), or because its Iceberg table lost a
// data file: those fail the same way until a person changes them (or
// rebuilds the table).
func (e *ObjectError) Mendable() bool {
	switch e.Step {
	case "config", "name", "schema":
		return false
	}
	// A data file its Iceberg table lost: a person rebuilds the table.
	return !errors.Is(e.Err, lakehouse.ErrDataFileLost)
}

// RunError is returned by Sync when one or more objects failed. Partial is
// true when other objects were committed.
type RunError struct {
	RunID  string
	Failed []*ObjectError
	// Skipped are streams whose interface the tenant is not entitled to;
	// Deferred are streams the request quota would not cover (a later run
	// of the day continues them). Neither is a failure of sepipe, but the
	// run is partial.
	Skipped  []*ObjectError
	Deferred []*ObjectError
	Partial  bool
}

func (e *RunError) Error() string {
	var msgs []string
	// By object, without reordering e's lists: Error may be called from
	// several goroutines.
	byObject := func(a, b *ObjectError) int { return strings.Compare(a.Object, b.Object) }
	for _, f := range slices.SortedFunc(slices.Values(e.Failed), byObject) {
		msgs = append(msgs, f.Error())
	}
	msgs = append(msgs, grouped("skipped", e.Skipped)...)
	msgs = append(msgs, grouped("deferred", e.Deferred)...)
	what := "failed"
	switch {
	case e.LostNothing():
		what = "committed nothing" // every stream deferred (or skipped): none failed
	case e.Partial && len(e.Failed) == 0:
		what = "is partial"
	case e.Partial:
		what = "partly failed"
	}
	return fmt.Sprintf("run %s %s: %s", e.RunID, what, strings.Join(msgs, "; "))
}

// Status is the run's status as _sepipe_runs records it and the exit code
// tells it: "partial" when some streams committed, or when none did but
// none failed either and a quota deferred some (LostNothing), else
// "failed".
func (e *RunError) Status() string {
	if e.Partial || e.LostNothing() {
		return "partial"
	}
	return "failed"
}

// LostNothing reports whether a run that committed nothing failed no
// stream either: a quota deferred its streams (the others skipped, not
// entitled). A run whose every stream was skipped is not: it read nothing
// it was asked to (--objects named only streams the tenant may not read).
func (e *RunError) LostNothing() bool {
	return !e.Partial && len(e.Failed) == 0 && len(e.Deferred) > 0
}

// grouped words the streams of one list (skipped, deferred) that share a
// step and a reason once, naming them all: a tenant without a licence
// skips every stream of the interface for one reason, which the message
// said once per stream.
func grouped(what string, list []*ObjectError) []string {
	type reason struct{ step, msg string }
	var order []reason
	objects := map[reason][]string{}
	for _, f := range list {
		r := reason{f.Step, fmt.Sprint(f.Err)}
		if _, ok := objects[r]; !ok {
			order = append(order, r)
		}
		objects[r] = append(objects[r], strconv.Quote(f.Object))
	}
	msgs := make([]string, 0, len(order))
	for _, r := range order {
		if names := objects[r]; len(names) == 1 {
			msgs = append(msgs, fmt.Sprintf("%s object %s: %s: %s", what, names[0], r.step, r.msg))
		} else {
			msgs = append(msgs, fmt.Sprintf("%s objects %s: %s: %s", what, strings.Join(names, ", "), r.step, r.msg))
		}
	}
	return msgs
}

// ResumeAt is when the streams a request quota deferred can be read: the
// latest reset of the quotas that deferred them (extract.QuotaError). ok
// is false when no stream was deferred or one's error does not say when.
func (e *RunError) ResumeAt() (at time.Time, ok bool) {
	for _, d := range e.Deferred {
		var qe *extract.QuotaError
		if !errors.As(d, &qe) {
			return time.Time{}, false
		}
		if qe.Reset.After(at) {
			at = qe.Reset
		}
	}
	return at, len(e.Deferred) > 0
}

// Unfinished lists the streams the run left unfinished: those deferred
// and those that failed (not those skipped). A later run of the same
// snapshot day continues them when some were deferred
// (load.Warehouse.Unfinished).
func (e *RunError) Unfinished() []string {
	var ids []string
	for _, list := range [][]*ObjectError{e.Deferred, e.Failed} {
		for _, f := range list {
			ids = append(ids, f.Object)
		}
	}
	return ids
}

// Exceeds lists the deferred streams that need more requests than the
// quota allows in a whole window (extract.QuotaError.Exceeds): no later
// run reads them within one window either.
func (e *RunError) Exceeds() []string {
	var ids []string
	for _, d := range e.Deferred {
		if noWindowHolds(d) {
			ids = append(ids, d.Object)
		}
	}
	return ids
}

// noWindowHolds reports whether err defers a read that needs more
// requests than the quota allows in a whole window.
func noWindowHolds(err error) bool {
	var qe *extract.QuotaError
	return errors.As(err, &qe) && qe.Exceeds
}

// Unwrap exposes each object's error to errors.Is and errors.As.
func (e *RunError) Unwrap() []error {
	var out []error
	for _, list := range [][]*ObjectError{e.Failed, e.Skipped, e.Deferred} {
		for _, f := range list {
			out = append(out, f)
		}
	}
	return out
}
