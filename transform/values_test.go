package transform

import (
	"math"
	"strconv"
	"testing"
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
