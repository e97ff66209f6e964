package service

import (
	"bytes"
	"time"
)

// ParseTime is ParseTimestamp for a string, as a time.Time in UTC (to the
// microsecond). ok is false when s is no ISO 8601 date or date-time
// ParseTimestamp reads.
func ParseTime(s string) (t time.Time, ok bool) {
	us, ok := ParseTimestamp([]byte(s))
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMicro(us).UTC(), true
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

// ParseTimestamp parses an ISO 8601 date or date-time into microseconds
// since the epoch, UTC: the one reader of the service's times, which the
// interface documents as "ISO 8601 date-time" without one form. Accepted:
// 2019-08-24 (its midnight, UTC), 2019-08-24T14:15:22Z, fractional seconds
// after a point or a comma (any number of digits, kept to the microsecond),
// a space or a lower-case t instead of T, minutes without seconds, a
// numeric offset of less than 24 hours in the
// extended or basic form (+02:00, +0200, +02) or none (read as UTC);
// years 0000 to 9999. It does not allocate on the common forms (the
// decoder calls it for every date value). ok is false for anything else.
func ParseTimestamp(b []byte) (micros int64, ok bool) {
	y, ok1 := digits(b, 4)
	if !ok1 || len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return parseSlow(b)
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
		return parseSlow(b)
	}
	hh, ok4 := digits(b[11:], 2)
	mm, ok5 := digits(b[14:], 2)
	ss, ok6 := digits(b[17:], 2)
	if !ok4 || !ok5 || !ok6 || hh > 23 || mm > 59 || ss > 59 {
		return 0, false
	}
	us := (days*86400 + int64(hh)*3600 + int64(mm)*60 + int64(ss)) * 1e6
	rest := b[19:]
	if len(rest) > 0 && (rest[0] == '.' || rest[0] == ',') { // ISO 8601 allows either
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

// slowLayouts are the forms ParseTimestamp leaves to time.Parse.
var slowLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00",
	// ISO 8601 without seconds (found by review: rejected)
	"2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02 15:04"}

// parseSlow reads b, spaces around it trimmed, in one of slowLayouts.
func parseSlow(b []byte) (int64, bool) {
	s := string(bytes.TrimSpace(b))
	for _, l := range slowLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UnixMicro(), true
		}
	}
	return 0, false
}
