package load

import (
	"errors"
	"fmt"
)

// ErrWarehouseLocked is wrapped when another process holds the DuckDB file.
var ErrWarehouseLocked = errors.New("warehouse is locked by another process")

// ErrHeldBySepipe is wrapped, beside ErrWarehouseLocked, when the process
// holding the working database is another sepipe process (a sync, a
// listener's batch) holding its state lock: it lets go when its step
// ends. Without it, the file is held by a program that is not sepipe.
var ErrHeldBySepipe = errors.New("held by another sepipe process")

// WriteError reports a failure writing an object's data, naming the step.
type WriteError struct {
	Object string
	Step   string // e.g. "parquet write", "publish", "duckdb load"
	Path   string // file or table involved, if any
	Err    error
}

func (e *WriteError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("object %q: %s %s: %v", e.Object, e.Step, e.Path, e.Err)
	}
	return fmt.Sprintf("object %q: %s: %v", e.Object, e.Step, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }
