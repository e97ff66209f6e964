package servicetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Query defaults and limits (the document leaves them "not shown").
const (
	defaultResultsPerPage = 100
	maxResultsPerPage     = 1000
)

// query is a validated `parameters` document, resolved against an object.
type query struct {
	page    int64
	perPage int
	filters []filter
	fields  []int // projection, positions in obj.fields
	sort    *sortSpec
}

type sortSpec struct {
	field int
	desc  bool
}

// operand is one filter value: [lo, hi] for int (lo == hi) and date (an
// instant, or a whole UTC day, in Unix milliseconds), f for float and
// percent, s for string and picklist (lower-cased for co, bw, nc).
type operand struct {
	lo, hi int64
	f      float64
	s      string
}

type filter struct {
	field int
	typ   fieldType
	op    string
	vals  []operand
}

// operators maps each operator to the field types it accepts and the number
// of values it takes (-1: at least one).
var operators = map[string]struct {
	types []fieldType
	n     int
}{
	"eq": {[]fieldType{typeString, typeInt, typeFloat, typePercent, typeDate}, 1},
	"ne": {[]fieldType{typeString, typeInt, typeFloat, typePercent, typeDate}, 1},
	"co": {[]fieldType{typeString}, 1},
	"bw": {[]fieldType{typeString}, 1},
	"nc": {[]fieldType{typeString}, 1},
	"in": {[]fieldType{typePicklist}, -1},
	"lt": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 1},
	"le": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 1},
	"gt": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 1},
	"ge": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 1},
	"be": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 2},
	"nb": {[]fieldType{typeInt, typeFloat, typePercent, typeDate}, 2},
}

var operatorNames = []string{"eq", "ne", "co", "bw", "nc", "in", "lt", "le", "gt", "ge", "be", "nb"}

// rawParameters is the JSON document carried by `parameters`.
type rawParameters struct {
	Page           json.RawMessage `json:"page"`
	ResultsPerPage json.RawMessage `json:"resultsPerPage"`
	Filters        []rawFilter     `json:"filters"`
	Fields         []string        `json:"fields"`
	Sort           *rawSort        `json:"sort"`
}

type rawFilter struct {
	Field    string            `json:"field"`
	Operator string            `json:"operator"`
	Values   []json.RawMessage `json:"values"`
}

type rawSort struct {
	Field     string `json:"field"`
	Direction string `json:"direction"`
}

// parseQuery validates the query string of a results request.
func parseQuery(obj *object, rawQuery string) (*query, *apiError) {
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, errMalformed("malformed query string: %v", err)
	}
	for k := range vals {
		if k != "parameters" {
			return nil, errUnexpected("unknown query parameter %q; only \"parameters\" is accepted", k)
		}
	}
	p, ok := vals["parameters"]
	if !ok {
		return parseParameters(obj, nil)
	}
	if len(p) != 1 {
		return nil, errUnexpected("query parameter \"parameters\" given %d times", len(p))
	}
	data, aerr := decodeBase64(p[0])
	if aerr != nil {
		return nil, aerr
	}
	return parseParameters(obj, data)
}

// decodeBase64 accepts the standard and URL-safe alphabets, padded or not.
func decodeBase64(s string) ([]byte, *apiError) {
	if s == "" {
		return nil, errMalformed("parameters is empty; omit it to use the defaults")
	}
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") {
		enc = enc.WithPadding(base64.NoPadding)
	}
	data, err := enc.Strict().DecodeString(s)
	if err != nil {
		return nil, errMalformed("parameters is not valid Base64 (standard or URL-safe alphabet, padded or not): %v", err)
	}
	return data, nil
}

