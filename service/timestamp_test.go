package service

import (
	"testing"
	"time"
)

// TestParseTimestampForms: the ISO 8601 forms a date field, a webhook
// event's time and a theme's createdAt are read in, as microseconds since
// the epoch in UTC; seconds may be left out, the offset may be basic
// (+0200) or missing (UTC).
func TestParseTimestampForms(t *testing.T) {
	at := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2026-02-14T08:38:00Z", at("2026-02-14T08:38:00Z"), true},
		{"2026-02-14T08:38:00.123456+02:00", at("2026-02-14T06:38:00.123456Z"), true},
		{"2026-02-14", at("2026-02-14T00:00:00Z"), true},
		{"2026-02-14 08:38:00", at("2026-02-14T08:38:00Z"), true},
		{"2026-02-14T08:38", at("2026-02-14T08:38:00Z"), true},
		{"2026-02-14T08:38Z", at("2026-02-14T08:38:00Z"), true},
		{"2026-02-14T08:38+05:30", at("2026-02-14T03:08:00Z"), true},
		{"2026-02-14 08:38", at("2026-02-14T08:38:00Z"), true},
		{"2026-11-23T04:00:00.123+0000", at("2026-11-23T04:00:00.123Z"), true},
		{"2026-03-05T11:53:27+0200", at("2026-03-05T09:53:27Z"), true},
		{"2026-03-05T11:53:27-02", at("2026-03-05T13:53:27Z"), true},
		{"2026-11-23T04:00:00", at("2026-11-23T04:00:00Z"), true},
		{"2026-11-23T04:00:00.123456789", at("2026-11-23T04:00:00.123456Z"), true},
		{"2026-02-14T08:38:00,5Z", at("2026-02-14T08:38:00.5Z"), true},
		{"2026-02-14T08", 0, false},
		{"2026-03-05T11:53:27+02:0", 0, false},
		{"yesterday", 0, false},
		{"", 0, false},
		{"0000-00-00", 0, false},
		{"2026-02-30", 0, false},
	} {
		got, ok := ParseTimestamp([]byte(c.in))
		if ok != c.ok || ok && got != c.want {
			t.Errorf("ParseTimestamp(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseTimestamp: ParseTimestamp never panics, and reads every time
// time.Parse reads as RFC 3339 (but for offsets of 24 hours or more, which
// no zone has), written with an extended or a basic offset, to the same
// microsecond.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-02-14T08:38:00Z", "2026-11-23T04:00:00.123+0000", "2026-11-23T04:00:00",
		"2026-02-14", "2026-02-14 08:38", "1969-12-31T23:59:59.5Z", "0000-01-01T00:00:00-23:59", "9999-12-31T23:59:59.999999999+00:00",
		"2026-02-30", "yesterday", "", "2026-02-14T08:38:00.Z", "2026-02-14T08:38:00+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseTimestamp([]byte(s))
		if pt, pok := ParseTime(s); pok != ok || ok && pt.UnixMicro() != got {
			t.Fatalf("ParseTime(%q) = %v, %v; ParseTimestamp: %d, %v", s, pt, pok, got, ok)
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if _, off := want.Zone(); err != nil || off <= -86400 || off >= 86400 {
			return
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700"} {
			in := want.Format(layout)
			if got, ok := ParseTimestamp([]byte(in)); !ok || got != want.UnixMicro() {
				t.Fatalf("ParseTimestamp(%q) = %d, %v; time.Parse: %d", in, got, ok, want.UnixMicro())
			}
		}
	})
}
