package lakehouse

import (
	"errors"
	"fmt"
)

// ErrConflictsExhausted is wrapped when a commit kept losing the race
// with other writers for all its attempts. Nothing of it was committed.
var ErrConflictsExhausted = errors.New("commit lost to concurrent writers on every attempt")

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
