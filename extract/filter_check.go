package extract

import "fmt"

// FilterError is a filter that no describe could make valid: a missing
// field, an unknown operator, or the wrong number of values for its
// operator. Part names the part at fault ("field", "operator" or
// "values"); Reason says why, as a config message can show it.
type FilterError struct {
	Field    string
	Operator string
	Part     string
	Reason   string
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("extract: filter %q %s: %s %s", e.Field, e.Operator, e.Part, e.Reason)
}

// CheckFilter checks what can be checked of f without the object's
// fields: a field is named, the operator is one of the interface's, and it
// has as many values as the operator takes (the operator table of
// Query.Validate). Query.Validate checks the rest against the describe.
func CheckFilter(f Filter) error {
	bad := func(part, format string, a ...any) error {
		return &FilterError{Field: f.Field, Operator: f.Operator, Part: part, Reason: fmt.Sprintf(format, a...)}
	}
	if f.Field == "" {
		return bad("field", "is required")
	}
	rule, ok := operators[f.Operator]
	switch {
	case !ok:
		return bad("operator", "unknown operator %q (want eq, ne, co, bw, nc, in, lt, le, gt, ge, be or nb)", f.Operator)
	case rule.n < 0 && len(f.Values) == 0:
		return bad("values", "operator %s needs at least one value", f.Operator)
	case rule.n >= 0 && len(f.Values) != rule.n:
		return bad("values", "operator %s takes %d value(s), got %d", f.Operator, rule.n, len(f.Values))
	}
	return nil
}
