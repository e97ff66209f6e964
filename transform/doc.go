// Package transform decodes the service's list pages straight into Arrow
// record batches: report object results and the collections' lists alike
// (one data path for every stream).
//
// A Decoder is built once per object from its Arrow schema (see package
// schemas) and is safe for concurrent use: fetch workers decode their pages
// in parallel. Decoding is a single pass over the page bytes with a small
// purpose-built JSON scanner; values go from the bytes into typed Arrow
// builders with no reflection, no per-row maps and no per-value allocations
// on the common path.
//
// A value that does not fit its field's type (text in an int field, an
// unparseable date, an object where a scalar belongs) is null in its row,
// and the row is kept: one data path for report objects and collections,
// and no row lost for one odd value. Nothing is dropped silently either:
// each such value is a Reject, with the whole raw row, and counted
// (Result.NulledValues). A row is left out (Result.RejectedRows) only when
// it cannot be placed: an element of the rows that is not an object, or a
// row without a value for a required key field. A page that is not valid
// JSON at all is an error (*DecodeError) naming object, page and byte
// offset: the caller decides whether to refetch it.
//
// A value whose JSON text is longer than WithMaxValueBytes is not copied:
// its field is null, its row is kept, and its Reject (Oversize) gives the
// value's offsets in the page body, for the caller to keep it from there.
//
// Text that cannot be stored as sent (bytes that are not UTF-8, a lone
// surrogate escape) is repaired, not rejected: the bad bytes become U+FFFD
// and Result.RepairedValues counts them. Each page's rows are hashed
// (PageInfo.RowsHash), so the client can tell a page that repeats another's
// rows under another page number. Rows are keyed by the service's field
// ids, which may differ from the column names (schemas.FieldID).
//
// What the decoder tolerates, because real tenants send it: numbers as JSON
// strings ("12"), integral floats in int fields (12.0), dates with or
// without seconds or fractional seconds, with a UTC offset, or date-only,
// fields missing from a row (null), keys the schema does not know (counted
// and named in Result.UnknownFields), a missing totalResults/totalPages, an
// element of the rows that is not an object (a row rejected whole), and
// values nested at any depth (past 64 levels a stored one is null and a
// Reject; the scanner's skip walks them without recursion).
//
// A page may come in any list shape the service sends: Coach reporting's
// {page, resultsPerPage, totalResults, totalPages, results}, v3's
// {meta: {count}, response: {items}} or v4's and the webhooks'
// {count, items}; the count is found where the page puts it
// (PageInfo.TotalResults).
//
// Collections have no describe: an Inferrer reads their items and says
// which fields they call for (each member a column, nested objects
// flattened into parent__child columns, arrays and deeper values as json
// columns, types as narrow as the values allow). The Decoder reads nested
// members by their path, stores json columns as compacted, valid JSON
// text (arrow-go's JSON extension type), and, for collections, counts the
// misfits that call for a wider schema (Result.Misfits), lists unknown
// members as Rejects under a frozen schema
// (WithUnknownRejected) and redacts credentials (WithCredentialsRedacted).
// With key fields (WithKeyFields) it yields every row's key in the same
// pass, so the reader checks for repeated rows without parsing the page
// again: the key values as their columns hold them (1 and "1" in a text
// column are one key), not as sent.
//
// The package does no I/O and knows nothing of Parquet or DuckDB.
//
// Imports of sepipe's: lakefile, schemas, service.
package transform
