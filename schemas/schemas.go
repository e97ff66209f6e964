package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"

	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/service"
)

// Metadata keys. Field metadata carries the service's view of a column;
// schema metadata carries the object and the describe version.
const (
	MetaType        = "sepipe:type"            // field: the service type (int, picklist, ...)
	MetaDisplayName = lakefile.MetaDisplayName // field: the service's display name (the lake's files keep it: lakefile)
	MetaOptions     = "sepipe:options"         // field: JSON array of picklist options
	MetaFieldID     = "sepipe:field_id"        // field: the service's field id, when the column name differs
	MetaPath        = "sepipe:path"            // field: JSON array of member names, for a field nested in a collection's items
	MetaObject      = "sepipe:object"          // schema: report object id
	MetaVersion     = "sepipe:version"         // schema: hash of the describe result
)

var (
	// PicklistType is the Arrow type of a picklist column.
	PicklistType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	// TimestampType is the Arrow type of a date column: microseconds, UTC.
	TimestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	// JSONType is the Arrow type of a json column: arrow-go's JSON
	// extension type over strings, which the Parquet writer annotates with
	// the JSON logical type.
	JSONType = mustJSONType()
)

func mustJSONType() *extensions.JSONType {
	t, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		panic(err) // string storage is always supported
	}
	return t
}

// ArrowType returns the Arrow type of a type a describe may declare (the
// table Types), or false when the type is unknown or a collection's own.
func ArrowType(serviceType string) (arrow.DataType, bool) {
	t, ok := TypeNamed(serviceType)
	if !ok || !t.Describe {
		return nil, false
	}
	return t.Arrow, true
}

// FromDescribe builds the Arrow schema of a report object from its describe
// result. Columns keep the describe order and are named by field id.
func FromDescribe(object string, fields []service.Field) (*arrow.Schema, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("object %q: %w (its describe lists none)", object, ErrNoFields)
	}
	return build(object, fields, false)
}

// ForCollection builds the Arrow schema of a collection from the fields
// inferred from its items (transform.Inferrer): the six service types
// plus boolean and json; a nested field (Path set) is named by its ID and
// records its path.
func ForCollection(name string, fields []service.Field) (*arrow.Schema, error) {
	return build(name, fields, true)
}

// collectionType is the Arrow type of any type of the table Types: a
// collection's inferred fields may be of the collections' own too.
func collectionType(name string) (arrow.DataType, bool) {
	t, ok := TypeNamed(name)
	return t.Arrow, ok
}

func build(object string, fields []service.Field, extended bool) (*arrow.Schema, error) {
	out := make([]arrow.Field, 0, len(fields))
	seen := make(map[string]bool, len(fields))
	columns := make(map[string]bool, len(fields)) // lower-case column names taken
	for _, f := range fields {
		if f.ID == "" {
			return nil, &FieldError{Object: object, Field: f.DisplayName, Reason: "empty field id"}
		}
		if seen[f.ID] {
			return nil, &FieldError{Object: object, Field: f.ID, Reason: "field id appears twice in describe"}
		}
		seen[f.ID] = true
		dt, ok := ArrowType(f.Type)
		if extended {
			dt, ok = collectionType(f.Type)
		}
		if !ok {
			return nil, &UnknownTypeError{Object: object, Field: f.ID, Type: f.Type}
		}
		keys := []string{MetaType, MetaDisplayName}
		vals := []string{f.Type, f.DisplayName}
		col := columnName(f.ID, columns)
		if col != f.ID {
			keys, vals = append(keys, MetaFieldID), append(vals, f.ID)
		}
		if len(f.Path) > 0 {
			b, err := json.Marshal(f.Path)
			if err != nil {
				return nil, fmt.Errorf("object %q field %q: path: %w", object, f.ID, err)
			}
			keys, vals = append(keys, MetaPath), append(vals, string(b))
		}
		if f.Type == service.TypePicklist {
			opts := f.Options
			if opts == nil {
				opts = []string{}
			}
			b, err := json.Marshal(opts)
			if err != nil {
				return nil, fmt.Errorf("object %q field %q: options: %w", object, f.ID, err)
			}
			keys = append(keys, MetaOptions)
			vals = append(vals, string(b))
		}
		out = append(out, arrow.Field{
			Name:     col,
			Type:     dt,
			Nullable: true,
			Metadata: arrow.NewMetadata(keys, vals),
		})
	}
	md := arrow.NewMetadata([]string{MetaObject, MetaVersion}, []string{object, Version(fields)})
	return arrow.NewSchema(out, &md), nil
}

