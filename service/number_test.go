package service

import (
	"bytes"
	"testing"
)

func TestParseIntAndLooseInt(t *testing.T) {
	for _, c := range []struct {
		raw         string
		parse, lose int64
		parseOK     bool
		looseOK     bool
	}{
		{"12", 12, 12, true, true},
		{"-3", -3, -3, true, true},
		{"1234.0", 1234, 1234, true, true},
		{"1e3", 1000, 1000, true, true},
		{"12.5", 0, 0, false, false},
		{"9223372036854775807", 9223372036854775807, 9223372036854775807, true, true},
		{"1e19", 0, 0, false, false},
		{`"1234"`, 0, 1234, false, true},
		{`" 13.0 "`, 0, 13, false, true},
		{`"\u0031\u0032"`, 0, 12, false, true},
		{`"x"`, 0, 0, false, false},
		{`""`, 0, 0, false, false},
		{`"12`, 0, 0, false, false},
		{"null", 0, 0, false, false},
		{"true", 0, 0, false, false},
		{"", 0, 0, false, false},
	} {
		if v, ok := ParseInt([]byte(c.raw)); ok != c.parseOK || v != c.parse {
			t.Errorf("ParseInt(%s) = %d, %t; want %d, %t", c.raw, v, ok, c.parse, c.parseOK)
		}
		if v, ok := LooseInt([]byte(c.raw)); ok != c.looseOK || v != c.lose {
			t.Errorf("LooseInt(%s) = %d, %t; want %d, %t", c.raw, v, ok, c.lose, c.looseOK)
		}
	}
}

// LooseInt never panics, and reads a number (spaces around it aside)
// exactly as ParseInt does.
func FuzzLooseInt(f *testing.F) {
	for _, s := range []string{"12", "1234.0", `"13"`, `" 1e3 "`, `"\u0031"`, "null", `"`, "-"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := LooseInt(raw)
		if n := bytes.TrimSpace(raw); len(n) > 0 && n[0] != '"' {
			if pv, pok := ParseInt(n); pv != v || pok != ok {
				t.Fatalf("LooseInt(%q) = %d, %t; ParseInt = %d, %t", raw, v, ok, pv, pok)
			}
		}
	})
}

// TestListCount: a list's count is an integer, loosely read, or no count
// (-1) for anything else; it never fails the page.
func TestListCount(t *testing.T) {
	for raw, want := range map[string]int64{
		`23`: 23, `23.0`: 23, `"23"`: 23, ` "23" `: 23, `0`: 0,
		``: -1, `null`: -1, `-5`: -1, `23.5`: -1, `"many"`: -1, `true`: -1, `{"n":1}`: -1, `1e3`: 1000,
	} {
		if got := ListCount([]byte(raw)); got != want {
			t.Errorf("ListCount(%s) = %d, want %d", raw, got, want)
		}
	}
}
