// Package lakefile is the one owner of what sepipe's lake files are, for
// both of its writers: load's ParquetWriter (the output folder's lake,
// which DuckDB loads) and lakehouse's StageWriter (the Iceberg lake's data
// files). It holds:
//
//   - the Parquet format (format.go): compression, data page size,
//     statistics and dictionaries by column type, the row group's length
//     and byte bound, and the rule for huge text values, which sees every
//     text-like column (strings, picklists, JSON); File (file.go) encodes
//     one data file by it, so neither writer sets a Parquet property of
//     its own;
//   - the columns and names sepipe adds (columns.go): the run-id column,
//     the day column and the rule that names it, the metadata key of a
//     column's display name, and the write modes.
//
// It imports only arrow-go (and the standard library), so lakehouse stays
// free of the rest of sepipe. It does no I/O but through the io.Writer it
// is given.
//
// Imports nothing of sepipe's.
package lakefile
