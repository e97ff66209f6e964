package extract

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/service"
)

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	when := time.Date(2019, 8, 24, 16, 15, 22, 0, time.FixedZone("CEST", 2*3600))
	q := Query{
		Page:           1,
		ResultsPerPage: 500,
		Filters: []Filter{
			Eq("curriculumTitle", "Onboarding"),
			Be("courseCount", 1, 10),
			In("status", "active", "archived"),
			Ge("completedAt", when),
			Lt("startPercentage", 99.5),
		},
		Fields: []string{"curriculumTitle", "courseCount"},
		Sort:   &Sort{Field: "curriculumTitle", Direction: "asc"},
	}
	enc, err := q.Encode()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("not standard Base64: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(`{
		"page":1,"resultsPerPage":500,
		"filters":[
			{"field":"curriculumTitle","operator":"eq","values":["Onboarding"]},
			{"field":"courseCount","operator":"be","values":[1,10]},
			{"field":"status","operator":"in","values":["active","archived"]},
			{"field":"completedAt","operator":"ge","values":["2019-08-24T14:15:22Z"]},
			{"field":"startPercentage","operator":"lt","values":[99.5]}
		],
		"fields":["curriculumTitle","courseCount"],
		"sort":{"field":"curriculumTitle","direction":"asc"}}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n got %v\nwant %v", got, want)
	}
	// and back into a Query
	var back wireQuery
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Page != q.Page || back.ResultsPerPage != q.ResultsPerPage || !slices.Equal(back.Fields, q.Fields) || *back.Sort != *q.Sort || len(back.Filters) != 5 {
		t.Fatalf("round trip %+v", back)
	}
}

func TestEncodeOmitsEmpty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{}, `{}`},
		{Query{Page: 2}, `{"page":2}`},
		{Query{Fields: []string{}}, `{}`},
		{Query{Sort: &Sort{Field: "a"}}, `{"sort":{"field":"a"}}`},
	} {
		enc, err := tc.q.Encode()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.StdEncoding.DecodeString(enc)
		if string(raw) != tc.want {
			t.Errorf("%+v encodes %s, want %s", tc.q, raw, tc.want)
		}
	}
	if _, err := (Query{Filters: []Filter{Eq("x", math.NaN())}}).Encode(); err == nil {
		t.Error("NaN encoded")
	}
}

var testFields = []service.Field{
	{ID: "s", Type: service.TypeString},
	{ID: "i", Type: service.TypeInt},
	{ID: "f", Type: service.TypeFloat},
	{ID: "p", Type: service.TypePercent},
	{ID: "d", Type: service.TypeDate},
	{ID: "k", Type: service.TypePicklist, Options: []string{"red", "green"}},
	{ID: "b", Type: "boolean"},
}

// goodValue is a value that fits each type.
var goodValue = map[string]any{
	service.TypeString:   "abc",
	service.TypeInt:      int64(3),
	service.TypeFloat:    2.5,
	service.TypePercent:  float32(40),
	service.TypeDate:     "2024-01-31",
	service.TypePicklist: "red",
}

// allowed is the interface's operator table, written out independently of
// the implementation's.
var allowed = map[string][]string{
	"eq": {"string", "int", "float", "percent", "date"},
	"ne": {"string", "int", "float", "percent", "date"},
	"co": {"string"}, "bw": {"string"}, "nc": {"string"},
	"in": {"picklist"},
	"lt": {"int", "float", "percent", "date"}, "le": {"int", "float", "percent", "date"},
	"gt": {"int", "float", "percent", "date"}, "ge": {"int", "float", "percent", "date"},
	"be": {"int", "float", "percent", "date"}, "nb": {"int", "float", "percent", "date"},
}

var arity = map[string]int{"eq": 1, "ne": 1, "co": 1, "bw": 1, "nc": 1, "in": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "be": 2, "nb": 2}

