package extract

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sepipe/sepipe/service"
)

// Sort orders results by one field; Direction is "asc" or "desc".
type Sort struct {
	Field     string `json:"field"`
	Direction string `json:"direction,omitempty"`
}

// Filter is one condition of a Query. Build it with Eq, Ne, Co, Bw, Nc,
// In, Lt, Le, Gt, Ge, Be or Nb.
type Filter struct {
	Field    string `json:"field"`
	Operator string `json:"operator"`
	Values   []any  `json:"values"`
}

// Query is the `parameters` document of a results request. Zero values
// are left out, so the service applies its defaults.
type Query struct {
	Page           int      // 1-based; 0 leaves it to the service (ReadObject sets it)
	ResultsPerPage int      // 0 leaves it to the service (ReadObject uses the client's page size)
	Filters        []Filter // all must hold
	Fields         []string // field ids to return; empty means the service's default
	Sort           *Sort
}

// Eq: field equals v (string, int, float, percent, date).
func Eq(field string, v any) Filter { return Filter{field, "eq", []any{v}} }

// Ne: field differs from v (string, int, float, percent, date).
func Ne(field string, v any) Filter { return Filter{field, "ne", []any{v}} }

// Co: string field contains s.
func Co(field, s string) Filter { return Filter{field, "co", []any{s}} }

// Bw: string field begins with s.
func Bw(field, s string) Filter { return Filter{field, "bw", []any{s}} }

// Nc: string field does not contain s.
func Nc(field, s string) Filter { return Filter{field, "nc", []any{s}} }

// In: picklist field is one of options (at least one).
func In(field string, options ...string) Filter {
	vs := make([]any, len(options))
	for i, o := range options {
		vs[i] = o
	}
	return Filter{field, "in", vs}
}

// Lt: field < v (int, float, percent, date).
func Lt(field string, v any) Filter { return Filter{field, "lt", []any{v}} }

// Le: field <= v (int, float, percent, date).
func Le(field string, v any) Filter { return Filter{field, "le", []any{v}} }

// Gt: field > v (int, float, percent, date).
func Gt(field string, v any) Filter { return Filter{field, "gt", []any{v}} }

// Ge: field >= v (int, float, percent, date).
func Ge(field string, v any) Filter { return Filter{field, "ge", []any{v}} }

// Be: lo <= field <= hi (int, float, percent, date).
func Be(field string, lo, hi any) Filter { return Filter{field, "be", []any{lo, hi}} }

// Nb: field outside [lo, hi] (int, float, percent, date).
func Nb(field string, lo, hi any) Filter { return Filter{field, "nb", []any{lo, hi}} }

// operatorRule is one row of the interface's operator table.
type operatorRule struct {
	types []string
	n     int // exact number of values; -1 means at least one
}

var (
	ordered   = []string{service.TypeInt, service.TypeFloat, service.TypePercent, service.TypeDate}
	equatable = []string{service.TypeString, service.TypeInt, service.TypeFloat, service.TypePercent, service.TypeDate}
	operators = map[string]operatorRule{
		"eq": {equatable, 1},
		"ne": {equatable, 1},
		"co": {[]string{service.TypeString}, 1},
		"bw": {[]string{service.TypeString}, 1},
		"nc": {[]string{service.TypeString}, 1},
		"in": {[]string{service.TypePicklist}, -1},
		"lt": {ordered, 1},
		"le": {ordered, 1},
		"gt": {ordered, 1},
		"ge": {ordered, 1},
		"be": {ordered, 2},
		"nb": {ordered, 2},
	}
)

