package extract

import (
	"net/http"
	"testing"
	"time"
)

func TestParseQuotaVariants(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		h      http.Header
		body   string
		rem    int
		reset  time.Time
		wantOK bool
	}{
		{"x-ratelimit epoch", http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"1795579200"}}, "", 12, time.Unix(1795579200, 0), true},
		{"ietf delta", http.Header{"Ratelimit-Limit": {"600, 600;w=3600"}, "Ratelimit-Remaining": {"7"}, "Ratelimit-Reset": {"30"}}, "", 7, now.Add(30 * time.Second), true},
		{"combined field", http.Header{"Ratelimit": {"limit=100, remaining=50, reset=5"}}, "", 50, now.Add(5 * time.Second), true},
		{"http date reset", http.Header{"X-Ratelimit-Remaining": {"3"}, "X-Ratelimit-Reset": {now.Add(time.Minute).Format(http.TimeFormat)}}, "", 3, now.Add(time.Minute), true},
		{"no reset", http.Header{"X-Ratelimit-Remaining": {"3"}}, "", 0, time.Time{}, false},
		{"garbage", http.Header{"X-Ratelimit-Remaining": {"lots"}, "X-Ratelimit-Reset": {"soon"}}, "", 0, time.Time{}, false},
		{"meta numbers", nil, `{"response":{"code":4290},"meta":{"rateLimit":{"limit":600,"remaining":0,"reset":1795579200}}}`, 0, time.Unix(1795579200, 0), true},
		{"meta strings", nil, `{"meta":{"ratelimit":{"limit":"600","remaining":"4","reset":"2026-11-25T04:10:00Z"}}}`, 4, now.Add(10 * time.Minute), true},
		{"meta absent", nil, `{"meta":{"count":3}}`, 0, time.Time{}, false},
		{"far reset capped", http.Header{"X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"4102444800"}}, "", 1, now.Add(24 * time.Hour), true},
		// Variants services send (found by review): a reset in Unix
		// milliseconds was read as seconds, a day away; several windows'
		// resets in one field; the structured RateLimit field of later
		// drafts, one policy or several (the one with fewest left binds).
		{"epoch milliseconds", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1795579230000"}}, "", 0, time.Unix(1795579230, 0), true},
		{"several resets", http.Header{"Ratelimit-Remaining": {"4"}, "Ratelimit-Reset": {"30, 3600"}}, "", 4, now.Add(30 * time.Second), true},
		{"structured field", http.Header{"Ratelimit": {`"default";r=0;t=30`}}, "", 0, now.Add(30 * time.Second), true},
		{"structured, two policies", http.Header{"Ratelimit": {`"hourly";r=900;t=3000, "burst";r=2;t=1`}}, "", 2, now.Add(time.Second), true},
		{"structured without reset", http.Header{"Ratelimit": {`"default";r=5`}}, "", 0, time.Time{}, false},
		{"r and t as members", http.Header{"Ratelimit": {"r=0, t=30"}}, "", 0, now.Add(30 * time.Second), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := parseQuotaHeaders(tc.h, now)
			if tc.body != "" {
				q = parseQuotaMeta([]byte(tc.body), now)
			}
			if q.ok != tc.wantOK || q.ok && (q.remaining != tc.rem || !q.reset.Equal(tc.reset)) {
				t.Fatalf("got %+v, want ok=%v remaining %d reset %s", q, tc.wantOK, tc.rem, tc.reset)
			}
		})
	}
}

// TestParseQuotaLimit: the limit comes from *-Limit, the older combined
// field's limit=, or the RateLimit-Policy field's quota (q=, or its first
// number in the older form) of the policy the RateLimit field names.
func TestParseQuotaLimit(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h     http.Header
		limit int
	}{
		{http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"30"}}, 600},
		{http.Header{"Ratelimit": {"limit=100, remaining=50, reset=5"}}, 100},
		{http.Header{"Ratelimit": {`"default";r=0;t=30`}, "Ratelimit-Policy": {`"default";q=50;w=60`}}, 50},
		{http.Header{"Ratelimit": {`"burst";r=0;t=1`}, "Ratelimit-Policy": {`"hourly";q=1000;w=3600, "burst";q=20;w=1`}}, 20},
		{http.Header{"Ratelimit": {`"default";r=0;t=30`}, "Ratelimit-Policy": {"100;w=60"}}, 100},
	} {
		if q := parseQuotaHeaders(c.h, now); !q.ok || q.limit != c.limit {
			t.Errorf("%v: %+v, want limit %d", c.h, q, c.limit)
		}
	}
}

