// Package schemas turns the service's field descriptions (the answer of a
// report object's /describe) into Arrow schemas, and back.
//
// The Arrow schema is sepipe's single source of truth for an object: the
// transform stage decodes pages into it, the load stage derives Parquet and
// DuckDB column types from it. Everything the describe said that Arrow types
// cannot hold (the service's own type name, display names, picklist options,
// the object id, a version hash of the describe) is kept in namespaced
// metadata under the "sepipe:" prefix, so a schema read back from a Parquet
// file still knows where it came from.
//
// Types (types.go) is the one table of field types: for each, its Arrow
// type, how the decoder reads its values, whether its values are text
// (the Parquet writers' rule for huge values), its DuckDB and Iceberg
// column types and its place among the numeric types, which Widen, the one
// widening rule, reads. Every stage reads the table; it holds:
//
//	int      -> int64                      BIGINT       long
//	percent  -> float64 (0..100, as sent)  DOUBLE       double
//	float    -> float64                    DOUBLE       double
//	string   -> utf8                       VARCHAR      string
//	picklist -> dictionary<int32, utf8>    VARCHAR      string  (options in field metadata)
//	date     -> timestamp[us, tz=UTC]      TIMESTAMPTZ  timestamptz
//	boolean  -> bool                       BOOLEAN      boolean (collections only)
//	json     -> extension<arrow.json>      JSON         string  (collections only; utf8 storage,
//	                                                               the JSON logical type in Parquet)
//
// Collections (themes, assets, webhook subscriptions and logs) have no
// describe: transform.Inferrer infers their fields from the items, a
// nested member as a field with a Path whose ID joins the members with
// "__" (dlt's convention), and ForCollection builds the schema.
// ResolveInferred merges inferred fields with stored ones under the
// stream's contract: a changed type widens (Widen: int -> percent -> float,
// any two others -> string, anything with json -> json), and a field
// missing from a run's items is no change.
//
// A field's column is named as the service names it, unless DuckDB could
// not hold it as a distinct column: ids equal but for case get a suffix
// (_2, ...), a NUL or bytes that are not UTF-8 become _, and _sepipe* names
// are prefixed with "field". The id is then kept in the field's
// "sepipe:field_id" metadata (FieldID, ColumnName); stored fields come
// first, so a column keeps its name across runs.
//
// Every column is nullable: the service sends null for any field. A type the
// package does not know is an *UnknownTypeError naming object and field; it
// is never guessed.
//
// The package does no I/O.
//
// Imports of sepipe's: lakefile, service.
package schemas
