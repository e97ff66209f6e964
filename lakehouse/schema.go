package lakehouse

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sepipe/sepipe/lakefile"
)

// Columns sepipe adds to every Iceberg table (lakefile owns them): the
// run that wrote the row, and the date column tables are partitioned by,
// the run's snapshot day. A stream with a field named like DayColumn (in
// any case) gets DayColumnAlt instead, as its history table does in the
// warehouse (lakefile.DayColumnFor).
const (
	ColRunID     = lakefile.ColRunID
	DayColumn    = lakefile.DayColumn
	DayColumnAlt = lakefile.DayColumnAlt
)

// Table properties sepipe sets.
const (
	propDayColumn = "sepipe.day-column"
	propKey       = "sepipe.primary-key" // JSON array
	propObject    = "sepipe.object"
)

// Snapshot summary properties of sepipe's commits.
const (
	SummaryRunID = "sepipe.run-id"
	SummaryDay   = "sepipe.day"
	SummaryMode  = "sepipe.mode"
)

// fieldIDKey is the Arrow field metadata key arrow-go's Parquet writer
// turns into each column's Parquet field_id.
const fieldIDKey = "PARQUET:field_id"

// dayColumnFor picks the day column of a new table for stream schema s
// (lakefile.DayColumnFor): a table with Snapshot_Date and snapshot_date
// could not be read by engines that ignore case.
func dayColumnFor(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return lakefile.DayColumnFor(names)
}

// dayPartitionFor picks the name of the day transform's partition field
// of a new table of schema sc, whose day column is dayCol: <dayCol>_day,
// or, when a column has that name (in any case), the name with "_"
// before it until none has. Iceberg refuses a partition field that is
// named like a column it is not the identity of: a stream with a field
// snapshot_date_day could never get its table.
func dayPartitionFor(sc *iceberg.Schema, dayCol string) string {
	name := dayCol + "_day"
	for {
		if _, taken := sc.FindFieldByNameCaseInsensitive(name); !taken {
			return name
		}
		name = "_" + name
	}
}

// icebergTypeOf maps an Arrow type of a sepipe stream to an Iceberg type.
//
//	int64 -> long, int32/16/8 -> int, float64 -> double, float32 -> float,
//	utf8, large_utf8, dictionary<_, utf8>, extension<arrow.json> -> string,
//	bool -> boolean, date32 -> date, timestamp[tz] -> timestamptz,
//	timestamp -> timestamp, binary -> binary, decimal128 -> decimal.
//
// Nested types have no mapping here: sepipe flattens members into columns
// and keeps the rest as JSON text.
func icebergTypeOf(t arrow.DataType) (iceberg.Type, bool) {
	switch t := t.(type) {
	case *arrow.Int64Type:
		return iceberg.PrimitiveTypes.Int64, true
	case *arrow.Int32Type, *arrow.Int16Type, *arrow.Int8Type, *arrow.Uint16Type, *arrow.Uint8Type:
		return iceberg.PrimitiveTypes.Int32, true
	case *arrow.Uint32Type:
		return iceberg.PrimitiveTypes.Int64, true
	case *arrow.Float64Type:
		return iceberg.PrimitiveTypes.Float64, true
	case *arrow.Float32Type:
		return iceberg.PrimitiveTypes.Float32, true
	case *arrow.StringType, *arrow.LargeStringType:
		return iceberg.PrimitiveTypes.String, true
	case *arrow.BooleanType:
		return iceberg.PrimitiveTypes.Bool, true
	case *arrow.Date32Type:
		return iceberg.PrimitiveTypes.Date, true
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return iceberg.PrimitiveTypes.TimestampTz, true
		}
		return iceberg.PrimitiveTypes.Timestamp, true
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return iceberg.PrimitiveTypes.Binary, true
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 {
			return nil, false
		}
		return iceberg.DecimalTypeOf(int(t.Precision), int(t.Scale)), true
	case *arrow.DictionaryType:
		switch t.ValueType.ID() {
		case arrow.STRING, arrow.LARGE_STRING:
			return iceberg.PrimitiveTypes.String, true
		}
		return nil, false
	case *extensions.JSONType:
		return iceberg.PrimitiveTypes.String, true
	case arrow.ExtensionType:
		return icebergTypeOf(t.StorageType())
	}
	return nil, false
}

