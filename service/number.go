package service

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unsafe"
)

// ParseInt reads an integer as the service may send it: the text of a JSON
// number that must be integral. "12", "-3", "12.0" and "1e3" are integers;
// "12.5" is not (docs/service-shapes.md, Client tolerance: ints sent as
// 56.0). It is the one owner of that rule: the decoder (transform) reads
// int fields with it, and LooseInt page headers and error codes.
func ParseInt(b []byte) (int64, bool) {
	if len(b) > 0 && len(b) <= 18 {
		neg := b[0] == '-'
		i := 0
		if neg {
			i = 1
		}
		if i < len(b) {
			var v int64
			j := i
			for ; j < len(b); j++ {
				c := b[j]
				if c < '0' || c > '9' {
					break
				}
				v = v*10 + int64(c-'0')
			}
			if j == len(b) {
				if neg {
					v = -v
				}
				return v, true
			}
		}
	}
	if v, err := strconv.ParseInt(bstr(b), 10, 64); err == nil {
		return v, true
	}
	f, err := strconv.ParseFloat(bstr(b), 64)
	if err != nil || f != math.Trunc(f) || f < -9.223372036854775e18 || f > 9.223372036854775e18 {
		return 0, false
	}
	return int64(f), true
}

// LooseInt reads one raw JSON value as an integer the way the service's
// page headers (page, resultsPerPage, totalResults, totalPages, a list's
// count) and error codes are read: a number by ParseInt, or a string
// holding one, spaces around it ignored ("1234", "1234.0"). Anything else,
// null included, is not an integer; the caller says what null means.
func LooseInt(raw []byte) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if len(raw) < 2 || raw[len(raw)-1] != '"' {
			return 0, false
		}
		if bytes.IndexByte(raw, '\\') < 0 {
			raw = raw[1 : len(raw)-1]
		} else {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return 0, false
			}
			raw = []byte(s)
		}
		raw = bytes.TrimSpace(raw)
	}
	return ParseInt(raw)
}

// ListCount reads a list's count (count, total, meta.count) the way both
// the client and the sync's decoder read it: an integer by LooseInt, and
// -1, no count, for null, a negative number or anything else: a read
// without a count ends by its pages (a short page and an empty one), so
// one odd count does not fail the list.
func ListCount(raw []byte) int64 {
	if v, ok := LooseInt(raw); ok && v >= 0 {
		return v
	}
	return -1
}

// bstr views b as a string without copying, for strconv (which keeps it
// only inside a *NumError that ParseInt drops).
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
