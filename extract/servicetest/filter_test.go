package servicetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The expected results below are computed by this file's own reading of
// the documented semantics (docs/service-shapes.md), over rows read back
// through HTTP, independently of the fake's filter code.

// oracle reports whether the JSON value v of a field of type typ satisfies
// op with operands vals (as sent in the request).
func oracle(t *testing.T, typ, op string, v any, vals []any) bool {
	if v == nil {
		return false // nulls match no filter
	}
	switch typ {
	case "int", "float", "percent":
		x, err := v.(json.Number).Float64()
		if err != nil {
			t.Fatal(err)
		}
		n := func(i int) float64 { return toFloat(vals[i]) }
		switch op {
		case "eq":
			return x == n(0)
		case "ne":
			return x != n(0)
		case "lt":
			return x < n(0)
		case "le":
			return x <= n(0)
		case "gt":
			return x > n(0)
		case "ge":
			return x >= n(0)
		case "be":
			return n(0) <= x && x <= n(1)
		case "nb":
			return !(n(0) <= x && x <= n(1))
		}
	case "date":
		x, err := time.Parse(time.RFC3339, v.(string))
		if err != nil {
			t.Fatal(err)
		}
		// from and to bound the operand: one instant, or a whole UTC day.
		bound := func(i int) (from, to time.Time) {
			s := vals[i].(string)
			if d, err := time.Parse(time.DateOnly, s); err == nil {
				return d, d.AddDate(0, 0, 1).Add(-time.Millisecond)
			}
			d, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatal(err)
			}
			return d, d
		}
		from, to := bound(0)
		in := !x.Before(from) && !x.After(to)
		switch op {
		case "eq":
			return in
		case "ne":
			return !in
		case "lt":
			return x.Before(from)
		case "le":
			return !x.After(to)
		case "gt":
			return x.After(to)
		case "ge":
			return !x.Before(from)
		case "be", "nb":
			_, to2 := bound(1)
			b := !x.Before(from) && !x.After(to2)
			return b == (op == "be")
		}
	case "string":
		s, a := v.(string), vals[0].(string)
		switch op {
		case "eq":
			return s == a
		case "ne":
			return s != a
		case "co":
			return strings.Contains(strings.ToLower(s), strings.ToLower(a))
		case "bw":
			return strings.HasPrefix(strings.ToLower(s), strings.ToLower(a))
		case "nc":
			return !strings.Contains(strings.ToLower(s), strings.ToLower(a))
		}
	case "picklist":
		return slices.Contains(vals, any(v.(string)))
	}
	t.Fatalf("oracle: no rule for %s on %s", op, typ)
	return false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	panic(fmt.Sprintf("not a number: %T", v))
}

// sortedValues returns the distinct non-null values of field in rows,
// sorted (numbers numerically, strings bytewise).
func sortedValues(rows []row, field string) []any {
	var out []any
	seen := map[string]bool{}
	for _, r := range rows {
		v := r[field]
		if v == nil || seen[fmt.Sprint(v)] {
			continue
		}
		seen[fmt.Sprint(v)] = true
		if n, ok := v.(json.Number); ok {
			f, _ := n.Float64()
			out = append(out, f)
		} else {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b any) int {
		if fa, ok := a.(float64); ok {
			return int(sign(fa - b.(float64)))
		}
		return strings.Compare(a.(string), b.(string))
	})
	return out
}

func sign(f float64) float64 {
	switch {
	case f < 0:
		return -1
	case f > 0:
		return 1
	}
	return 0
}

