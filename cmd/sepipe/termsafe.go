package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termEscape makes text that may come from the service safe to print on a
// terminal: control characters (escape sequences, carriage returns, bells,
// C1 controls) and invalid UTF-8 are written as \xNN or \uNNNN; newlines
// and tabs stay when keep is true.
func termEscape(s string, keepLayout bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) && !(keepLayout && (r == '\n' || r == '\t')) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// cell is v as one cell of a table printed on a terminal: escaped whole
// (termEscape without layout), so text from the service holding a newline
// or a tab cannot print a row or a column of its own; the tables' own
// tabs and newlines lay them out.
func cell(v any) string { return termEscape(fmt.Sprint(v), false) }

// termWriter escapes what it writes with termEscape (layout kept), for the
// tables printed on a terminal.
type termWriter struct{ w io.Writer }

func termSafe(w io.Writer) io.Writer { return termWriter{w} }

func (t termWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, termEscape(string(p), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}
