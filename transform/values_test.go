package transform

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// FuzzParseFloat: the fast path agrees with strconv.ParseFloat, bit for
// bit, on every input it accepts, and parseFloat accepts exactly what
// strconv does (finite, no leading '+').
func FuzzParseFloat(f *testing.F) {
	for _, s := range []string{"0", "-0", "71.6", "100", "0.05", "1.", ".5", "-.5", "012", "123456789012345",
		"1234567890123456", "0.1234567890123456789", "1e3", "9007199254740993", "99.99999999999999", "-", ".", "", "+5", "+-5", "+", "+Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := strconv.ParseFloat(s, 64)
		if fast, ok := parseFloatFast([]byte(s)); ok {
			if err != nil || math.Float64bits(fast) != math.Float64bits(want) {
				t.Fatalf("parseFloatFast(%q) = %v, strconv: %v, %v", s, fast, want, err)
			}
		}
		got, ok := parseFloat([]byte(s))
		wantOK := err == nil && !math.IsInf(want, 0) && !math.IsNaN(want) // "+5" too, as text in a float column
		if ok != wantOK || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat(%q) = %v, %v; strconv: %v, %v", s, got, ok, want, err)
		}
	})
}

// TestParseTimestampForms: the ISO 8601 forms a date field reads, as
// microseconds since the epoch in UTC; seconds may be left out.
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
		{"2026-02-14T08", 0, false},
		{"0000-00-00", 0, false},
		{"2026-02-30", 0, false},
	} {
		got, ok := parseTimestamp([]byte(c.in))
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseTimestamp(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