func TestValidateOperatorTypeTable(t *testing.T) {
	t.Parallel()
	for op, ok := range allowed {
		for _, f := range testFields[:6] {
			vals := make([]any, arity[op])
			for i := range vals {
				vals[i] = goodValue[f.Type]
			}
			q := Query{Filters: []Filter{{Field: f.ID, Operator: op, Values: vals}}}
			err := q.Validate(testFields)
			want := slices.Contains(ok, f.Type)
			if want && err != nil {
				t.Errorf("%s on %s: unexpected error %v", op, f.Type, err)
			}
			if !want {
				var qe *QueryError
				if !errors.As(err, &qe) || qe.Field != f.ID || qe.Operator != op || !strings.Contains(err.Error(), "not allowed") {
					t.Errorf("%s on %s: err = %v, want *QueryError naming field and operator", op, f.Type, err)
				}
			}
			if !want {
				continue
			}
			// wrong value counts
			for _, n := range []int{0, 1, 2, 3} {
				if n == arity[op] || (op == "in" && n >= 1) {
					continue
				}
				vs := make([]any, n)
				for i := range vs {
					vs[i] = goodValue[f.Type]
				}
				err := Query{Filters: []Filter{{Field: f.ID, Operator: op, Values: vs}}}.Validate(testFields)
				var qe *QueryError
				if !errors.As(err, &qe) || qe.Field != f.ID || qe.Operator != op || !strings.Contains(qe.Reason, "value") {
					t.Errorf("%s on %s with %d values: err = %v", op, f.Type, n, err)
				}
			}
		}
	}
	// the non-filterable type takes no operator
	for op := range allowed {
		if err := (Query{Filters: []Filter{{Field: "b", Operator: op, Values: []any{true, true}[:arity[op]]}}}).Validate(testFields); err == nil {
			t.Errorf("%s on boolean accepted", op)
		}
	}
}

func TestValidateValueTypes(t *testing.T) {
	t.Parallel()
	type myInt int
	type myString string
	good := map[string][]any{
		service.TypeString:   {"", "x", myString("y")},
		service.TypeInt:      {0, int8(1), uint64(2), myInt(3), 4.0, json.Number("5")},
		service.TypeFloat:    {1, 1.5, float32(2), json.Number("2.5")},
		service.TypePercent:  {0, 100, 33.3},
		service.TypeDate:     {"2024-01-31", "2024-01-31T10:00:00Z", "2024-01-31T10:00:00.123+02:00", time.Now()},
		service.TypePicklist: {"red", "green"},
	}
	bad := map[string][]any{
		service.TypeString:   {1, nil, true, []string{"x"}},
		service.TypeInt:      {"1", 1.5, nil, json.Number("1.5"), true},
		service.TypeFloat:    {"1.5", nil, math.Inf(1), math.NaN(), json.Number("x")},
		service.TypePercent:  {"50%", nil},
		service.TypeDate:     {"31/01/2024", "", 20240131, time.Time{}, nil},
		service.TypePicklist: {"blue", 1, nil},
	}
	op := map[string]string{service.TypeString: "eq", service.TypeInt: "eq", service.TypeFloat: "gt", service.TypePercent: "le", service.TypeDate: "ge", service.TypePicklist: "in"}
	id := map[string]string{service.TypeString: "s", service.TypeInt: "i", service.TypeFloat: "f", service.TypePercent: "p", service.TypeDate: "d", service.TypePicklist: "k"}
	for typ, vs := range good {
		for _, v := range vs {
			if err := (Query{Filters: []Filter{{id[typ], op[typ], []any{v}}}}).Validate(testFields); err != nil {
				t.Errorf("%s value %#v rejected: %v", typ, v, err)
			}
		}
	}
	for typ, vs := range bad {
		for _, v := range vs {
			err := Query{Filters: []Filter{{id[typ], op[typ], []any{v}}}}.Validate(testFields)
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Field != id[typ] || qe.Operator != op[typ] {
				t.Errorf("%s value %#v: err = %v, want *QueryError", typ, v, err)
			}
		}
	}
}

func TestValidateBuildersAndQueryKeys(t *testing.T) {
	t.Parallel()
	d := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := Query{
		Filters: []Filter{
			Eq("s", "a"), Ne("i", 1), Co("s", "a"), Bw("s", "a"), Nc("s", "a"), In("k", "red", "green"),
			Lt("f", 1.5), Le("p", 50), Gt("d", d), Ge("d", "2024-01-01"), Be("i", 1, 9), Nb("d", d, d.AddDate(0, 1, 0)),
		},
		Fields: []string{"s", "i"},
		Sort:   &Sort{Field: "d", Direction: "desc"},
	}
	if err := ok.Validate(testFields); err != nil {
		t.Fatal(err)
	}
	bad := Query{
		Page:    -1,
		Filters: []Filter{Eq("nope", 1), {Field: "s", Operator: "like", Values: []any{"x"}}, In("k")},
		Fields:  []string{"s", "ghost"},
		Sort:    &Sort{Field: "ghost", Direction: "up"},
	}
	err := bad.Validate(testFields)
	for _, want := range []string{`"nope" eq: unknown field`, `"s" like: unknown operator`, `"k" in: needs at least 1 value`, `"ghost": unknown field in fields`, `unknown sort field`, `sort direction "up"`, `page -1`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %s", err, want)
		}
	}
	var qe *QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("err = %v, want *QueryError inside", err)
	}
}