// promotable reports whether Iceberg can widen a column of type from to
// type to (int->long, float->double, decimal(p,s)->decimal(p',s), p'>p).
func promotable(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := to.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() > f.Precision()
	}
	return false
}

// change is one column of a stream schema against a table schema.
type change struct {
	name string
	typ  iceberg.Type // the stream's Iceberg type
	add  bool         // a new column
	wide bool         // widen the table's column to typ
}

// diffSchema compares the stream's columns (as Iceberg types) with the
// table's current schema, by name. Columns only in the table are no
// change (their values are null in this run's files). A type the table
// holds wider than the stream is no change either: the run's values are
// cast up when written.
func diffSchema(tableName string, cols []column, cur *iceberg.Schema) ([]change, error) {
	var out []change
	for _, c := range cols {
		f, ok := cur.FindFieldByName(c.name)
		if !ok {
			out = append(out, change{name: c.name, typ: c.typ, add: true})
			continue
		}
		switch {
		case f.Type.Equals(c.typ):
		case promotable(c.typ, f.Type): // table wider: cast the run's values up
		case promotable(f.Type, c.typ):
			out = append(out, change{name: c.name, typ: c.typ, wide: true})
		default:
			return nil, &SchemaChangeError{Table: tableName, Column: c.name, From: f.Type.String(), To: c.typ.String()}
		}
	}
	return out, nil
}

// column is one column of a run's data files: a field of the stream's
// Arrow schema, or one of sepipe's own.
type column struct {
	name string
	typ  iceberg.Type
	src  int    // index in the stream's schema; -1 for sepipe's columns
	doc  string // the service's display name, if any
}

// streamColumns lists the stream's columns and sepipe's day and run
// columns, typed for Iceberg.
func streamColumns(tableName string, s *arrow.Schema, dayCol string) ([]column, error) {
	cols := make([]column, 0, s.NumFields()+2)
	for i, f := range s.Fields() {
		if f.Name == dayCol || f.Name == ColRunID {
			return nil, &SchemaChangeError{Table: tableName, Column: f.Name, From: "sepipe's own column", To: f.Type.String()}
		}
		t, ok := icebergTypeOf(f.Type)
		if !ok {
			return nil, &UnsupportedTypeError{Table: tableName, Column: f.Name, Type: f.Type.String()}
		}
		doc, _ := f.Metadata.GetValue(lakefile.MetaDisplayName)
		cols = append(cols, column{name: f.Name, typ: t, src: i, doc: doc})
	}
	cols = append(cols,
		column{name: dayCol, typ: iceberg.PrimitiveTypes.Date, src: -1, doc: "the sepipe run's snapshot day"},
		column{name: ColRunID, typ: iceberg.PrimitiveTypes.String, src: -1, doc: "the sepipe run that wrote the row"})
	return cols, nil
}

// newTableSchema numbers cols 1, 2, ... for a new table. The primary
// key's columns become the schema's identifier fields only when Iceberg
// allows it (required columns); sepipe's columns are all optional, so the
// key is kept in a table property and the sort order instead.
func newTableSchema(cols []column) *iceberg.Schema {
	fields := make([]iceberg.NestedField, len(cols))
	for i, c := range cols {
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.name, Type: c.typ, Required: false, Doc: c.doc}
	}
	return iceberg.NewSchema(0, fields...)
}

// fileSchema is the Arrow schema of a run's data files: cols in order,
// each typed as the table's current schema types it and carrying the
// table's field id, so that readers map columns by id, never by name.
func fileSchema(cur *iceberg.Schema, cols []column) (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		f, ok := cur.FindFieldByName(c.name)
		if !ok {
			return nil, fmt.Errorf("column %q is not in the table's schema %d", c.name, cur.ID)
		}
		at, err := table.TypeToArrowType(f.Type, false, false)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.name, err)
		}
		fields[i] = arrow.Field{Name: c.name, Type: at, Nullable: true,
			Metadata: arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(f.ID)})}
	}
	return arrow.NewSchema(fields, nil), nil
}
