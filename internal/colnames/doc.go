// Package colnames names the columns of a query result uniquely for the
// outputs that key values by name: sepipe query's JSON lines and CSV
// header, and the dashboard's panels. DuckDB lets a result hold two columns
// of one name (SELECT * over a join: u.status and c.status); a JSON reader
// keeps only the last of two equal keys, silently. Unique renames the
// later ones as DuckDB does in a subquery: status, status_1, status_2.
//
// Imports nothing of sepipe's.
package colnames
