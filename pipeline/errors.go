package pipeline

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnknownObject is wrapped when a requested object is not in the service.
var ErrUnknownObject = errors.New("unknown report object")

// ErrBusy is wrapped when another run holds the output folder.
var ErrBusy = errors.New("another sepipe run is using this output folder")

// ErrListening is wrapped when another listener holds the event spool.
var ErrListening = errors.New("another sepipe listen is using this output folder's event spool")

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

// RunError is returned by Sync when one or more objects failed. Partial is
// true when other objects were committed.
type RunError struct {
	RunID   string
	Failed  []*ObjectError
	Partial bool
}

func (e *RunError) Error() string {
	sort.Slice(e.Failed, func(i, j int) bool { return e.Failed[i].Object < e.Failed[j].Object })
	msgs := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		msgs[i] = f.Error()
	}
	what := "failed"
	if e.Partial {
		what = "partly failed"
	}
	return fmt.Sprintf("run %s %s: %s", e.RunID, what, strings.Join(msgs, "; "))
}

// Unwrap exposes each object's error to errors.Is and errors.As.
func (e *RunError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f
	}
	return out
}
