package load

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/schemas"
)

// The warehouse's column types, as the one table of field types
// (schemas.Types) declares them, and what follows from them: a column's
// type, whether two DuckDB type names are one type, the type a column of
// two types widens to (schemas.Widen, the one widening rule), and the SQL
// that converts a value from one to the other.

// fieldType is the type of a column of a schema: its field type's
// (schemas.TypeOf), or for a column that carries none, its Arrow type's
// (schemas.TypeOfArrow). A column of neither is refused, naming it: no
// column is typed by a guess.
func fieldType(f arrow.Field) (schemas.Type, error) {
	if t, ok := schemas.TypeOf(f); ok {
		return t, nil
	}
	if t, ok := schemas.TypeOfArrow(f.Type); ok {
		return t, nil
	}
	return schemas.Type{}, fmt.Errorf("column %q: no field type of sepipe's for Arrow type %s", f.Name, f.Type)
}

// columnType is the DuckDB type of a column (fieldType).
func columnType(f arrow.Field) (string, error) {
	t, err := fieldType(f)
	return t.DuckDB, err
}

// isText reports whether f's column holds text (VARCHAR or JSON).
func isText(f arrow.Field) bool {
	t, err := fieldType(f)
	return err == nil && t.Text
}

// sameType reports whether two DuckDB type names are one type, however
// DuckDB spells it (TIMESTAMPTZ and TIMESTAMP WITH TIME ZONE).
func sameType(a, b string) bool {
	if a == b {
		return true
	}
	ta, oka := schemas.TypeOfDuckDB(a)
	tb, okb := schemas.TypeOfDuckDB(b)
	return oka && okb && ta.DuckDB == tb.DuckDB
}

// widerType is the DuckDB type of a column that holds values of DuckDB
// types a and b: the column type of schemas.Widen of their field types. A
// type sepipe never writes (a column a person altered) widens to text,
// JSON when either is JSON.
func widerType(a, b string) string {
	ta, oka := schemas.TypeOfDuckDB(a)
	tb, okb := schemas.TypeOfDuckDB(b)
	if !oka || !okb {
		if sameType(a, "JSON") || sameType(b, "JSON") {
			return "JSON"
		}
		return "VARCHAR"
	}
	w, _ := schemas.TypeNamed(schemas.Widen(ta.Name, tb.Name))
	return w.DuckDB
}

// castTo converts expr from DuckDB type from to type to: to text or
// JSON, as the service sends such a value (serviceText), so that a column
// widened holds its earlier days' values as the days after it hold
// theirs (a plain cast wrote 2.0 and '2026-01-02 00:00:00+00' where
// later rows hold 2 and '2026-01-02T00:00:00Z'); a cast otherwise.
func castTo(expr, from, to string) string {
	if sameType(from, to) {
		return expr
	}
	switch {
	case to == "VARCHAR":
		return serviceText(expr, from)
	case to == "JSON" && from == "DOUBLE":
		return "CAST(" + serviceText(expr, from) + " AS JSON)" // a JSON number
	case to == "JSON" && sameType(from, "TIMESTAMPTZ"):
		return "to_json(" + serviceText(expr, from) + ")" // a JSON string
	case to == "JSON":
		return "to_json(" + expr + ")"
	}
	return "CAST(" + expr + " AS " + to + ")"
}

// serviceText is the SQL of expr, of DuckDB type from, as the text the
// service sends such a value in: a whole double without ".0" (up to
// 10^15, where a double still holds every integer), an instant as ISO
// 8601 in UTC ('2026-01-02T00:00:00Z', with microseconds when it has
// them), what a cast gives for any other.
func serviceText(expr, from string) string {
	switch {
	case from == "DOUBLE":
		return "CASE WHEN " + expr + " = trunc(" + expr + ") AND abs(" + expr + ") < 1e15 THEN CAST(CAST(" + expr +
			" AS BIGINT) AS VARCHAR) ELSE CAST(" + expr + " AS VARCHAR) END"
	case sameType(from, "TIMESTAMPTZ"):
		return "CASE WHEN microsecond(" + expr + ") % 1000000 = 0 THEN strftime(" + expr + " AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') " +
			"ELSE strftime(" + expr + " AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ') END"
	}
	return "CAST(" + expr + " AS VARCHAR)"
}