func TestFilterOperators(t *testing.T) {
	srv := newTestServer(t, WithUsers(60))
	const obj = "userCourseProgress"
	all := fetchAll(t, srv, obj, nil, 1000)
	if len(all) < 480 {
		t.Fatalf("only %d rows", len(all))
	}
	// One field per type; score and completedDate hold nulls.
	fields := map[string]string{
		"int": "timeSpentMinutes", "string": "courseTitle", "picklist": "status",
		"float": "score", "percent": "progressPercentage", "date": "completedDate",
	}
	// Operand choices per type, drawn from the data: the median value for
	// single-value operators, the quartiles for be and nb.
	operands := func(typ, op string) [][]any {
		vals := sortedValues(all, fields[typ])
		med, q1, q3 := vals[len(vals)/2], vals[len(vals)/4], vals[3*len(vals)/4]
		switch typ {
		case "int":
			i := func(v any) any { return int64(v.(float64)) }
			med, q1, q3 = i(med), i(q1), i(q3)
		case "string":
			title := med.(string)
			switch op {
			case "co", "nc":
				word := slices.MaxFunc(strings.Fields(title), func(a, b string) int { return len(a) - len(b) })
				return [][]any{{strings.ToUpper(word[1 : len(word)-1])}} // case-insensitive
			case "bw":
				return [][]any{{strings.ToLower(title[:5])}}
			}
		case "picklist":
			return [][]any{{"Completed"}, {"Overdue", "Not Started"}}
		case "date":
			day := func(v any) any { return v.(string)[:10] }
			if op == "be" || op == "nb" {
				return [][]any{{q1, q3}, {day(q1), day(q3)}}
			}
			return [][]any{{med}, {day(med)}}
		}
		if op == "be" || op == "nb" {
			return [][]any{{q1, q3}}
		}
		return [][]any{{med}}
	}
	for _, op := range operatorNames {
		for typ, field := range fields {
			if !slices.Contains(operators[op].types, typeByName(typ)) {
				continue
			}
			for _, vals := range operands(typ, op) {
				t.Run(fmt.Sprintf("%s/%s/%v", op, typ, vals), func(t *testing.T) {
					params := map[string]any{"filters": []any{
						map[string]any{"field": field, "operator": op, "values": vals}}}
					got := fetchAll(t, srv, obj, params, 97)
					var want []row
					for _, r := range all {
						if oracle(t, typ, op, r[field], vals) {
							want = append(want, r)
						}
					}
					if len(want) == 0 {
						t.Fatalf("test data chosen badly: no row satisfies %s %s %v", field, op, vals)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s %s %v: got %d rows, want %d", field, op, vals, len(got), len(want))
					}
				})
			}
		}
	}
}

func typeByName(name string) fieldType {
	for i, n := range typeNames {
		if n == name {
			return fieldType(i)
		}
	}
	panic(name)
}