// parseParameters validates the JSON document data against obj. nil data
// means all defaults.
func parseParameters(obj *object, data []byte) (*query, *apiError) {
	q := &query{page: 1, perPage: defaultResultsPerPage}
	var raw rawParameters
	if data != nil {
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, errMalformed("parameters must be a JSON object")
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonError(err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, errMalformed("parameters holds data after the JSON object")
		}
	}
	if raw.Page != nil && string(raw.Page) != "null" {
		n, ok := parseInteger(raw.Page)
		if !ok {
			return nil, errInvalid("page must be an integer, got %s", raw.Page)
		}
		if n < 1 {
			return nil, errInvalid("page must be at least 1, got %d", n)
		}
		q.page = n
	}
	if raw.ResultsPerPage != nil && string(raw.ResultsPerPage) != "null" {
		n, ok := parseInteger(raw.ResultsPerPage)
		if !ok {
			return nil, errInvalid("resultsPerPage must be an integer, got %s", raw.ResultsPerPage)
		}
		if n < 1 || n > maxResultsPerPage {
			return nil, errInvalid("resultsPerPage must be between 1 and %d, got %d", maxResultsPerPage, n)
		}
		q.perPage = int(n)
	}
	for n, rf := range raw.Filters {
		f, err := parseFilter(obj, n, rf)
		if err != nil {
			return nil, err
		}
		q.filters = append(q.filters, f)
	}
	if len(raw.Fields) == 0 {
		q.fields = make([]int, len(obj.fields))
		for i := range q.fields {
			q.fields[i] = i
		}
	} else {
		seen := make(map[int]bool, len(raw.Fields))
		for _, id := range raw.Fields {
			i, ok := obj.index[id]
			if !ok {
				return nil, unknownField(obj, "fields", id)
			}
			if seen[i] {
				return nil, errInvalid("field %q is listed twice in fields", id)
			}
			seen[i] = true
			q.fields = append(q.fields, i)
		}
	}
	if raw.Sort != nil {
		if raw.Sort.Field == "" {
			return nil, errInvalid("sort.field is required when sort is given")
		}
		i, ok := obj.index[raw.Sort.Field]
		if !ok {
			return nil, unknownField(obj, "sort", raw.Sort.Field)
		}
		s := &sortSpec{field: i}
		switch raw.Sort.Direction {
		case "", "asc":
		case "desc":
			s.desc = true
		default:
			return nil, errInvalid("sort direction %q is not allowed (allowed: asc, desc)", raw.Sort.Direction)
		}
		q.sort = s
	}
	return q, nil
}

func unknownField(obj *object, where, id string) *apiError {
	return errInvalid("unknown field %q in %s; object %q has no such field", id, where, obj.id)
}

// jsonError turns a decoding error into a 400 that says what is wrong.
func jsonError(err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "parameters"
		}
		return errMalformed("parameters key %q has the wrong JSON type: got %s, want %s", where, te.Value, jsonKind(te.Type.String()))
	case errors.As(err, &se):
		return errMalformed("parameters is not valid JSON: %v (at byte %d)", se, se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errMalformed("unknown key %s in parameters (allowed: page, resultsPerPage, filters, fields, sort; "+
			"filter keys: field, operator, values; sort keys: field, direction)",
			strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errMalformed("parameters is truncated JSON")
	}
	return errMalformed("parameters is not valid JSON: %v", err)
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case goType == "string":
		return "string"
	default:
		return "object"
	}
}

