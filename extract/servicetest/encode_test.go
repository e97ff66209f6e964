package servicetest

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"
	"time"
)

func stdB64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
func urlB64(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
func escape(s string) string { return url.QueryEscape(s) }
func b64(s string) string    { return escape(stdB64(s)) }

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "José Núñez", `quote " and \ backslash`, "tab\tnew\nline\r",
		"\x00\x01\x1f\x7f", "invalid \xff\xfe utf-8", "line\u2028sep\u2029", "emoji 🎓", "<html>&"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, b, err)
		}
		want := s
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %s", b)
		}
		// encoding/json also replaces invalid UTF-8 by U+FFFD.
		wb, _ := json.Marshal(s)
		json.Unmarshal(wb, &want)
		if got != want {
			t.Fatalf("%q round-tripped to %q, want %q", s, got, want)
		}
	}
}

func TestAppendDate(t *testing.T) {
	r := newRnd(1, 2, 3)
	for range 10000 {
		ts := int64(r.u64()%(253402300800+62135596800)) - 62135596800 // years 1..9999
		got := string(appendDate(nil, ts))
		want := `"` + time.Unix(ts, 0).UTC().Format("2006-01-02T15:04:05Z") + `"`
		if got != want {
			t.Fatalf("appendDate(%d) = %s, want %s", ts, got, want)
		}
	}
}