func TestFiltersAreANDed(t *testing.T) {
	srv := newTestServer(t, WithUsers(40))
	all := fetchAll(t, srv, "userCourseProgress", nil, 1000)
	params := map[string]any{"filters": []any{
		map[string]any{"field": "status", "operator": "in", "values": []any{"Completed"}},
		map[string]any{"field": "score", "operator": "ge", "values": []any{80}},
	}}
	got := fetchAll(t, srv, "userCourseProgress", params, 1000)
	var want []row
	for _, r := range all {
		if r["status"] == "Completed" && r["score"] != nil && toFloat(r["score"]) >= 80 {
			want = append(want, r)
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
}

func TestNullMatchesNoFilter(t *testing.T) {
	srv := newTestServer(t, WithUsers(40))
	all := fetchAll(t, srv, "userCourseProgress", nil, 1000)
	nonNull := 0
	for _, r := range all {
		if r["score"] != nil {
			nonNull++
		}
	}
	if nonNull == len(all) {
		t.Fatal("no null scores in the data")
	}
	for _, f := range []map[string]any{
		{"field": "score", "operator": "ne", "values": []any{-1}},
		{"field": "score", "operator": "nb", "values": []any{-2, -1}},
	} {
		got := fetchAll(t, srv, "userCourseProgress", map[string]any{"filters": []any{f}}, 1000)
		if len(got) != nonNull {
			t.Errorf("%v: %d rows, want the %d non-null ones", f, len(got), nonNull)
		}
	}
}

func TestDisallowedOperators(t *testing.T) {
	srv := newTestServer(t, WithUsers(5))
	fields := map[fieldType]string{typeInt: "attempts", typeString: "userName", typePicklist: "status",
		typeFloat: "score", typePercent: "progressPercentage", typeDate: "dueDate"}
	n := 0
	for _, op := range operatorNames {
		for typ, field := range fields {
			if slices.Contains(operators[op].types, typ) {
				continue
			}
			n++
			t.Run(op+"/"+typ.String(), func(t *testing.T) {
				count := max(operators[op].n, 1)
				vals := make([]any, count)
				for i := range vals {
					vals[i] = "x"
				}
				params := map[string]any{"filters": []any{map[string]any{"field": field, "operator": op, "values": vals}}}
				status, body := get(t, srv, paramsPath(t, "userCourseProgress", params))
				if status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %s", status, body)
				}
				_, _, msg := errorResponse(t, body)
				want := fmt.Sprintf("operator %q is not allowed on field %q of type %s", op, field, typ)
				if !strings.Contains(msg, want) {
					t.Fatalf("message %q does not say %q", msg, want)
				}
			})
		}
	}
	if n != 72-38 {
		t.Fatalf("%d disallowed combinations, want 34", n)
	}
}

func TestBadParameters(t *testing.T) {
	srv := newTestServer(t, WithUsers(5))
	filter := func(field, op string, vals ...any) map[string]any {
		if vals == nil {
			vals = []any{}
		}
		return map[string]any{"filters": []any{map[string]any{"field": field, "operator": op, "values": vals}}}
	}
	cases := []struct {
		name   string
		params any // JSON-encoded unless a string, which is sent as the raw query
		want   string
	}{
		// value counts
		{"in with no values", filter("status", "in"), `needs at least 1 value, got 0`},
		{"be with 1 value", filter("attempts", "be", 1), `operator "be" on field "attempts" needs exactly 2 value(s), got 1`},
		{"nb with 3 values", filter("attempts", "nb", 1, 2, 3), `needs exactly 2 value(s), got 3`},
		{"eq with 0 values", filter("attempts", "eq"), `needs exactly 1 value(s), got 0`},
		{"eq with 2 values", filter("attempts", "eq", 1, 2), `needs exactly 1 value(s), got 2`},
		{"lt with 2 values", filter("score", "lt", 1, 2), `needs exactly 1 value(s), got 2`},
		{"co with 2 values", filter("userName", "co", "a", "b"), `needs exactly 1 value(s), got 2`},
		{"values missing", map[string]any{"filters": []any{map[string]any{"field": "attempts", "operator": "eq"}}}, `got 0`},
		// value types
		{"int as string", filter("attempts", "eq", "1"), `must be a JSON number, got string`},
		{"int not integral", filter("attempts", "eq", 1.5), `must be an integral number`},
		{"float as string", filter("score", "gt", "80"), `must be a JSON number, got string`},
		{"percent as bool", filter("progressPercentage", "gt", true), `must be a JSON number, got boolean`},
		{"string as number", filter("userName", "eq", 5), `must be a JSON string, got number`},
		{"string as null", filter("userName", "eq", nil), `must be a JSON string, got null`},
		{"date as number", filter("dueDate", "lt", 20261001), `must be a JSON string, got number`},
		{"date unparsable", filter("dueDate", "lt", "yesterday"), `must be YYYY-MM-DD or an ISO 8601`},
		{"picklist as number", filter("status", "in", 1), `must be a JSON string, got number`},
		{"picklist unknown option", filter("status", "in", "Done"), `"Done" is not an option of picklist field "status"`},
		{"value is an object", filter("score", "eq", map[string]any{}), `got object`},
		// unknown names
		{"unknown filter field", filter("nope", "eq", 1), `unknown field "nope" in filters`},
		{"unknown projection field", map[string]any{"fields": []any{"userId", "nope"}}, `unknown field "nope" in fields`},
		{"duplicate projection field", map[string]any{"fields": []any{"userId", "userId"}}, `listed twice`},
		{"unknown sort field", map[string]any{"sort": map[string]any{"field": "nope"}}, `unknown field "nope" in sort`},
		{"sort without field", map[string]any{"sort": map[string]any{"direction": "asc"}}, `sort.field is required`},
		{"unknown operator", filter("attempts", "gte", 1), `unknown operator "gte" on field "attempts"`},
		{"missing operator", map[string]any{"filters": []any{map[string]any{"field": "attempts", "values": []any{1}}}}, `operator is required`},
		{"bad direction", map[string]any{"sort": map[string]any{"field": "attempts", "direction": "up"}}, `sort direction "up"`},
		{"upper-case direction", map[string]any{"sort": map[string]any{"field": "attempts", "direction": "DESC"}}, `sort direction "DESC"`},
		// paging
		{"page 0", map[string]any{"page": 0}, `page must be at least 1, got 0`},
		{"page -3", map[string]any{"page": -3}, `page must be at least 1`},
		{"page string", map[string]any{"page": "2"}, `page must be an integer`},
		{"page fraction", map[string]any{"page": 1.5}, `page must be an integer`},
		{"resultsPerPage 0", map[string]any{"resultsPerPage": 0}, `resultsPerPage must be between 1 and 1000, got 0`},
		{"resultsPerPage 1001", map[string]any{"resultsPerPage": 1001}, `resultsPerPage must be between 1 and 1000, got 1001`},
		// document shape
		{"unknown key", map[string]any{"pageSize": 10}, `unknown key "pageSize"`},
		{"unknown filter key", map[string]any{"filters": []any{map[string]any{"field": "attempts", "operator": "eq", "values": []any{1}, "op": "x"}}}, `unknown key "op"`},
		{"filters not a list", map[string]any{"filters": map[string]any{}}, `"filters" has the wrong JSON type`},
		{"fields not strings", map[string]any{"fields": []any{1}}, `wrong JSON type`},
		{"top level array", []any{1}, `must be a JSON object`},
		// raw query strings
		{"malformed base64", "parameters=%21%21%21", `not valid Base64`},
		{"malformed JSON", "parameters=" + b64(`{"page":`), `truncated JSON`},
		{"JSON syntax", "parameters=" + b64(`{"page" 1}`), `not valid JSON`},
		{"trailing data", "parameters=" + b64(`{"page":1} {}`), `data after the JSON object`},
		{"empty parameters", "parameters=", `parameters is empty`},
		{"parameters twice", "parameters=" + b64(`{}`) + "&parameters=" + b64(`{}`), `given 2 times`},
		{"other query parameter", "page=2", `unknown query parameter "page"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if raw, ok := c.params.(string); ok {
				path = "/objects/userCourseProgress?" + raw
			} else {
				path = paramsPath(t, "userCourseProgress", c.params)
			}
			status, body := get(t, srv, path)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", status, body)
			}
			code, _, msg := errorResponse(t, body)
			if code < 2000 || code > 2999 {
				t.Errorf("code %d is not a 2xxx parameter error", code)
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("message %q does not contain %q", msg, c.want)
			}
		})
	}
}

func TestBase64Variants(t *testing.T) {
	srv := newTestServer(t, WithUsers(5))
	// ">>>" and "???" in the values give '+' and '/' (or '-' and '_') in
	// the encodings, and the length leaves padding.
	doc := `{"resultsPerPage":3,"filters":[{"field":"userName","operator":"nc","values":[">>>???"]}]}`
	var first []byte
	for _, enc := range []struct {
		name string
		s    string
	}{
		{"std padded", stdB64(doc)},
		{"std raw", strings.TrimRight(stdB64(doc), "=")},
		{"url padded", urlB64(doc)},
		{"url raw", strings.TrimRight(urlB64(doc), "=")},
	} {
		t.Run(enc.name, func(t *testing.T) {
			status, body := get(t, srv, "/objects/userCourseProgress?parameters="+escape(enc.s))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			if first == nil {
				first = body
			} else if string(body) != string(first) {
				t.Fatal("encodings gave different answers")
			}
		})
	}
	if !strings.ContainsAny(stdB64(doc), "+/") || !strings.HasSuffix(stdB64(doc), "=") {
		t.Fatalf("test document does not exercise the alphabets or padding: %s", stdB64(doc))
	}
}

func TestDefaultParameters(t *testing.T) {
	srv := newTestServer(t)
	status, body := get(t, srv, "/objects/userCourseProgress")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	r := decodeResults(t, body)
	if r.Page != 1 || r.ResultsPerPage != 100 || len(r.Results) != 100 {
		t.Fatalf("defaults: page %d, resultsPerPage %d, %d rows", r.Page, r.ResultsPerPage, len(r.Results))
	}
	// {} is the same as no parameters.
	status, body2 := get(t, srv, "/objects/userCourseProgress?parameters="+b64(`{}`))
	if status != http.StatusOK || string(body2) != string(body) {
		t.Fatalf("{} differs from no parameters")
	}
	// The maximum page size is accepted.
	if r := fetchPage(t, srv, "userCourseProgress", map[string]any{"resultsPerPage": 1000}); len(r.Results) != 1000 {
		t.Fatalf("resultsPerPage 1000 gave %d rows", len(r.Results))
	}
}