// Validate checks q against the object's fields (from Describe): every
// filter names a known field, uses an operator allowed for the field's
// type, has the right number of values (in: at least 1; be, nb: 2; others:
// 1) of a Go type that fits the field type; Fields and Sort name known
// fields. Value types: string and picklist take strings (a picklist value
// must be one of the field's options when the service lists them); int
// takes Go integers (or integral floats); float and percent take any Go
// number; date takes a non-zero time.Time or a string in 2006-01-02 or
// RFC 3339 form. All problems are returned, each as a *QueryError.
func (q Query) Validate(fields []service.Field) error {
	byID := make(map[string]service.Field, len(fields))
	for _, f := range fields {
		byID[f.ID] = f
	}
	var errs []error
	bad := func(field, op, format string, args ...any) {
		errs = append(errs, &QueryError{Field: field, Operator: op, Reason: fmt.Sprintf(format, args...)})
	}
	if q.Page < 0 {
		bad("", "", "page %d is negative", q.Page)
	}
	if q.ResultsPerPage < 0 {
		bad("", "", "resultsPerPage %d is negative", q.ResultsPerPage)
	}
	for _, f := range q.Filters {
		fd, ok := byID[f.Field]
		if !ok {
			bad(f.Field, f.Operator, "unknown field")
			continue
		}
		rule, ok := operators[f.Operator]
		if !ok {
			bad(f.Field, f.Operator, "unknown operator (want one of eq, ne, co, bw, nc, in, lt, le, gt, ge, be, nb)")
			continue
		}
		if !slices.Contains(rule.types, fd.Type) {
			bad(f.Field, f.Operator, "operator not allowed for a %s field (allowed for %s)", fd.Type, strings.Join(rule.types, ", "))
			continue
		}
		switch {
		case rule.n < 0 && len(f.Values) == 0:
			bad(f.Field, f.Operator, "needs at least 1 value, got 0")
			continue
		case rule.n >= 0 && len(f.Values) != rule.n:
			bad(f.Field, f.Operator, "needs exactly %d value(s), got %d", rule.n, len(f.Values))
			continue
		}
		for i, v := range f.Values {
			if reason := checkValue(fd, v); reason != "" {
				bad(f.Field, f.Operator, "value %d (%T): %s", i+1, v, reason)
			}
		}
	}
	for _, id := range q.Fields {
		if _, ok := byID[id]; !ok {
			bad(id, "", "unknown field in fields")
		}
	}
	if q.Sort != nil {
		if _, ok := byID[q.Sort.Field]; !ok {
			bad(q.Sort.Field, "", "unknown sort field")
		}
		if d := q.Sort.Direction; d != "" && d != "asc" && d != "desc" {
			bad(q.Sort.Field, "", "sort direction %q is neither asc nor desc", d)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// checkValue returns why v does not fit the field, or "".
func checkValue(f service.Field, v any) string {
	switch f.Type {
	case service.TypeString:
		if _, ok := asString(v); !ok {
			return "want a string"
		}
	case service.TypePicklist:
		s, ok := asString(v)
		if !ok {
			return "want a string option"
		}
		if len(f.Options) > 0 && !slices.Contains(f.Options, s) {
			return fmt.Sprintf("%q is not one of the field's options", s)
		}
	case service.TypeInt:
		x, isInt, ok := asNumber(v)
		if !ok || (!isInt && x != math.Trunc(x)) {
			return "want an integer"
		}
	case service.TypeFloat, service.TypePercent:
		if _, _, ok := asNumber(v); !ok {
			return "want a finite number"
		}
	case service.TypeDate:
		switch d := v.(type) {
		case time.Time:
			if d.IsZero() {
				return "want a non-zero time"
			}
		case string:
			if _, err := time.Parse(time.DateOnly, d); err == nil {
				return ""
			}
			if _, err := time.Parse(time.RFC3339Nano, d); err == nil {
				return ""
			}
			return "want a date as 2006-01-02 or RFC 3339"
		default:
			return "want a time.Time or a date string"
		}
	default:
		return fmt.Sprintf("field type %q is not filterable", f.Type)
	}
	return ""
}

func asString(v any) (string, bool) {
	if v == nil {
		return "", false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.String {
		return "", false
	}
	return rv.String(), true
}

// asNumber accepts Go numbers and json.Number; isInt reports an integer
// kind.
func asNumber(v any) (x float64, isInt, ok bool) {
	if n, is := v.(json.Number); is {
		if _, err := n.Int64(); err == nil {
			return 0, true, true
		}
		f, err := n.Float64()
		return f, false, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	if v == nil {
		return 0, false, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 0, true, true
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		return f, false, !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false, false
}

// wireQuery is the JSON document; empty keys are omitted.
type wireQuery struct {
	Page           int      `json:"page,omitempty"`
	ResultsPerPage int      `json:"resultsPerPage,omitempty"`
	Filters        []Filter `json:"filters,omitempty"`
	Fields         []string `json:"fields,omitempty"`
	Sort           *Sort    `json:"sort,omitempty"`
}

// document returns the `parameters` document before Base64. time.Time values
// are written in RFC 3339, UTC.
func (q Query) document() ([]byte, error) {
	w := wireQuery{Page: q.Page, ResultsPerPage: q.ResultsPerPage, Fields: q.Fields, Sort: q.Sort}
	if len(q.Filters) > 0 {
		w.Filters = make([]Filter, len(q.Filters))
		for i, f := range q.Filters {
			vs := make([]any, len(f.Values))
			for j, v := range f.Values {
				if t, ok := v.(time.Time); ok {
					v = t.UTC().Format(time.RFC3339)
				}
				vs[j] = v
			}
			w.Filters[i] = Filter{Field: f.Field, Operator: f.Operator, Values: vs}
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("extract: encoding query: %w", err)
	}
	return b, nil
}

// Encode returns the value of the `parameters` query parameter: the
// Base64 (standard encoding) of the JSON document {page, resultsPerPage,
// filters, fields, sort} with empty keys omitted. It does not validate; use
// Validate for that.
func (q Query) Encode() (string, error) {
	b, err := q.document()
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
