package transform

import (
	"github.com/sepipe/sepipe/service"
	"strconv"
)

// walkPage reads the top level of a list page in any of the shapes the
// service sends:
//
//	{"page", "resultsPerPage", "totalResults", "totalPages", "results": [...]}  (Coach reporting)
//	{"meta": {"count"}, "response": {"items": [...]}}                          (v3 resources)
//	{"count", "items": [...]}                                                  (v4, webhooks)
//
// The count is taken where the page puts it (totalResults, count, total,
// meta.count, meta.total) into info.TotalResults. perPage is told
// resultsPerPage when it comes; rows is called with s at the rows array
// (or its null) and must consume it, returning false on failure. saw says
// whether the page had rows; ok is false on a structural error (s.msg).
func walkPage(s *scanner, info *service.PageInfo, perPage func(int), rows func() bool) (saw, ok bool) {
	readRows := func() bool {
		if saw {
			return s.fail("the page holds two arrays of rows")
		}
		saw = true
		return rows()
	}
	count := func(key string) bool {
		read := s.listCount // a list's count: no integer is no count
		if key == "totalResults" {
			read = s.header // a report page's total: no integer is a bad page
		}
		v, ok := read()
		if ok && (key == "totalResults" || info.TotalResults < 0) {
			info.TotalResults = v
		}
		return ok
	}
	// nested reads meta or response: an object whose members are read by
	// member, or anything else, passed over.
	nested := func(member func(key []byte) bool) bool {
		if s.peek() != '{' {
			return s.skip()
		}
		return s.object(member)
	}
	if s.peek() != '{' {
		return false, s.expect('{')
	}
	ok = s.object(func(key []byte) bool {
		switch k := string(key); k {
		case "page", "resultsPerPage", "totalPages":
			v, ok := s.header()
			if !ok {
				return false
			}
			switch k {
			case "page":
				info.Page = int(max(v, 0))
			case "resultsPerPage":
				info.ResultsPerPage = int(max(v, 0))
				if perPage != nil {
					perPage(info.ResultsPerPage)
				}
			default:
				info.TotalPages = int(v)
			}
			return true
		case "totalResults", "count", "total":
			return count(k)
		case "results", "items":
			return readRows()
		case "meta":
			return nested(func(key []byte) bool {
				if k := string(key); k == "count" || k == "total" || k == "totalResults" {
					return count(k)
				}
				return s.skip()
			})
		case "response":
			return nested(func(key []byte) bool {
				if k := string(key); k == "items" || k == "results" {
					return readRows()
				}
				return s.skip()
			})
		}
		return s.skip()
	})
	if !ok {
		return saw, false
	}
	if s.peek() != 0 {
		return saw, s.fail("unexpected data after the page object")
	}
	return saw, true
}

// header reads a page-level integer loosely (service.LooseInt: a number,
// integral, or a string holding one); null reads as -1.
func (s *scanner) header() (int64, bool) {
	if s.peek() == 'n' {
		return -1, s.lit("null")
	}
	start := s.pos
	if !s.skip() {
		return 0, false
	}
	v, ok := service.LooseInt(s.buf[start:s.pos])
	if !ok {
		return 0, s.fail("page header is not an integer")
	}
	return v, true
}

// listCount reads a list's count (count, total, meta.count) by
// service.ListCount: -1, no count, for anything but an integer, where the
// decoder refused the page (the client read such a list whole, and the
// sync failed its every page).
func (s *scanner) listCount() (int64, bool) {
	start := s.pos
	if !s.skip() {
		return 0, false
	}
	return service.ListCount(s.buf[start:s.pos]), true
}

// jsonWriter copies one JSON value compacted, checking what the scanner
// does not: number grammar, string escapes and control characters, so
// that what it writes is valid JSON for DuckDB's JSON type. In a secret
// value (a headers list) every member named value is replaced.
type jsonWriter struct {
	s      *scanner
	secret bool
	bad    string // why the value cannot be stored as JSON, if it cannot
}

func (j *jsonWriter) value(dst []byte, depth int) ([]byte, bool) {
	s := j.s
	if depth > maxDepth {
		// Not stored: the value is rejected alone, its row kept.
		if !s.skip() {
			return dst, false
		}
		if j.bad == "" {
			j.bad = "nested more than " + strconv.Itoa(maxDepth) + " levels deep"
		}
		return dst, true
	}
	switch c := s.peek(); c {
	case '"':
		return j.str(dst)
	case '{':
		s.pos++
		dst = append(dst, '{')
		if s.peek() == '}' {
			s.pos++
			return append(dst, '}'), true
		}
		for {
			if s.peek() != '"' {
				return dst, s.fail("expected a string")
			}
			start := len(dst)
			var ok bool
			if dst, ok = j.str(dst); !ok || !s.expect(':') {
				return dst, false
			}
			key := dst[start:]
			dst = append(dst, ':')
			if j.secret && string(key) == `"value"` && s.peek() != 'n' {
				if !s.skip() {
					return dst, false
				}
				dst = append(dst, `"REDACTED"`...)
			} else if dst, ok = j.value(dst, depth+1); !ok {
				return dst, false
			}
			switch s.peek() {
			case ',':
				s.pos++
				dst = append(dst, ',')
			case '}':
				s.pos++
				return append(dst, '}'), true
			default:
				return dst, s.fail("expected ',' or '}' in object")
			}
		}
	case '[':
		s.pos++
		dst = append(dst, '[')
		if s.peek() == ']' {
			s.pos++
			return append(dst, ']'), true
		}
		for {
			var ok bool
			if dst, ok = j.value(dst, depth+1); !ok {
				return dst, false
			}
			switch s.peek() {
			case ',':
				s.pos++
				dst = append(dst, ',')
			case ']':
				s.pos++
				return append(dst, ']'), true
			default:
				return dst, s.fail("expected ',' or ']' in array")
			}
		}
	case 't':
		return append(dst, "true"...), s.lit("true")
	case 'f':
		return append(dst, "false"...), s.lit("false")
	case 'n':
		return append(dst, "null"...), s.lit("null")
	case 0:
		return dst, s.fail("unexpected end of body, expected a value")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			raw, ok := s.num()
			if ok && !validNumber(raw) && j.bad == "" {
				j.bad = "invalid number " + string(raw) + " in a JSON value"
			}
			return append(dst, raw...), ok
		}
		return dst, s.fail("unexpected character '" + string(c) + "'")
	}
}

// str copies a string token; control characters are escaped, and an
// invalid escape makes the value unstorable.
func (j *jsonWriter) str(dst []byte) ([]byte, bool) {
	s := j.s
	start := s.pos
	raw, esc, ok := s.str()
	if !ok {
		return dst, false
	}
	if esc && !validEscapes(raw) && j.bad == "" {
		j.bad = "invalid escape in a string of a JSON value"
	}
	ctl := false
	for _, c := range raw {
		if c < 0x20 {
			ctl = true
			break
		}
	}
	if !ctl {
		return append(dst, s.buf[start:s.pos]...), true
	}
	dst = append(dst, '"')
	for _, c := range raw {
		if c < 0x20 {
			dst = append(dst, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return append(dst, '"'), true
}

// validNumber reports whether b is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
