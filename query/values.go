package query

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// ValueText returns v, a value database/sql scanned from a DuckDB result
// column whose type is dbType (the column's DatabaseTypeName), as text:
// what `sepipe query` prints and writes to CSV, and what the dashboard
// shows of a value that is not a number. It is the one owner of that
// text. INTERVAL is written as DuckDB writes it ("01:30:00", "1 day
// 02:00:00", "3 months"), UUID canonically, TIME as 15:04:05[.ffffff],
// TIMETZ with its offset, DATE as YYYY-MM-DD, timestamps as RFC 3339 in
// UTC; LIST, ARRAY, STRUCT, MAP, UNION and JSON values as JSON (ValueJSON),
// with the values nested in them written by their own types; NULL as
// "NULL"; BLOB as DuckDB casts it to VARCHAR (printable ASCII, else
// \xHH); other values as Go formats them (numbers exactly, VARCHAR as
// its bytes). TIME '24:00:00' reads as 00:00:00: the driver scans both
// alike.
func ValueText(v any, dbType string) string {
	return valueText(v, parseDuckType(dbType))
}

// ValueJSON returns v (as ValueText takes it) as JSON: NULL as null,
// booleans and numbers (integers of any size, DECIMAL, finite floats) as
// JSON's own, LIST and ARRAY as arrays, STRUCT and MAP as objects (a MAP's
// keys as their ValueText), a UNION as its member's value, a JSON value as
// itself, and every other value as the string ValueText writes.
func ValueJSON(v any, dbType string) []byte {
	return appendJSON(nil, v, parseDuckType(dbType))
}

// duckType is a DuckDB type as DatabaseTypeName spells it: a base name
// (INTEGER, TIMESTAMP WITH TIME ZONE, DECIMAL(18,3)) with what nested
// types hold.
type duckType struct {
	name   string      // upper case, without parameters; LIST and ARRAY for x[] and x[n]
	elem   *duckType   // LIST, ARRAY
	fields []typeField // STRUCT, UNION, in order
	key    *duckType   // MAP
	value  *duckType   // MAP
}

type typeField struct {
	name string
	typ  *duckType
}

// unknownType is what a type that cannot be read is taken for: values are
// then written by their Go type alone.
var unknownType = &duckType{}

func (t *duckType) field(name string) *duckType {
	for _, f := range t.fields {
		if f.name == name {
			return f.typ
		}
	}
	return unknownType
}

// parseDuckType reads a type name such as `STRUCT("a" INTEGER, "b" UUID[])[]`
// or `MAP(VARCHAR, TIME[3])`; what it cannot read is unknownType.
func parseDuckType(s string) *duckType {
	p := typeParser{s: s}
	t, ok := p.typ()
	if !ok || strings.TrimSpace(p.s[p.i:]) != "" {
		return unknownType
	}
	return t
}

type typeParser struct {
	s string
	i int
}

func (p *typeParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *typeParser) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *typeParser) typ() (*duckType, bool) {
	p.space()
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune("()[],", rune(p.s[p.i])) {
		p.i++
	}
	t := &duckType{name: strings.ToUpper(strings.TrimSpace(p.s[start:p.i]))}
	if t.name == "" {
		return nil, false
	}
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		switch t.name {
		case "STRUCT", "UNION":
			for {
				name, ok := p.ident()
				if !ok {
					return nil, false
				}
				ft, ok := p.typ()
				if !ok {
					return nil, false
				}
				t.fields = append(t.fields, typeField{name, ft})
				if !p.eat(',') {
					break
				}
			}
		case "MAP":
			var ok bool
			if t.key, ok = p.typ(); !ok || !p.eat(',') {
				return nil, false
			}
			if t.value, ok = p.typ(); !ok {
				return nil, false
			}
		default: // DECIMAL(18,3), ENUM('a', 'b'): parameters, skipped
			if !p.skipParams() {
				return nil, false
			}
			return p.suffixes(t)
		}
		if !p.eat(')') {
			return nil, false
		}
	}
	return p.suffixes(t)
}

// suffixes reads the [] and [n] after a type: each makes a LIST or ARRAY
// of what comes before.
func (p *typeParser) suffixes(t *duckType) (*duckType, bool) {
	for p.eat('[') {
		name := "LIST"
		p.space()
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			name = "ARRAY"
			p.i++
		}
		if !p.eat(']') {
			return nil, false
		}
		t = &duckType{name: name, elem: t}
	}
	return t, true
}

// skipParams skips to the parenthesis that closes the one just read,
// past quoted text.
func (p *typeParser) skipParams() bool {
	depth := 1
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; c {
		case '\'', '"':
			end := strings.IndexByte(p.s[p.i+1:], c)
			if end < 0 {
				return false
			}
			p.i += end + 1
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				p.i++
				return true
			}
		}
	}
	return false
}

// ident reads a field name: "quoted" (with "" for a quote) or bare.
func (p *typeParser) ident() (string, bool) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '"' {
		var b strings.Builder
		for p.i++; p.i < len(p.s); p.i++ {
			if p.s[p.i] == '"' {
				if p.i+1 < len(p.s) && p.s[p.i+1] == '"' {
					b.WriteByte('"')
					p.i++
					continue
				}
				p.i++
				return b.String(), true
			}
			b.WriteByte(p.s[p.i])
		}
		return "", false
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ' ' && !strings.ContainsRune("()[],", rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i], p.i > start
}