// parseInteger parses a JSON number that is integral (5, 5.0, 5e2).
func parseInteger(raw []byte) (int64, bool) {
	s := string(raw)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// jsonValueKind names the JSON kind of a raw value, for error messages.
func jsonValueKind(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func parseFilter(obj *object, n int, rf rawFilter) (filter, *apiError) {
	if rf.Field == "" {
		return filter{}, errInvalid("filters[%d].field is required", n)
	}
	if rf.Operator == "" {
		return filter{}, errInvalid("filters[%d].operator is required", n)
	}
	fi, ok := obj.index[rf.Field]
	if !ok {
		return filter{}, unknownField(obj, "filters", rf.Field)
	}
	fd := obj.fields[fi]
	op, ok := operators[rf.Operator]
	if !ok {
		return filter{}, errInvalid("unknown operator %q on field %q (operators: %s)",
			rf.Operator, rf.Field, strings.Join(operatorNames, ", "))
	}
	if !slices.Contains(op.types, fd.typ) {
		names := make([]string, len(op.types))
		for i, t := range op.types {
			names[i] = t.String()
		}
		return filter{}, errInvalid("operator %q is not allowed on field %q of type %s (allowed: %s)",
			rf.Operator, rf.Field, fd.typ, strings.Join(names, ", "))
	}
	switch {
	case op.n == -1 && len(rf.Values) == 0:
		return filter{}, errInvalid("operator %q on field %q needs at least 1 value, got 0", rf.Operator, rf.Field)
	case op.n > 0 && len(rf.Values) != op.n:
		return filter{}, errInvalid("operator %q on field %q needs exactly %d value(s), got %d",
			rf.Operator, rf.Field, op.n, len(rf.Values))
	}
	f := filter{field: fi, typ: fd.typ, op: rf.Operator}
	for _, raw := range rf.Values {
		v, err := parseOperand(fd, rf.Operator, raw)
		if err != nil {
			return filter{}, err
		}
		f.vals = append(f.vals, v)
	}
	return f, nil
}

func parseOperand(fd field, op string, raw json.RawMessage) (operand, *apiError) {
	kind := jsonValueKind(raw)
	wrongKind := func(want string) *apiError {
		return errInvalid("value %s for field %q of type %s must be a JSON %s, got %s", raw, fd.id, fd.typ, want, kind)
	}
	switch fd.typ {
	case typeInt:
		if kind != "number" {
			return operand{}, wrongKind("number")
		}
		n, ok := parseInteger(raw)
		if !ok {
			return operand{}, errInvalid("value %s for field %q of type int must be an integral number", raw, fd.id)
		}
		return operand{lo: n, hi: n}, nil
	case typeFloat, typePercent:
		if kind != "number" {
			return operand{}, wrongKind("number")
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return operand{}, errInvalid("value %s for field %q of type %s is not a finite number", raw, fd.id, fd.typ)
		}
		return operand{f: f}, nil
	}
	if kind != "string" {
		return operand{}, wrongKind("string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return operand{}, errMalformed("value %s for field %q is not a valid JSON string", raw, fd.id)
	}
	switch fd.typ {
	case typePicklist:
		if !slices.Contains(fd.options, s) {
			return operand{}, errInvalid("value %q is not an option of picklist field %q (options: %s)",
				s, fd.id, strings.Join(fd.options, ", "))
		}
		return operand{s: s}, nil
	case typeDate:
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			ms := t.UnixMilli()
			return operand{lo: ms, hi: ms + day*1000 - 1}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return operand{}, errInvalid("value %q for field %q of type date must be YYYY-MM-DD or an ISO 8601 "+
				"date-time such as 2026-10-01T12:00:00Z", s, fd.id)
		}
		ms := t.UnixMilli()
		return operand{lo: ms, hi: ms}, nil
	}
	if op == "co" || op == "bw" || op == "nc" {
		s = strings.ToLower(s)
	}
	return operand{s: s}, nil
}

// match reports whether v satisfies f. A null value matches no filter,
// whatever the operator (ne, nc and nb included).
func (f *filter) match(v value) bool {
	if v.null {
		return false
	}
	a := &f.vals[0]
	switch f.typ {
	case typeInt, typeDate:
		x := v.i
		if f.typ == typeDate {
			x *= 1000
		}
		switch f.op {
		case "eq":
			return a.lo <= x && x <= a.hi
		case "ne":
			return !(a.lo <= x && x <= a.hi)
		case "lt":
			return x < a.lo
		case "le":
			return x <= a.hi
		case "gt":
			return x > a.hi
		case "ge":
			return x >= a.lo
		case "be":
			return a.lo <= x && x <= f.vals[1].hi
		case "nb":
			return !(a.lo <= x && x <= f.vals[1].hi)
		}
	case typeFloat, typePercent:
		x := v.f
		switch f.op {
		case "eq":
			return x == a.f
		case "ne":
			return x != a.f
		case "lt":
			return x < a.f
		case "le":
			return x <= a.f
		case "gt":
			return x > a.f
		case "ge":
			return x >= a.f
		case "be":
			return a.f <= x && x <= f.vals[1].f
		case "nb":
			return !(a.f <= x && x <= f.vals[1].f)
		}
	case typeString:
		switch f.op {
		case "eq":
			return v.s == a.s
		case "ne":
			return v.s != a.s
		case "co":
			return strings.Contains(strings.ToLower(v.s), a.s)
		case "bw":
			return strings.HasPrefix(strings.ToLower(v.s), a.s)
		case "nc":
			return !strings.Contains(strings.ToLower(v.s), a.s)
		}
	case typePicklist:
		for i := range f.vals {
			if v.s == f.vals[i].s {
				return true
			}
		}
	}
	return false
}

// cacheKey identifies the row index list of q over obj at the clock now.
func (q *query) cacheKey(obj *object, now int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%p@%d", obj.id, obj, now) // %p: a drifted schema is another object
	for _, f := range q.filters {
		fmt.Fprintf(&b, "|%d %s", f.field, f.op)
		for _, v := range f.vals {
			fmt.Fprintf(&b, " %d,%d,%v,%q", v.lo, v.hi, math.Float64bits(v.f), v.s)
		}
	}
	if q.sort != nil {
		fmt.Fprintf(&b, "|sort %d %t", q.sort.field, q.sort.desc)
	}
	return b.String()
}

// numKey is an order-preserving unsigned encoding of int and float values.
func numKey(typ fieldType, v value) uint64 {
	switch typ {
	case typeFloat, typePercent:
		b := math.Float64bits(v.f)
		if b>>63 != 0 {
			return ^b
		}
		return b | 1<<63
	default:
		return uint64(v.i) ^ 1<<63
	}
}

type sortKey struct {
	null bool
	row  int32
	n    uint64
	s    string
}

// matching returns the row index list of q over obj, filtered and sorted,
// and the number of matching rows. With neither filters nor sort it returns
// nil: rows are addressed directly.
func (s *Service) matching(sn *snapshot, obj *object, q *query) ([]int32, int) {
	if len(q.filters) == 0 && q.sort == nil {
		return nil, obj.count(sn)
	}
	rows := s.cache.get(q.cacheKey(obj, sn.now), func() []int32 { return scan(sn, obj, q) })
	return rows, len(rows)
}

// scan reads every row of obj once, keeps those matching all filters and
// sorts them when q asks to. Nulls sort last in both directions; ties are
// broken by row index so paging is stable.
func scan(sn *snapshot, obj *object, q *query) []int32 {
	n := obj.count(sn)
	vals := make([]value, len(obj.fields))
	var rows []int32
	var keys []sortKey
	for i := range n {
		obj.fill(sn, i, vals)
		ok := true
		for k := range q.filters {
			if !q.filters[k].match(vals[q.filters[k].field]) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if q.sort == nil {
			rows = append(rows, int32(i))
			continue
		}
		v := vals[q.sort.field]
		typ := obj.fields[q.sort.field].typ
		k := sortKey{null: v.null, row: int32(i)}
		if !v.null {
			if typ == typeString || typ == typePicklist {
				k.s = v.s
			} else {
				k.n = numKey(typ, v)
			}
		}
		keys = append(keys, k)
	}
	if q.sort == nil {
		if rows == nil {
			rows = []int32{}
		}
		return rows
	}
	desc := q.sort.desc
	slices.SortFunc(keys, func(a, b sortKey) int {
		if a.null != b.null {
			if a.null {
				return 1
			}
			return -1
		}
		c := 0
		if !a.null {
			if a.n != b.n {
				c = cmpU(a.n, b.n)
			} else {
				c = strings.Compare(a.s, b.s)
			}
			if desc {
				c = -c
			}
		}
		if c == 0 {
			c = int(a.row - b.row)
		}
		return c
	})
	rows = make([]int32, len(keys))
	for i := range keys {
		rows[i] = keys[i].row
	}
	return rows
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}