func TestQuotaBudgetNeverSendsPastRemaining(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	b := newBudget(nil, 4, 10, func() time.Time { return now }, nil)
	b.observeQuota(quotaInfo{limit: 10, remaining: 5, reset: now.Add(time.Minute), ok: true})
	res, ok, q := b.reserveQuota(3)
	if free := q.Remaining - q.Reserved; !ok || free != 5 {
		t.Fatalf("reserve 3 of 5: ok=%v free=%d", ok, free)
	}
	if _, ok, q := b.reserveQuota(3); ok || q.Remaining-q.Reserved != 2 || q.Limit != 10 {
		t.Fatalf("a second reservation of 3 with 2 free: ok=%v quota %+v", ok, q)
	}
	taken := 0
	for range 10 {
		if ok, _ := b.takeQuota(nil); ok {
			taken++
		}
	}
	if taken != 2 {
		t.Fatalf("unreserved requests took %d, want the 2 not reserved", taken)
	}
	for i := range 3 {
		if ok, _ := b.takeQuota(res); !ok {
			t.Fatalf("reserved request %d refused", i)
		}
	}
	if ok, reset := b.takeQuota(res); ok || !reset.Equal(now.Add(time.Minute)) {
		t.Fatalf("past the quota: ok=%v reset %s", ok, reset)
	}
	// A later answer of the same window can only lower what is left; a
	// new window starts afresh.
	b.observeQuota(quotaInfo{limit: 10, remaining: 9, reset: now.Add(time.Minute), ok: true})
	if q := b.quota; q.Remaining != 0 {
		t.Fatalf("same window raised remaining to %d", q.Remaining)
	}
	now = now.Add(time.Minute)
	if ok, _ := b.takeQuota(nil); !ok {
		t.Fatal("the window reset but the request was refused")
	}
}

// TestShortCredentialDoesNotGarbleMessages: redaction is a last guard for
// values of 8 characters or more; a one-letter token leaves text whole.
func TestShortCredentialDoesNotGarbleMessages(t *testing.T) {
	c, err := New("http://127.0.0.1:1", WithAccessToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	msg := "the access token is invalid or has expired"
	if got := c.scrub(msg); got != msg {
		t.Fatalf("scrub garbled %q into %q", msg, got)
	}
	c2, _ := New("http://127.0.0.1:1", WithAccessToken("tok-SECRET-4f1c9a"))
	if got := c2.scrub("sent tok-SECRET-4f1c9a"); got != "sent REDACTED" {
		t.Fatalf("a long token was not redacted: %q", got)
	}
}

// FuzzRateHints: whatever a service puts in its rate headers, the client
// reads a wait of zero to a day, and a quota with no negative count and
// a reset at most a day away; it never panics.
func FuzzRateHints(f *testing.F) {
	for _, v := range []string{"30", "20.5", "30, 3600", "1795579230000", `"default";r=0;t=30`, `"a";r=1;t=2, "b";r=0;t=9`,
		"limit=100, remaining=0, reset=5", "Wed, 25 Nov 2026 04:00:30 GMT", "-1", "NaN", "1e400", `";;=,`} {
		f.Add(v, v)
	}
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, a, b string) {
		if d, ok := parseRetryAfter(a, now); d < 0 || d > 24*time.Hour || !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", a, d, ok)
		}
		h := http.Header{"Ratelimit": {a}, "Ratelimit-Policy": {b}, "X-Ratelimit-Reset": {b}, "Ratelimit-Remaining": {a}}
		for _, hh := range []http.Header{h, {"Ratelimit": {a}, "Ratelimit-Policy": {b}}} {
			q := parseQuotaHeaders(hh, now)
			if q.ok && (q.remaining < 0 || q.limit < 0 || q.reset.After(now.Add(24*time.Hour))) {
				t.Fatalf("parseQuotaHeaders(%v) = %+v", hh, q)
			}
		}
	})
}
