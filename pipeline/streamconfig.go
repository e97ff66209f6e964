package pipeline

import (
	"errors"
	"fmt"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
)

// StreamConfigError is a StreamConfig that cannot run, found before any
// data moves: by Validate, without the network, or by CheckStream, against
// the object's describe. Field names the field at fault ("Mode", "PrimaryKey",
// "Cursor", "Lookback", "Contract" or "Filters"; Filter is then the
// index of the filter, whose *extract.FilterError Err wraps).
type StreamConfigError struct {
	Field  string
	Filter int
	Err    error
}

func (e *StreamConfigError) Error() string {
	if e.Field == "Filters" {
		return fmt.Sprintf("filter %d: %v", e.Filter, e.Err)
	}
	return e.Err.Error()
}

func (e *StreamConfigError) Unwrap() error { return e.Err }

// Validate checks the stream configuration of stream name without the
// network: the write mode and contract are known ones, merge has a
// primary key (a collection has its own), only a report object reads
// incrementally and only in mode append or merge, a lookback has a
// cursor (whose type, a date, is checked when the describe is read), and
// each filter passes
// extract.CheckFilter. It returns a *StreamConfigError. Sync calls it for
// every configured stream; the CLI calls it to name the line of the fault.
func (s StreamConfig) Validate(name string) error {
	bad := func(field string, err error) error { return &StreamConfigError{Field: field, Err: err} }
	if _, err := load.ParseWriteMode(string(s.Mode)); err != nil {
		return bad("Mode", err)
	}
	if s.Mode == load.Merge && len(s.PrimaryKey) == 0 && !isCollection(name) {
		return bad("PrimaryKey", errors.New("write mode merge needs a primary key (the fields that identify a row)"))
	}
	if _, err := schemas.ParseContract(string(s.Contract)); err != nil {
		return bad("Contract", err)
	}
	if isCollection(name) && s.Cursor != "" {
		return bad("Cursor", errors.New("a collection cannot be read incrementally (its lists have no cursor filter)"))
	}
	if s.Cursor != "" && (s.Mode == "" || s.Mode == load.Replace) {
		// A replace stream's table is exactly one run's rows: read from a
		// watermark, it would hold only the rows changed since the last run.
		return bad("Cursor", errors.New("a replace stream reads every row each run (its table is the latest snapshot); an incremental stream needs mode append or merge"))
	}
	if s.Lookback != 0 && s.Cursor == "" {
		return bad("Lookback", errors.New("needs a cursor: lookback only applies to incremental streams"))
	}
	for i, f := range s.Filters {
		if err := extract.CheckFilter(f); err != nil {
			return &StreamConfigError{Field: "Filters", Filter: i, Err: err}
		}
	}
	return nil
}
