// Package query is the read side of the warehouse for people: SQL that a
// person or a page supplies (sepipe query, the dashboard's panels), run
// over a published warehouse read-only and sandboxed (sandbox.go: Open,
// DB.Query: no file access but the lake, one query, the settings read back
// once locked), and the values it returns rendered as people read them
// (values.go: ValueText and ValueJSON, the one owner of a DuckDB value as
// text and as JSON).
//
// It imports load (to open a warehouse read-only) and nothing else of
// sepipe's. What it does not do: write, or open the working database.
//
// Imports of sepipe's: load.
package query
