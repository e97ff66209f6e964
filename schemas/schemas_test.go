package schemas_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

func TestTypeMapping(t *testing.T) {
	cases := []struct {
		svc  string
		want arrow.DataType
	}{
		{"int", arrow.PrimitiveTypes.Int64},
		{"float", arrow.PrimitiveTypes.Float64},
		{"percent", arrow.PrimitiveTypes.Float64},
		{"string", arrow.BinaryTypes.String},
		{"picklist", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
		{"date", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}
	for _, tc := range cases {
		t.Run(tc.svc, func(t *testing.T) {
			s, err := schemas.FromDescribe("obj", []service.Field{{ID: "f", DisplayName: "F", Type: tc.svc}})
			if err != nil {
				t.Fatal(err)
			}
			f := s.Field(0)
			if !arrow.TypeEqual(f.Type, tc.want) {
				t.Errorf("type = %s, want %s", f.Type, tc.want)
			}
			if !f.Nullable {
				t.Error("every column must be nullable")
			}
			if got := schemas.ServiceType(f); got != tc.svc {
				t.Errorf("service type metadata = %q", got)
			}
		})
	}
}

func TestUnknownType(t *testing.T) {
	_, err := schemas.FromDescribe("course", []service.Field{{ID: "ok", Type: "int"}, {ID: "weird", Type: "currency"}})
	var ute *schemas.UnknownTypeError
	if !errors.As(err, &ute) || !errors.Is(err, schemas.ErrUnknownType) {
		t.Fatalf("err = %v, want *UnknownTypeError", err)
	}
	if ute.Object != "course" || ute.Field != "weird" || ute.Type != "currency" {
		t.Errorf("error does not name object, field and type: %+v", ute)
	}
	want := `object "course" field "weird": unknown field type "currency" (known: int, float, percent, string, picklist, date)`
	if err.Error() != want {
		t.Errorf("message = %q\nwant      %q", err.Error(), want)
	}
}

func TestBadFieldIDs(t *testing.T) {
	for name, fields := range map[string][]service.Field{
		"empty id":  {{ID: "", DisplayName: "Nameless", Type: "int"}},
		"duplicate": {{ID: "a", Type: "int"}, {ID: "a", Type: "string"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := schemas.FromDescribe("o", fields)
			var fe *schemas.FieldError
			if !errors.As(err, &fe) || fe.Object != "o" {
				t.Fatalf("err = %v, want *FieldError naming object o", err)
			}
		})
	}
}

func TestRoundTripAndMetadata(t *testing.T) {
	fields := []service.Field{
		{ID: "curriculumTitle", DisplayName: "Curriculum", Type: "string"},
		{ID: "courseCount", DisplayName: "Courses", Type: "int"},
		{ID: "status", DisplayName: "Status", Type: "picklist", Options: []string{"Draft", "Published"}},
		{ID: "startPercentage", DisplayName: "Started %", Type: "percent"},
		{ID: "due", DisplayName: "Due", Type: "date"},
	}
	s, err := schemas.FromDescribe("curriculum", fields)
	if err != nil {
		t.Fatal(err)
	}
	if schemas.Object(s) != "curriculum" {
		t.Errorf("object metadata = %q", schemas.Object(s))
	}
	if schemas.SchemaVersion(s) != schemas.Version(fields) || len(schemas.SchemaVersion(s)) != 16 {
		t.Errorf("version metadata = %q", schemas.SchemaVersion(s))
	}
	if got := schemas.Options(s.Field(2)); !reflect.DeepEqual(got, []string{"Draft", "Published"}) {
		t.Errorf("options = %v", got)
	}
	back, err := schemas.ToDescribe(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, fields) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, fields)
	}
}

func TestVersionChangesWithDescribe(t *testing.T) {
	a := []service.Field{{ID: "x", Type: "int"}}
	b := []service.Field{{ID: "x", Type: "float"}}
	c := []service.Field{{ID: "x", Type: "int"}, {ID: "y", Type: "string"}}
	d := []service.Field{{ID: "p", Type: "picklist", Options: []string{"a"}}}
	e := []service.Field{{ID: "p", Type: "picklist", Options: []string{"a", "b"}}}
	seen := map[string]bool{}
	for _, f := range [][]service.Field{a, b, c, d, e} {
		v := schemas.Version(f)
		if seen[v] {
			t.Fatalf("two different describes share version %s", v)
		}
		seen[v] = true
	}
	if schemas.Version(a) != schemas.Version([]service.Field{{ID: "x", Type: "int"}}) {
		t.Error("version is not stable")
	}
}

// TestFromDescribeWithoutFields: a describe that lists no fields gives no
// schema, with ErrNoFields naming the object.
func TestFromDescribeWithoutFields(t *testing.T) {
	for _, fs := range [][]service.Field{nil, {}} {
		s, err := schemas.FromDescribe("course", fs)
		if s != nil || !errors.Is(err, schemas.ErrNoFields) || !strings.Contains(err.Error(), `object "course"`) {
			t.Errorf("FromDescribe(%v) = %v, %v; want ErrNoFields naming the object", fs, s, err)
		}
	}
}

// TestTypesTable: every type has a name, an Arrow type, a way to be read,
// a DuckDB and an Iceberg type; names and DuckDB names (with aliases) are
// unique to one type (percent and picklist share float's and string's
// columns); Widen gives a type of the table for every pair, the same
// either way, and a column of either fits the result.
func TestTypesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, ty := range schemas.Types {
		if ty.Name == "" || ty.Arrow == nil || ty.Value == 0 || ty.DuckDB == "" || ty.Iceberg == "" || seen[ty.Name] {
			t.Errorf("type %+v: incomplete or twice", ty)
		}
		seen[ty.Name] = true
		back, ok := schemas.TypeOfDuckDB(ty.DuckDB)
		if !ok || back.DuckDB != ty.DuckDB || back.Arrow.ID() != ty.Arrow.ID() && ty.Name != service.TypePicklist {
			t.Errorf("type %s: its DuckDB type %s reads back as %+v", ty.Name, ty.DuckDB, back)
		}
		if a, ok := schemas.ArrowType(ty.Name); ok != ty.Describe || ok && !arrow.TypeEqual(a, ty.Arrow) {
			t.Errorf("type %s: ArrowType %v %v, the table says describe %v, %v", ty.Name, a, ok, ty.Describe, ty.Arrow)
		}
		for _, other := range schemas.Types {
			w := schemas.Widen(ty.Name, other.Name)
			if w != schemas.Widen(other.Name, ty.Name) {
				t.Errorf("schemas.Widen(%s, %s) = %s, the other way %s", ty.Name, other.Name, w, schemas.Widen(other.Name, ty.Name))
			}
			if _, ok := schemas.TypeNamed(w); !ok {
				t.Errorf("schemas.Widen(%s, %s) = %s: not a type of the table", ty.Name, other.Name, w)
			}
		}
	}
	if w := schemas.Widen(service.TypeBool, service.TypeInt); w != service.TypeString {
		t.Errorf("boolean and int widen to %s; docs/warehouse.md says string", w)
	}
}
