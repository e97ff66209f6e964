package load

import (
	"context"
	"database/sql"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// commentColumn sets the comment of column col of table (an identifier
// already quoted) to text, made valid UTF-8 without NUL bytes.
func commentColumn(ctx context.Context, tx *sql.Tx, table, col, text string) error {
	_, err := tx.ExecContext(ctx, "COMMENT ON COLUMN "+table+"."+Ident(col)+" IS "+Literal(strings.ReplaceAll(validText(text), "\x00", "")))
	return err
}

// alignColumns adds the columns a table lacks and widens the ones whose
// type changed, so an append or merge table follows the effective schema.
func alignColumns(ctx context.Context, tx *sql.Tx, t Table) error {
	_, err := alignTo(ctx, tx, t.Object, t.Object, t.Schema)
	return err
}

// tableColumns returns a table's columns and their DuckDB types.
func tableColumns(ctx context.Context, tx *sql.Tx, table string) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = current_schema() AND table_name = ?`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		have[name] = typ
	}
	return have, rows.Err()
}

// sameName reports whether DuckDB takes a and b for the same column name:
// it compares names ignoring case, ASCII letters only (it folds no other
// letter: "É" and "é" are two columns). strings.EqualFold folds Unicode
// too, and would take two columns DuckDB holds apart for one.
func sameName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// columnNamed finds the column of have (a table's columns and types,
// tableColumns) that DuckDB takes name for (sameName), and returns its
// own spelling: a field a run spells otherwise than the table (a full
// refresh names its fields from the live describe alone, while the
// history keeps the old spelling) is that column, not a new one, which
// DuckDB would refuse ("already exists").
func columnNamed(have map[string]string, name string) (string, bool) {
	if _, ok := have[name]; ok {
		return name, true
	}
	for c := range have {
		if sameName(c, name) {
			return c, true
		}
	}
	return "", false
}

// alignTo makes table (of object) hold a column for every field of s: it
// adds the missing ones and widens a column whose type is not the field's.
// A field matches the column DuckDB takes its name for (columnNamed),
// whatever its case; the column keeps its spelling. It returns the
// table's columns and types afterwards, by the columns' spelling.
func alignTo(ctx context.Context, tx *sql.Tx, object, table string, s *arrow.Schema) (map[string]string, error) {
	have, err := tableColumns(ctx, tx, table)
	if err != nil {
		return nil, &WriteError{Object: object, Step: "read table columns", Path: table, Err: err}
	}
	for _, f := range s.Fields() {
		want, err := columnType(f)
		if err != nil {
			return nil, &WriteError{Object: object, Step: "derive table", Err: err}
		}
		col, ok := columnNamed(have, f.Name)
		got := have[col]
		var q string
		switch {
		case !ok:
			col = f.Name
			q = "ALTER TABLE " + Ident(table) + " ADD COLUMN " + Ident(col) + " " + want
		case !sameType(got, want):
			wide := widerType(got, want)
			if sameType(got, wide) {
				continue // the column holds the field's values already
			}
			q = "ALTER TABLE " + Ident(table) + " ALTER COLUMN " + Ident(col) + " SET DATA TYPE " + wide +
				" USING " + castTo(Ident(col), got, wide)
			want = wide
		default:
			continue
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, &WriteError{Object: object, Step: "evolve table (" + f.Name + ")", Path: table, Err: err}
		}
		have[col] = want
	}
	return have, nil
}
