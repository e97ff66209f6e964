package transform

import (
	"bytes"
	"math"
	"strconv"
	"time"
	"unsafe"
)

// bstr views b as a string without copying. The result must not outlive
// the call it is passed to (strconv keeps it only inside a *NumError, which
// the callers here drop).
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloatFast parses [-]digits[.digits] of at most 15 significant digits
// (so the mantissa is exact in a float64) and at most 22 decimals: the
// quotient of two exact float64 values is correctly rounded, so the result
// is the one strconv.ParseFloat gives (Clinger's fast path). ok is false
// for anything else, which the caller hands to strconv.
func parseFloatFast(b []byte) (float64, bool) {
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i = 1
	}
	var mant uint64
	digits, frac, dot := 0, 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			if mant == 0 && c == '0' && !dot {
				digits = max(digits, 1) // leading zeros are not significant
				continue
			}
			mant = mant*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if digits == 0 || digits > 15 || frac > 22 {
		return 0, false
	}
	f := float64(mant) / pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

// parseFloat parses a finite number; a leading + too, as service.ParseInt reads
// it (text "+5" in a float column).
func parseFloat(b []byte) (float64, bool) {
	if len(b) > 1 && b[0] == '+' && b[1] != '-' && b[1] != '+' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] == '+' {
		return 0, false
	}
	if f, ok := parseFloatFast(b); ok {
		return f, true
	}
	f, err := strconv.ParseFloat(bstr(b), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func digits(b []byte, n int) (int, bool) {
	if len(b) < n {
		return 0, false
	}
	v := 0
	for _, c := range b[:n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// daysFromCivil returns days since 1970-01-01 (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// parseTimestamp parses an ISO 8601 date or date-time into microseconds
// since the epoch, UTC. Accepted: 2019-08-24, 2019-08-24T14:15:22Z,
// fractional seconds (up to nanoseconds), a space instead of T, a numeric
// offset (+02:00, +0200, +02) or none (read as UTC).
func parseTimestamp(b []byte) (int64, bool) {
	y, ok1 := digits(b, 4)
	if !ok1 || len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return parseTimestampSlow(b)
	}
	m, ok2 := digits(b[5:], 2)
	d, ok3 := digits(b[8:], 2)
	if !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysIn[m] || (m == 2 && d == 29 && !isLeap(y)) {
		return 0, false
	}
	days := daysFromCivil(y, m, d)
	if len(b) == 10 {
		return days * 86400e6, true
	}
	if len(b) < 19 || (b[10] != 'T' && b[10] != ' ' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return parseTimestampSlow(b)
	}
	hh, ok4 := digits(b[11:], 2)
	mm, ok5 := digits(b[14:], 2)
	ss, ok6 := digits(b[17:], 2)
	if !ok4 || !ok5 || !ok6 || hh > 23 || mm > 59 || ss > 59 {
		return 0, false
	}
	us := (days*86400 + int64(hh)*3600 + int64(mm)*60 + int64(ss)) * 1e6
	rest := b[19:]
	if len(rest) > 0 && rest[0] == '.' {
		n, frac := 0, int64(0)
		i := 1
		for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
			if n < 6 {
				frac = frac*10 + int64(rest[i]-'0')
				n++
			}
		}
		if i == 1 {
			return 0, false
		}
		for ; n < 6; n++ {
			frac *= 10
		}
		us += frac
		rest = rest[i:]
	}
	switch {
	case len(rest) == 0, len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
		return us, true
	case rest[0] == '+' || rest[0] == '-':
		oh, ok := digits(rest[1:], 2)
		if !ok {
			return 0, false
		}
		om := 0
		tail := rest[3:]
		if len(tail) > 0 && tail[0] == ':' {
			tail = tail[1:]
		}
		if len(tail) > 0 {
			if om, ok = digits(tail, 2); !ok || len(tail) != 2 {
				return 0, false
			}
		}
		if oh > 23 || om > 59 {
			return 0, false
		}
		off := int64(oh*3600+om*60) * 1e6
		if rest[0] == '+' {
			return us - off, true
		}
		return us + off, true
	}
	return 0, false
}

var slowLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00",
	// ISO 8601 without seconds (found by review: rejected)
	"2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02 15:04"}

func parseTimestampSlow(b []byte) (int64, bool) {
	s := string(bytes.TrimSpace(b))
	for _, l := range slowLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UnixMicro(), true
		}
	}
	return 0, false
}
