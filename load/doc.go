// Package load writes record batches where users read them: the Parquet
// lake and the DuckDB warehouse.
//
// The lake is hive-partitioned, one folder per object and snapshot day:
//
//	<out>/lake/<object>/snapshot_date=YYYY-MM-DD/part-00000.parquet
//
// Files are zstd-compressed, carry the Arrow schema (so picklist options,
// display names and the describe version travel with the data) and are
// written first into a staging folder outside the lake,
// <out>/.sepipe/staging/<run>/..., then published by renaming the whole
// partition folder into place. A reader of the lake sees the old partition
// or the new one, never a half-written file.
//
// The warehouse is one DuckDB file, <out>/warehouse.duckdb. Warehouse.Commit
// loads every staged object from its Parquet files with read_parquet, the
// rejects and the run record in one transaction: either all of a run is in
// the warehouse or none of it. The warehouse is opened only for that
// transaction, so other readers are blocked for as short a time as DuckDB's
// single-writer lock allows.
//
// Names (names.go) is the one owner of the names sepipe builds from service
// ids: every stream's table and lake folder name is safe (no separators,
// dots, globs, '?', '=', control characters), unique ignoring case, never
// one of sepipe's own, and recorded in _sepipe_names so it never moves;
// CheckName guards every path and identifier built from one, and
// CheckOutputPath refuses an output folder DuckDB would read as syntax.
// sepipe's own reads of staged files turn hive partitioning off. A text
// column that holds a value of a megabyte or more is written without
// Parquet statistics or dictionary, one row group per batch. Rejects keep
// the raw row's exact bytes when it is not valid UTF-8.
//
// What the package does not do: fetch, decode, or decide when a run is
// good; that is the pipeline's job.
package load
