package servicetest

import (
	"strconv"
	"unicode/utf8"
)

// The page path encodes JSON by appending bytes to a reused buffer; it does
// not use encoding/json.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Quotes, backslashes and
// control characters are escaped; invalid UTF-8 becomes U+FFFD; U+2028 and
// U+2029 are escaped so the output is also valid JavaScript.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil inverse).
func civil(days int64) (y int64, m, d int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func append2(dst []byte, n int) []byte { return append(dst, byte('0'+n/10), byte('0'+n%10)) }

// appendDate appends the Unix time t as a JSON string "YYYY-MM-DDTHH:MM:SSZ"
// (UTC). Years must lie in 0..9999.
func appendDate(dst []byte, t int64) []byte {
	days, secs := t/day, t%day
	if secs < 0 {
		days--
		secs += day
	}
	y, m, d := civil(days)
	dst = append(dst, '"', byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	dst = append2(dst, d)
	dst = append(dst, 'T')
	dst = append2(dst, int(secs/3600))
	dst = append(dst, ':')
	dst = append2(dst, int(secs/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int(secs%60))
	return append(dst, 'Z', '"')
}

// appendValue appends v, a value of a field of type typ, as JSON.
func appendValue(dst []byte, typ fieldType, v value) []byte {
	if v.null {
		return append(dst, "null"...)
	}
	switch typ {
	case typeInt:
		return strconv.AppendInt(dst, v.i, 10)
	case typeFloat, typePercent:
		return strconv.AppendFloat(dst, v.f, 'f', -1, 64)
	case typeDate:
		return appendDate(dst, v.i)
	default:
		if v.raw {
			return append(append(append(dst, '"'), v.s...), '"')
		}
		return appendJSONString(dst, v.s)
	}
}

// appendRow appends row i of obj as a JSON object holding the fields proj.
// vals is scratch space of len(obj.fields).
func appendRow(dst []byte, sn *snapshot, obj *object, proj []int, i int, vals []value) []byte {
	obj.fill(sn, i, vals)
	dst = append(dst, '{')
	for n, f := range proj {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, obj.keys[f]...)
		dst = appendValue(dst, obj.fields[f].typ, vals[f])
	}
	return append(dst, '}')
}

// appendPage appends the results body of one page. rows is the sorted and
// filtered row index list, or nil to address rows directly (no filter, no
// sort); total is the number of matching rows.
func appendPage(dst []byte, sn *snapshot, obj *object, q *query, rows []int32, total int) []byte {
	pages := 0
	if total > 0 {
		pages = (total-1)/q.perPage + 1
	}
	dst = append(dst, `{"page":`...)
	dst = strconv.AppendInt(dst, q.page, 10)
	dst = append(dst, `,"resultsPerPage":`...)
	dst = strconv.AppendInt(dst, int64(q.perPage), 10)
	dst = append(dst, `,"totalResults":`...)
	dst = strconv.AppendInt(dst, int64(total), 10)
	dst = append(dst, `,"totalPages":`...)
	dst = strconv.AppendInt(dst, int64(pages), 10)
	dst = append(dst, `,"results":[`...)
	if q.page <= int64(pages) {
		from := int(q.page-1) * q.perPage
		to := min(from+q.perPage, total)
		vals := make([]value, len(obj.fields))
		for n := from; n < to; n++ {
			if n > from {
				dst = append(dst, ',')
			}
			i := n
			if rows != nil {
				i = int(rows[n])
			}
			dst = appendRow(dst, sn, obj, q.fields, i, vals)
		}
	}
	return append(dst, ']', '}')
}