// ToDescribe converts a schema built by FromDescribe back into the describe
// fields it came from.
func ToDescribe(s *arrow.Schema) ([]service.Field, error) {
	out := make([]service.Field, 0, s.NumFields())
	for _, f := range s.Fields() {
		t := ServiceType(f)
		if t == "" {
			return nil, &FieldError{Object: Object(s), Field: f.Name, Reason: "no " + MetaType + " metadata"}
		}
		ef := service.Field{ID: FieldID(f), Type: t}
		if v, ok := f.Metadata.GetValue(MetaDisplayName); ok {
			ef.DisplayName = v
		}
		if t == service.TypePicklist {
			ef.Options = Options(f)
		}
		ef.Path = Path(f)
		out = append(out, ef)
	}
	return out, nil
}

// FieldID returns the service's id of a field: the column name, unless
// the column had to be named otherwise (MetaFieldID).
func FieldID(f arrow.Field) string {
	if v, ok := f.Metadata.GetValue(MetaFieldID); ok {
		return v
	}
	return f.Name
}

// ColumnName returns the column of the field whose service id is id, or
// id itself when the schema has no such field.
func ColumnName(s *arrow.Schema, id string) string {
	for _, f := range s.Fields() {
		if FieldID(f) == id {
			return f.Name
		}
	}
	return id
}

// columnName is a field id's column: the id itself, unless DuckDB could
// not hold it as a distinct column: names are case-insensitive (the later
// of "Name" and "name" gets a suffix _2, _3, ...), a NUL or bytes that
// are not UTF-8 cannot be stored (they become _), and _sepipe* names are
// sepipe's bookkeeping columns. Fields are named in describe order with
// the stored fields first (schemas.Resolve), so a column keeps its name.
func columnName(id string, taken map[string]bool) string {
	base := strings.ToValidUTF8(strings.ReplaceAll(id, "\x00", "_"), "_")
	if strings.HasPrefix(strings.ToLower(base), "_sepipe") {
		base = "field" + base
	}
	name := base
	for k := 2; taken[strings.ToLower(name)]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	taken[strings.ToLower(name)] = true
	return name
}

// Path returns the member path recorded on a nested collection field, or
// nil for a top-level one.
func Path(f arrow.Field) []string {
	v, ok := f.Metadata.GetValue(MetaPath)
	if !ok {
		return nil
	}
	var p []string
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return nil
	}
	return p
}

// ServiceType returns the service type recorded on a field, or "".
func ServiceType(f arrow.Field) string {
	v, _ := f.Metadata.GetValue(MetaType)
	return v
}

// Options returns the picklist options recorded on a field (nil if none).
func Options(f arrow.Field) []string {
	v, ok := f.Metadata.GetValue(MetaOptions)
	if !ok {
		return nil
	}
	var opts []string
	if err := json.Unmarshal([]byte(v), &opts); err != nil {
		return nil
	}
	return opts
}

// Object returns the report object id recorded on a schema.
func Object(s *arrow.Schema) string {
	md := s.Metadata()
	v, _ := md.GetValue(MetaObject)
	return v
}

// SchemaVersion returns the describe version recorded on a schema.
func SchemaVersion(s *arrow.Schema) string {
	md := s.Metadata()
	v, _ := md.GetValue(MetaVersion)
	return v
}

// Version is a stable hash of a describe result: the same fields, types and
// options in the same order give the same version. Display names count too,
// since they are kept as column descriptions.
func Version(fields []service.Field) string {
	type canon struct {
		ID, DisplayName, Type string
		Options               []string
		Path                  []string `json:",omitempty"`
	}
	cs := make([]canon, len(fields))
	for i, f := range fields {
		cs[i] = canon{f.ID, f.DisplayName, f.Type, f.Options, f.Path}
	}
	b, _ := json.Marshal(cs) // cannot fail: strings only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