func valueText(v any, t *duckType) string {
	if v != nil && t.name == "JSON" {
		return string(appendJSON(nil, v, t))
	}
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case []byte:
		if t.name == "UUID" && len(x) == 16 {
			return uuidText(x)
		}
		if t.name == "BLOB" {
			return blobText(x)
		}
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, uint:
		return fmt.Sprint(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case *big.Int:
		return x.String()
	case duckdb.Decimal:
		return x.String()
	case duckdb.Interval:
		return intervalText(x)
	case time.Time:
		return timeText(x, t.name)
	case duckdb.Union:
		return valueText(x.Value, t.field(x.Tag))
	case []any, map[string]any, duckdb.OrderedMap:
		return string(appendJSON(nil, v, t))
	}
	return fmt.Sprint(v)
}

// timeText writes a DATE, TIME, TIMETZ or timestamp.
func timeText(x time.Time, typ string) string {
	switch typ {
	case "DATE":
		return x.Format("2006-01-02")
	case "TIME":
		return x.Format("15:04:05.999999")
	case "TIMETZ", "TIME WITH TIME ZONE":
		_, off := x.Zone()
		sign := "+"
		if off < 0 {
			sign, off = "-", -off
		}
		s := x.Format("15:04:05.999999") + sign + fmt.Sprintf("%02d", off/3600)
		if off%3600 != 0 {
			s += fmt.Sprintf(":%02d", off%3600/60)
			if off%60 != 0 {
				s += fmt.Sprintf(":%02d", off%60)
			}
		}
		return s
	}
	return x.UTC().Format(time.RFC3339Nano)
}

// intervalText writes an INTERVAL as DuckDB does: years, months and days
// by name, then the time as [-]HH:MM:SS[.ffffff]; "00:00:00" when empty.
func intervalText(iv duckdb.Interval) string {
	var parts []string
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		s := strconv.FormatInt(n, 10) + " " + name
		if n != 1 && n != -1 {
			s += "s"
		}
		parts = append(parts, s)
	}
	unit(int64(iv.Months/12), "year")
	unit(int64(iv.Months%12), "month")
	unit(int64(iv.Days), "day")
	if us := iv.Micros; us != 0 {
		sign := ""
		u := uint64(us)
		if us < 0 {
			sign, u = "-", uint64(-us) // -MinInt64 wraps to its own magnitude as uint64
		}
		h, m, s, f := u/3_600_000_000, u/60_000_000%60, u/1_000_000%60, u%1_000_000
		t := fmt.Sprintf("%s%02d:%02d:%02d", sign, h, m, s)
		if f != 0 {
			t += strings.TrimRight(fmt.Sprintf(".%06d", f), "0")
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "00:00:00"
	}
	return strings.Join(parts, " ")
}

// blobText writes a BLOB as DuckDB casts one to VARCHAR: printable ASCII
// as it is, every other byte (and the backslash and both quotes) as \xHH. Text that can
// be read back, where the bytes as a string were not valid UTF-8 and JSON
// made every such byte U+FFFD (two BLOBs printed alike; found by review).
func blobText(b []byte) string {
	var out strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '\\' && c != '\'' && c != '"' {
			out.WriteByte(c)
		} else {
			fmt.Fprintf(&out, `\x%02X`, c)
		}
	}
	return out.String()
}

func uuidText(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}

// appendJSON appends v, of type t, as JSON to b.
func appendJSON(b []byte, v any, t *duckType) []byte {
	if t.name == "JSON" { // json.Unmarshal's values: JSON's own
		j, err := json.Marshal(v)
		if err != nil {
			return appendString(b, fmt.Sprint(v))
		}
		return append(b, j...)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool, int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, uint, *big.Int, duckdb.Decimal:
		return append(b, valueText(x, t)...)
	case float64, float32: // finite as encoding/json writes them, else "NaN", "+Inf", "-Inf"
		j, err := json.Marshal(x)
		if err != nil {
			return appendString(b, valueText(x, t))
		}
		return append(b, j...)
	case []any:
		elem := unknownType
		if t.elem != nil {
			elem = t.elem
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e, elem)
		}
		return append(b, ']')
	case map[string]any: // STRUCT: its fields in the type's order
		b = append(b, '{')
		n := 0
		put := func(k string, e any, et *duckType) {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(appendString(b, k), ':')
			b = appendJSON(b, e, et)
		}
		seen := map[string]bool{}
		for _, f := range t.fields {
			if e, ok := x[f.name]; ok {
				put(f.name, e, f.typ)
				seen[f.name] = true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !seen[k] {
				put(k, x[k], unknownType)
			}
		}
		return append(b, '}')
	case duckdb.OrderedMap:
		key, val := unknownType, unknownType
		if t.key != nil {
			key, val = t.key, t.value
		}
		b = append(b, '{')
		vals := x.Values()
		for i, k := range x.Keys() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, valueText(k, key)), ':')
			b = appendJSON(b, vals[i], val)
		}
		return append(b, '}')
	case duckdb.Union:
		return appendJSON(b, x.Value, t.field(x.Tag))
	}
	return appendString(b, valueText(v, t))
}

func appendString(b []byte, s string) []byte {
	j, _ := json.Marshal(s)
	return append(b, j...)
}
