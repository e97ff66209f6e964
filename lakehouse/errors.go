package lakehouse

import (
	"errors"
	"fmt"
	"strings"
)

// ErrConflictsExhausted is wrapped when a commit kept losing the race
// with other writers for all its attempts. Nothing of it was committed.
var ErrConflictsExhausted = errors.New("commit lost to concurrent writers on every attempt")

// ErrDataFileLost is wrapped when a data file the table's current snapshot
// references is gone from storage (a lifecycle rule, a mistake): a merge
// commit must read it and cannot, and no later commit of the table can
// until it is rebuilt (an Intent with Rebuild removes every data file
// without reading any). The TableError names the file.
var ErrDataFileLost = errors.New("a data file of the table is gone from storage")

// WarehouseError is a warehouse location the lake cannot write
// (CheckWarehouse): What says what failed, and the message what to check
// for its kind, a folder (file://) or a bucket (s3://).
type WarehouseError struct {
	Location string
	What     string // "cannot open it", "cannot write to it", ...
	Err      error
}

func (e *WarehouseError) Error() string {
	check := "check that the bucket exists, s3.endpoint, s3.region and the AWS credentials"
	if e.Local() {
		check = "it must be a folder sepipe can create and write"
	}
	return fmt.Sprintf("iceberg warehouse %s: %s (%s): %v", e.Location, e.What, check, e.Err)
}

func (e *WarehouseError) Unwrap() error { return e.Err }

// Local reports whether the warehouse is a folder of this machine
// (file://).
func (e *WarehouseError) Local() bool { return strings.HasPrefix(e.Location, "file://") }

// TableError reports a failure on one table, naming the step
// ("create table", "evolve schema", "write data file", "commit", ...).
type TableError struct {
	Table string // namespace.name
	Step  string
	Path  string // file involved, if any
	Err   error
}

func (e *TableError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("iceberg table %s: %s %s: %v", e.Table, e.Step, e.Path, e.Err)
	}
	return fmt.Sprintf("iceberg table %s: %s: %v", e.Table, e.Step, e.Err)
}

func (e *TableError) Unwrap() error { return e.Err }

// SchemaChangeError is a change of a column's type that Iceberg's schema
// evolution cannot express (it widens int to long, float to double and a
// decimal's precision, nothing else). pipeline decides what to do: stop
// the stream, or rebuild the table.
type SchemaChangeError struct {
	Table  string
	Column string
	From   string // the table's Iceberg type
	To     string // what the stream's Arrow schema asks for
}

func (e *SchemaChangeError) Error() string {
	return fmt.Sprintf("iceberg table %s: column %q cannot change from %s to %s (Iceberg widens only int->long, float->double and decimal precision)",
		e.Table, e.Column, e.From, e.To)
}

// UnsupportedTypeError is an Arrow type the lake has no Iceberg type for.
type UnsupportedTypeError struct {
	Table  string
	Column string
	Type   string
}

func (e *UnsupportedTypeError) Error() string {
	return fmt.Sprintf("iceberg table %s: column %q: no Iceberg type for Arrow %s", e.Table, e.Column, e.Type)
}

// KeyError is a merge stream's row that cannot be merged: its key is null
// or appears twice in the run's rows.
type KeyError struct {
	Table  string
	Key    []string // the primary key's columns
	Value  string   // the key's value, rendered
	Reason string   // "null key", "duplicate key"
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("iceberg table %s: %s %v = %s", e.Table, e.Reason, e.Key, e.Value)
}
