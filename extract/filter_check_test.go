package extract

import (
	"errors"
	"slices"
	"testing"

	"github.com/sepipe/sepipe/service"
)

func TestCheckFilter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		f      Filter
		part   string // "" when the filter passes
		reason string
	}{
		{"eq", Eq("status", "Active"), "", ""},
		{"in", In("status", "Active", "Inactive"), "", ""},
		{"be", Be("n", 1, 2), "", ""},
		{"no field", Filter{Operator: "eq", Values: []any{1}}, "field", "is required"},
		{"unknown operator", Filter{"s", "like", []any{"x"}}, "operator", `unknown operator "like" (want eq, ne, co, bw, nc, in, lt, le, gt, ge, be or nb)`},
		{"in without values", In("status"), "values", "operator in needs at least one value"},
		{"be with one value", Filter{"n", "be", []any{1}}, "values", "operator be takes 2 value(s), got 1"},
		{"eq with two values", Filter{"n", "eq", []any{1, 2}}, "values", "operator eq takes 1 value(s), got 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFilter(tc.f)
			var fe *FilterError
			switch {
			case tc.part == "" && err != nil:
				t.Fatalf("CheckFilter: %v", err)
			case tc.part == "":
			case !errors.As(err, &fe):
				t.Fatalf("err = %v, want a *FilterError", err)
			case fe.Part != tc.part || fe.Reason != tc.reason:
				t.Errorf("part %q reason %q, want %q %q", fe.Part, fe.Reason, tc.part, tc.reason)
			}
		})
	}
}

// TestCheckFilterAgreesWithValidate: a filter CheckFilter passes fails
// Query.Validate only for what needs the describe.
func TestCheckFilterAgreesWithValidate(t *testing.T) {
	t.Parallel()
	fields := []service.Field{{ID: "n", Type: service.TypeInt}}
	for op, rule := range operators {
		if !slices.Contains(rule.types, service.TypeInt) {
			continue
		}
		for n := 0; n <= 3; n++ {
			f := Filter{Field: "n", Operator: op, Values: make([]any, n)}
			for i := range f.Values {
				f.Values[i] = i
			}
			checked := CheckFilter(f) == nil
			valid := Query{Filters: []Filter{f}}.Validate(fields) == nil
			if checked != valid {
				t.Errorf("%s with %d values: CheckFilter ok %v, Validate ok %v", op, n, checked, valid)
			}
		}
	}
}
