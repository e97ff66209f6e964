package lakefile

import (
	"fmt"
	"strings"
)

// Columns sepipe adds to the rows of a stream, in the lake and the
// warehouse.
const (
	// ColRunID holds the run that wrote the row.
	ColRunID = "_sepipe_run_id"
	// DayColumn holds the run's snapshot day: the history tables' and the
	// Iceberg tables' day column, and the local lake's partition key.
	DayColumn = "snapshot_date"
	// DayColumnAlt is the day column of a stream that has a field named
	// like DayColumn (DayColumnFor); an append or merge stream's table
	// holds the day under this name too.
	DayColumnAlt = "_sepipe_snapshot_date"
)

// DayColumnFor is the day column of a stream whose columns are named
// names: DayColumn, or DayColumnAlt when one of them is DayColumn ignoring
// case, as any reader may compare names (DuckDB folds ASCII letters,
// Iceberg's readers Unicode: the fold here is Unicode's, which holds both).
func DayColumnFor(names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, DayColumn) {
			return DayColumnAlt
		}
	}
	return DayColumn
}

// MetaDisplayName is the Arrow field metadata key of a column's display
// name, as the service names the field (schemas writes it; the warehouse
// and the Iceberg lake make it the column's comment and doc).
const MetaDisplayName = "sepipe:display_name"

// WriteMode is how a stream's rows replace what its table held.
type WriteMode string

// Write modes.
const (
	// Replace: the table is the latest snapshot (a day's rows replace
	// that day's).
	Replace WriteMode = "replace"
	// Append: every run's rows are kept, under their day.
	Append WriteMode = "append"
	// Merge: rows are upserted on the primary key.
	Merge WriteMode = "merge"
)

// ParseWriteMode reads a configured mode ("" is Replace).
func ParseWriteMode(s string) (WriteMode, error) {
	switch WriteMode(s) {
	case "", Replace:
		return Replace, nil
	case Append, Merge:
		return WriteMode(s), nil
	}
	return "", fmt.Errorf("unknown write mode %q (want replace, append or merge)", s)
}
