package transform

import (
	"math"
	"strconv"
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
