package transform

import (
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a minimal JSON tokenizer over one page body. It never
// allocates on the common path: strings without escapes and numbers come
// back as sub-slices of buf.
type scanner struct {
	buf []byte
	pos int
	msg string // first error, if any
	at  int    // offset of the first error
	key []byte // the last escaped key, decoded (see object)
}

func (s *scanner) fail(msg string) bool {
	if s.msg == "" {
		s.msg, s.at = msg, s.pos
	}
	return false
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (s *scanner) ws() {
	for s.pos < len(s.buf) && isSpace[s.buf[s.pos]] {
		s.pos++
	}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.buf) {
		return 0
	}
	return s.buf[s.pos]
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		if s.pos >= len(s.buf) {
			return s.fail("unexpected end of body, expected '" + string(c) + "'")
		}
		return s.fail("expected '" + string(c) + "', found '" + string(s.buf[s.pos]) + "'")
	}
	s.pos++
	return true
}

// str reads a string at the current position (which must be '"') and
// returns its raw contents (escapes not decoded) and whether it has escapes.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if s.peek() != '"' {
		return nil, false, s.fail("expected a string")
	}
	start := s.pos + 1
	// Keys and values are short: one pass over the bytes beats two
	// IndexByte calls (one for the quote, one for a backslash).
	buf := s.buf
	for j := start; j < len(buf); j++ {
		if c := buf[j]; strStop[c] {
			if c == '"' {
				s.pos = j + 1
				return buf[start:j], false, true
			}
			return s.escaped(start, j)
		}
	}
	s.pos = len(buf)
	return nil, false, s.fail("unterminated string")
}

// strStop marks the bytes that end the fast scan of a string.
var strStop = [256]bool{'"': true, '\\': true}

// escaped finishes a string that has a backslash at j.
func (s *scanner) escaped(start, j int) (raw []byte, escaped, ok bool) {
	for ; j < len(s.buf); j++ {
		switch s.buf[j] {
		case '\\':
			j++
		case '"':
			s.pos = j + 1
			return s.buf[start:j], true, true
		}
	}
	s.pos = len(s.buf)
	return nil, false, s.fail("unterminated string")
}

var numByte = [256]bool{'-': true, '+': true, '.': true, 'e': true, 'E': true,
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true}

// num reads a number token. Its grammar is checked by the caller's parse.
func (s *scanner) num() ([]byte, bool) {
	start := s.pos
	for s.pos < len(s.buf) && numByte[s.buf[s.pos]] {
		s.pos++
	}
	if s.pos == start {
		return nil, s.fail("expected a number")
	}
	return s.buf[start:s.pos], true
}

func (s *scanner) lit(word string) bool {
	if len(s.buf)-s.pos < len(word) || string(s.buf[s.pos:s.pos+len(word)]) != word {
		return s.fail("invalid literal, expected " + word)
	}
	s.pos += len(word)
	return true
}

// maxDepth bounds the recursion of the scanner's recursive walks (the JSON
// writer, the decoder's members); a value nested deeper is passed over by
// skip, which does not recurse, and, where it would be stored, rejected
// alone (its row kept).
const maxDepth = 64

// object walks the object at the current position (which must be '{'),
// calling member with each key, escapes decoded (valid until member
// returns), and the scanner at the key's value, which member must
// consume. (The Decoder keeps its own loop: it predicts keys.)
func (s *scanner) object(member func(key []byte) bool) bool {
	if !s.expect('{') {
		return false
	}
	if s.peek() == '}' {
		s.pos++
		return true
	}
	for {
		key, esc, ok := s.str()
		if !ok || !s.expect(':') {
			return false
		}
		if esc {
			s.key, _ = unescape(s.key[:0], key)
			key = s.key
		}
		if !member(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return s.fail("expected ',' or '}' in an object")
		}
	}
}

// array walks the array at the current position (which must be '['),
// calling elem with the scanner at each element, which elem must consume.
func (s *scanner) array(elem func() bool) bool {
	if !s.expect('[') {
		return false
	}
	if s.peek() == ']' {
		s.pos++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// validEscapes reports whether the escapes of a raw string body are JSON
// escapes, without decoding it.
func validEscapes(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := hex4(raw, i+1); !ok {
				return false
			}
			i += 4
		default:
			return false
		}
	}
	return true
}

// skip passes over one value of any kind, at any depth, without
// recursion (a stack of the open objects' and arrays' closing brackets):
// a value nested past maxDepth is skipped like any other (it failed its
// page, and then its stream).
func (s *scanner) skip() bool {
	var stack [16]byte
	open := stack[:0] // the closing bracket of each open object or array
	for {
		// A value.
		switch c := s.peek(); c {
		case '{', '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			s.pos++
			if s.peek() == closer {
				s.pos++
				break
			}
			open = append(open, closer)
			if closer == '}' && !s.memberName() {
				return false
			}
			continue
		default:
			if !s.scalar() {
				return false
			}
		}
		// What follows it: closers, then a ',' before the next value.
		for {
			if len(open) == 0 {
				return true
			}
			top := open[len(open)-1]
			c := s.peek()
			if c == top {
				s.pos++
				open = open[:len(open)-1]
				continue
			}
			if c != ',' {
				if top == '}' {
					return s.fail("expected ',' or '}' in object")
				}
				return s.fail("expected ',' or ']' in array")
			}
			s.pos++
			if top == '}' && !s.memberName() {
				return false
			}
			break
		}
	}
}

// memberName passes over an object member's name and its ':'.
func (s *scanner) memberName() bool {
	if _, _, ok := s.str(); !ok {
		return false
	}
	return s.expect(':')
}

// scalar passes over a value that is not an object or an array.
func (s *scanner) scalar() bool {
	switch c := s.peek(); c {
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	case 0:
		return s.fail("unexpected end of body, expected a value")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			_, ok := s.num()
			return ok
		}
		return s.fail("unexpected character '" + string(c) + "'")
	}
}

// unescape appends the decoded form of a raw JSON string body to dst.
func unescape(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return dst, false
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, i+1)
			if !ok {
				return dst, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if v, ok := hex4(raw, i+3); ok {
						r2 = v
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
	return dst, true
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
