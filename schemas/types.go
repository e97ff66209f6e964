package schemas

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/service"
)

// Value is how the decoder reads a type's values from a page
// (transform.Decoder switches on it).
type Value uint8

// Values.
const (
	ValueInt    Value = iota + 1 // a JSON number holding an integer, into int64
	ValueFloat                   // a JSON number, into float64
	ValueText                    // a JSON string, kept as its UTF-8 text
	ValueOption                  // a picklist's option: text, dictionary-encoded
	ValueTime                    // an ISO 8601 date-time, into UTC microseconds
	ValueBool                    // a JSON true or false
	ValueJSON                    // any JSON value, kept as its text
)

// Type is one field type and what it is at every stage of the data path:
// the one table of them (Types) is the only place a type is declared, and
// every stage that keys on a type reads it: the Arrow schema (FromDescribe,
// ForCollection), the decoder (Value), the Parquet writers (Text: the rule
// for huge values), the warehouse's columns (DuckDB) and their widening
// (Widen), the Iceberg lake's columns (Iceberg, which lakehouse derives
// from the Arrow type and a test holds equal), and the dbt sources'
// data_type. Adding a type is adding a row; TestEveryTypeThroughEveryStage
// (pipeline) then says what else must follow.
type Type struct {
	// Name is the type as the service's /describe names it, or sepipe's
	// own name for a type it infers in a collection's items.
	Name string
	// Describe: a report object's describe may declare the type; the
	// others are inferred in collections only, never accepted from a
	// describe.
	Describe bool
	// Arrow is the column's Arrow type.
	Arrow arrow.DataType
	// Value is how the decoder reads it.
	Value Value
	// Text: its values are text of any length, so a huge one gets a
	// Parquet file without text statistics or a dictionary.
	Text bool
	// DuckDB is the warehouse column's type; DuckDBAliases are other
	// names DuckDB reports for the same type.
	DuckDB        string
	DuckDBAliases []string
	// Iceberg is the Iceberg lake column's type, as iceberg-go writes it.
	Iceberg string
	// Number is its place among the numeric types, from narrow to wide (0:
	// not a number): a column of two numeric types widens to the wider.
	Number int
}

// Types is every field type sepipe knows. Order: the describe's types
// first, then the collections' own.
var Types = []Type{
	{Name: service.TypeInt, Describe: true, Arrow: arrow.PrimitiveTypes.Int64, Value: ValueInt, DuckDB: "BIGINT", Iceberg: "long", Number: 1},
	{Name: service.TypePercent, Describe: true, Arrow: arrow.PrimitiveTypes.Float64, Value: ValueFloat, DuckDB: "DOUBLE", Iceberg: "double", Number: 2},
	{Name: service.TypeFloat, Describe: true, Arrow: arrow.PrimitiveTypes.Float64, Value: ValueFloat, DuckDB: "DOUBLE", Iceberg: "double", Number: 3},
	{Name: service.TypeString, Describe: true, Arrow: arrow.BinaryTypes.String, Value: ValueText, Text: true, DuckDB: "VARCHAR", Iceberg: "string"},
	{Name: service.TypePicklist, Describe: true, Arrow: PicklistType, Value: ValueOption, Text: true, DuckDB: "VARCHAR", Iceberg: "string"},
	{Name: service.TypeDate, Describe: true, Arrow: TimestampType, Value: ValueTime, DuckDB: "TIMESTAMPTZ", DuckDBAliases: []string{"TIMESTAMP WITH TIME ZONE"}, Iceberg: "timestamptz"},
	{Name: service.TypeBool, Arrow: arrow.FixedWidthTypes.Boolean, Value: ValueBool, DuckDB: "BOOLEAN", Iceberg: "boolean"},
	{Name: service.TypeJSON, Arrow: JSONType, Value: ValueJSON, Text: true, DuckDB: "JSON", Iceberg: "string"},
}

// TypeNamed is the type of a service type name.
func TypeNamed(name string) (Type, bool) {
	i := slices.IndexFunc(Types, func(t Type) bool { return t.Name == name })
	if i < 0 {
		return Type{}, false
	}
	return Types[i], true
}

// TypeOf is the type of a column of a schema sepipe built (its
// "sepipe:type" metadata).
func TypeOf(f arrow.Field) (Type, bool) { return TypeNamed(ServiceType(f)) }

// TypeOfArrow is the first type of the table whose Arrow type is dt (int
// for int64, percent for float64, string for utf8, ...): what a column of
// that Arrow type is read and written as, whatever service type it came
// from.
func TypeOfArrow(dt arrow.DataType) (Type, bool) {
	i := slices.IndexFunc(Types, func(t Type) bool { return arrow.TypeEqual(t.Arrow, dt) })
	if i < 0 {
		return Type{}, false
	}
	return Types[i], true
}

// TypeOfDuckDB is the type a warehouse column of DuckDB type name holds
// (its name or an alias; a DOUBLE is a float). The second result is false
// for a type sepipe never writes.
func TypeOfDuckDB(name string) (Type, bool) {
	name = strings.ToUpper(strings.TrimSpace(name))
	for _, t := range Types {
		if t.Name == service.TypePercent || t.Name == service.TypePicklist {
			continue // the same columns as float's and string's
		}
		if t.DuckDB == name || slices.Contains(t.DuckDBAliases, name) {
			return t, true
		}
	}
	return Type{}, false
}

// Widen returns the type that can hold values of both a and b: the same
// type; json when either is json (a JSON column holds any value); the
// wider of two numeric types (int, then percent, then float); string for
// any other two, boolean and int included (a boolean's text, true, is not
// a number: a column of both keeps each as the service sent it). It is
// the one widening rule: of a collection's inferred fields
// (ResolveInferred), of a report object's describe changes (Resolve), and
// of the warehouse's tables and history tables (load).
func Widen(a, b string) string {
	if a == b {
		return a
	}
	if a == service.TypeJSON || b == service.TypeJSON {
		return service.TypeJSON
	}
	ta, oka := TypeNamed(a)
	tb, okb := TypeNamed(b)
	if oka && okb && ta.Number > 0 && tb.Number > 0 {
		if ta.Number > tb.Number {
			return a
		}
		return b
	}
	return service.TypeString
}
