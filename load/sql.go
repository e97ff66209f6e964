package load

import "strings"

// Ident quotes a DuckDB identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Literal quotes a DuckDB string literal.
func Literal(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// readStaged reads sepipe's own staged files (or its lake's): hive
// partitioning off, so that no column is taken from a key=value folder of
// the path (a field called snapshot_date keeps the service's values); the
// files are named one by one. opts are more of read_parquet's options.
func readStaged(files []string, opts ...string) string {
	return "read_parquet(" + strings.Join(append([]string{fileList(files), "union_by_name = true", "hive_partitioning = false"}, opts...), ", ") + ")"
}

// fileColumn names the column that tells which file a row was read from,
// when a read asks for it (withFile): a name of sepipe's own, which no
// field can take (DuckDB's own, filename, a field called fileName would).
const fileColumn = "_sepipe_file"

// withFile is the read_parquet option that adds fileColumn.
const withFile = "filename = '" + fileColumn + "'"

func fileList(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = Literal(f)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
