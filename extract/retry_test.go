package extract

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const describeOK = `{"fields":[{"id":"curriculumTitle","displayName":"Title","type":"string"}]}`

// script answers the n-th request (1-based) with steps[n-1]; the last
// step repeats.
type script struct {
	n     atomic.Int64
	steps []func(w http.ResponseWriter, r *http.Request)
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(s.n.Add(1)) - 1
	s.steps[min(i, len(s.steps)-1)](w, r)
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

func body(code int, b string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(b))
	}
}

// dropMidBody promises a long body, sends part of it and closes the
// connection.
func dropMidBody(w http.ResponseWriter, r *http.Request) {
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"fields\":[{\"id\":")
	_ = rw.Flush()
}

// Retry-After in seconds is waited; a request refused again after waiting
// it waits at least twice as long (7 s, then not 3 s but 14 s).
func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){
		status(429, "Retry-After", "7"), status(429, "Retry-After", "3"), body(200, describeOK),
	}}
	c, _ := newTestClient(t, s)
	sl := recordSleeps(c)
	if _, err := c.Describe(context.Background(), "curriculum"); err != nil {
		t.Fatal(err)
	}
	if got := sl.get(); len(got) != 2 || got[0] != 7*time.Second || got[1] != 14*time.Second {
		t.Fatalf("waits %v, want [7s 14s]", got)
	}
}

// A service whose window is longer than its Retry-After says (always 1
// s, a minute's window): the request outwaits it, doubling its wait on
// each repeat, past the six attempts, within requests.max_wait (1 + 2 +
// ... + 32 = 63 s of 2 min). Refused for ever, it stops when the next
// wait would pass the budget.
func TestRetryAfterTooShortIsOutwaited(t *testing.T) {
	t.Parallel()
	steps := make([]func(http.ResponseWriter, *http.Request), 0, 8)
	for range 6 {
		steps = append(steps, status(429, "Retry-After", "1"))
	}
	s := &script{steps: append(steps, body(200, describeOK))}
	c, _ := newTestClient(t, s, WithRetry(DefaultMaxAttempts, DefaultMaxWait))
	sl := recordSleeps(c)
	if _, err := c.Describe(context.Background(), "curriculum"); err != nil {
		t.Fatalf("six 429s saying Retry-After: 1, then 200: %v", err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}
	if got := sl.get(); !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}

	s = &script{steps: []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "1")}}
	c, _ = newTestClient(t, s, WithRetry(DefaultMaxAttempts, DefaultMaxWait))
	recordSleeps(c)
	_, err := c.Describe(context.Background(), "curriculum")
	if !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, ErrRateLimited) || errors.Is(err, ErrQuotaExhausted) ||
		!strings.Contains(err.Error(), "next wait 1m4s would exceed 2m0s") || s.n.Load() != 7 {
		t.Fatalf("refused for ever: err = %v after %d requests; want the budget's end after 7", err, s.n.Load())
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &script{steps: []func(http.ResponseWriter, *http.Request){
		status(429, "Retry-After", now.Add(5*time.Second).Format(http.TimeFormat)),
		status(503, "Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), // past: no wait
		body(200, describeOK),
	}}
	c, _ := newTestClient(t, s)
	c.now = func() time.Time { return now }
	sl := recordSleeps(c)
	if _, err := c.Describe(context.Background(), "curriculum"); err != nil {
		t.Fatal(err)
	}
	if got := sl.get(); len(got) != 2 || got[0] != 5*time.Second || got[1] != 0 {
		t.Fatalf("waits %v, want [5s 0s]", got)
	}
}

func TestRateLimitedBackoffExhausted(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){status(429)}}
	c, _ := newTestClient(t, s, withBackoff(time.Millisecond, 4*time.Millisecond))
	sl := recordSleeps(c)
	_, err := c.Objects(context.Background())
	if !errors.Is(err, ErrRateLimited) || !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "after 6 attempts") {
		t.Fatalf("err = %v, want the attempt count", err)
	}
	if n := s.n.Load(); n != 6 {
		t.Fatalf("%d requests, want 6", n)
	}
	waits := sl.get()
	if len(waits) != 5 {
		t.Fatalf("waits %v, want 5", waits)
	}
	for i, w := range waits {
		ceiling := min(time.Millisecond<<i, 4*time.Millisecond)
		if w < 0 || w > ceiling {
			t.Errorf("wait %d = %v, want within [0, %v]", i+1, w, ceiling)
		}
	}
}

// A 429 asking for a wait past the retry budget ends the request at once,
// as a spent quota: ErrQuotaExhausted (its stream is deferred), naming
// the wait, the budget and when it may be read, even on its last
// attempt. The client then holds every request back until then, without
// sending it. Waits that only add up past the budget, or 429s without
// Retry-After, exhaust the retries as other failures do.
func TestRetryAfterBeyondBudget(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "600")}}
	c, _ := newTestClient(t, s, WithRetry(1, time.Minute))
	sl := recordSleeps(c)
	before := time.Now()
	_, err := c.Objects(context.Background())
	if !errors.Is(err, ErrRateLimited) || !errors.Is(err, ErrQuotaExhausted) || s.n.Load() != 1 || len(sl.get()) != 0 {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	q := c.Quota()
	if msg := err.Error(); !strings.Contains(msg, "wait 10m0s (Retry-After)") || !strings.Contains(msg, "requests.max_wait") ||
		!strings.Contains(msg, "after "+q.Reset.UTC().Format(time.RFC3339)) {
		t.Errorf("err = %v, want the asked wait, the budget and the time named", err)
	}
	var qe *QuotaError
	if !errors.As(err, &qe) || !qe.Reset.Equal(q.Reset) {
		t.Errorf("err = %#v, want a *QuotaError resetting at %s", err, q.Reset)
	}
	if _, err = c.Describe(context.Background(), "course"); !errors.Is(err, ErrQuotaExhausted) || s.n.Load() != 1 {
		t.Errorf("the next request: err = %v, %d requests sent; want it held back unsent", err, s.n.Load())
	}
	if !errors.As(err, &qe) || !qe.Reset.Equal(q.Reset) {
		t.Errorf("the next request: err = %v, want a *QuotaError resetting at %s", err, q.Reset)
	}
	if !q.Known || q.Remaining != 0 || q.Reset.Before(before.Add(10*time.Minute)) || q.Reset.After(time.Now().Add(10*time.Minute)) {
		t.Errorf("quota %+v, want none remaining until the asked time", q)
	}

	s = &script{steps: []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "40")}}
	c, _ = newTestClient(t, s, WithRetry(6, time.Minute))
	sl = recordSleeps(c)
	if _, err = c.Objects(context.Background()); !errors.Is(err, ErrRetriesExhausted) || errors.Is(err, ErrQuotaExhausted) ||
		s.n.Load() != 2 || len(sl.get()) != 1 {
		t.Fatalf("40 s twice in a minute's budget: err = %v after %d requests", err, s.n.Load())
	}

	s = &script{steps: []func(http.ResponseWriter, *http.Request){status(429)}}
	c, _ = newTestClient(t, s, WithRetry(2, time.Minute))
	recordSleeps(c)
	if _, err = c.Objects(context.Background()); !errors.Is(err, ErrRateLimited) || errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("429s without Retry-After: err = %v", err)
	}
}

func TestRetryServerErrors(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){
		status(500), status(502), body(503, "<html>busy</html>"), status(504), body(200, describeOK),
	}}
	c, _ := newTestClient(t, s)
	fields, err := c.Describe(context.Background(), "curriculum")
	if err != nil || len(fields) != 1 || s.n.Load() != 5 {
		t.Fatalf("fields %v, err %v, %d requests", fields, err, s.n.Load())
	}
}

func TestRetryServerErrorsExhausted(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){status(502)}}
	c, _ := newTestClient(t, s, WithRetry(3, time.Minute))
	_, err := c.Describe(context.Background(), "curriculum")
	var ae *APIError
	if !errors.Is(err, ErrRetriesExhausted) || !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryBodyEndsEarly(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]func(http.ResponseWriter, *http.Request){
		"connection dropped": dropMidBody,
		"truncated JSON":     body(200, `{"fields":[{"id":"curriculumTitle",`),
		"not JSON":           body(200, `<html>maintenance</html>`),
		"empty 200 body":     body(200, ``),
	} {
		t.Run(name, func(t *testing.T) {
			s := &script{steps: []func(http.ResponseWriter, *http.Request){first, body(200, describeOK)}}
			c, _ := newTestClient(t, s)
			fields, err := c.Describe(context.Background(), "curriculum")
			if err != nil || len(fields) != 1 || s.n.Load() != 2 {
				t.Fatalf("fields %v, err %v, %d requests", fields, err, s.n.Load())
			}
		})
	}
}

func TestReadObjectRetriesCounted(t *testing.T) {
	t.Parallel()
	var dropped, limited atomic.Bool
	f := &fakeReport{rows: 45, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
		switch {
		case p == 2 && !dropped.Swap(true):
			conn, rw, _ := w.(http.Hijacker).Hijack()
			_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n{\"page\":2,\"results\":[")
			_ = rw.Flush()
			conn.Close()
			return true
		case p == 3 && !limited.Swap(true):
			status(429, "Retry-After", "2")(w, r)
			return true
		}
		return false
	}}
	c, _ := newTestClient(t, f, WithPageSize(10))
	sl := recordSleeps(c)
	col := newCollector()
	st, err := c.ReadObject(context.Background(), "course", Query{}, col.fn)
	if err != nil {
		t.Fatal(err)
	}
	col.checkAll(t, 45)
	if st.Pages != 5 || st.Requests != 7 || st.Retries != 2 || st.Rows != 45 {
		t.Fatalf("stats %+v", st)
	}
	var total time.Duration
	for _, w := range sl.get() {
		total += w
	}
	if st.Waited != total || st.Waited < 2*time.Second {
		t.Fatalf("waited %v, sleeps %v", st.Waited, sl.get())
	}
}

func TestNotRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status   int
		sentinel error
		cred     bool
	}{
		{400, nil, false},
		{401, ErrUnauthorized, true},
		{403, ErrForbidden, true},
		{404, ErrNotFound, false},
		{405, nil, false},
		{409, nil, false},
		{418, nil, false},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			s := &script{steps: []func(http.ResponseWriter, *http.Request){status(tc.status), body(200, describeOK)}}
			c, _ := newTestClient(t, s)
			_, err := c.Describe(context.Background(), "curriculum")
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Fatalf("err = %v", err)
			}
			if s.n.Load() != 1 {
				t.Fatalf("%d requests, want 1", s.n.Load())
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v, want %v", err, tc.sentinel)
			}
			if errors.Is(err, ErrRetriesExhausted) {
				t.Fatalf("err = %v", err)
			}
			if got := strings.Contains(err.Error(), "reporting access token"); got != tc.cred {
				t.Fatalf("err = %q, naming the credential: %v, want %v", err, got, tc.cred)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Fatal("token in error")
			}
		})
	}
}

func TestAPIErrorBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		body   string
		want   APIError
		text   string
	}{
		{"v3", 400, `{"response":{"code":2001,"name":"InvalidParameterError","message":"resultsPerPage must be at most 1000"}}`,
			APIError{Code: 2001, Name: "InvalidParameterError", Message: "resultsPerPage must be at most 1000"},
			`reporting describe "course": 400 InvalidParameterError (2001): resultsPerPage must be at most 1000`},
		{"v3 code as string", 404, `{"response":{"code":"3004","name":"ResourceNotFoundError","message":"no such object"}}`,
			APIError{Code: 3004, Name: "ResourceNotFoundError", Message: "no such object"},
			`reporting describe "course": 404 ResourceNotFoundError (3004): no such object`},
		{"v4 problem", 404, `{"type":"/errors/not-found","title":"Not Found","detail":"object course does not exist","status":404}`,
			APIError{Type: "/errors/not-found", Title: "Not Found", Message: "object course does not exist"},
			`reporting describe "course": 404 Not Found (/errors/not-found): object course does not exist`},
		{"v4 problem with meta", 409, `{"type":"/errors/validation","title":"Validation failed","detail":"bad","status":409,"meta":[{"name":"fields","reason":"is required","category":"propertyRequired"}]}`,
			APIError{Type: "/errors/validation", Title: "Validation failed", Message: "bad; fields: is required (propertyRequired)"},
			`reporting describe "course": 409 Validation failed (/errors/validation): bad; fields: is required (propertyRequired)`},
		{"unparseable", 400, "<html>" + strings.Repeat("x", 300) + "</html>",
			APIError{Message: "<html>" + strings.Repeat("x", 194)},
			`reporting describe "course": 400 Bad Request: <html>xxx`},
		{"empty", 405, "",
			APIError{},
			`reporting describe "course": 405 Method Not Allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{steps: []func(http.ResponseWriter, *http.Request){body(tc.status, tc.body)}}
			c, _ := newTestClient(t, s)
			_, err := c.Describe(context.Background(), "course")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
			want := tc.want
			want.Interface, want.Op, want.Object, want.Status = "reporting", "describe", "course", tc.status
			if *ae != want {
				t.Fatalf("got  %+v\nwant %+v", *ae, want)
			}
			if !strings.HasPrefix(ae.Error(), tc.text) {
				t.Fatalf("Error() = %q, want prefix %q", ae.Error(), tc.text)
			}
		})
	}
}

func TestNetworkErrorExhausted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	c, err := New(url, WithAccessToken(testToken), WithRetry(3, time.Minute), withBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Objects(context.Background())
	if !errors.Is(err, ErrRetriesExhausted) || !strings.Contains(err.Error(), "after 3 attempts") || strings.Contains(err.Error(), testToken) {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "30")}}
	c, _ := newTestClient(t, s)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	c.sleep = func(ctx context.Context, d time.Duration) error {
		cancel(stop)
		return sleepCtx(ctx, d)
	}
	if _, err := c.Objects(ctx); !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 12 ", 12 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Sunday, 01-Mar-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		// Beside the standard (found by review: each read as no hint).
		{"20.5", 20500 * time.Millisecond, true},
		{"0.0001", 100 * time.Microsecond, true},
		{"30, 30", 30 * time.Second, true},
		{"99999999999999999999", 24 * time.Hour, true},
		{"NaN", 0, false},
		{"-0.5", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	c, err := New("https://acme.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 70; attempt++ {
		ceiling := defaultBackoffCap
		if attempt < 10 {
			ceiling = min(defaultBackoffBase<<(attempt-1), defaultBackoffCap)
		}
		for range 20 {
			if d := c.backoff(attempt); d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", attempt, d, ceiling)
			}
		}
	}
}

func FuzzAPIErrorBody(f *testing.F) {
	f.Add(400, []byte(`{"response":{"code":2001,"name":"InvalidParameterError","message":"m"}}`))
	f.Add(404, []byte(`{"type":"/errors/not-found","title":"Not Found","detail":"d","status":404,"meta":[{"name":"n","reason":"r","category":"c"}]}`))
	f.Add(500, []byte("<html>oops</html>"))
	c, err := New("https://acme.example.com", WithAccessToken(testToken))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := c.apiError(reqInfo{op: "query", object: "course", page: 2}, status, body)
		if e.Status != status || strings.Contains(e.Error(), testToken) {
			t.Fatalf("%+v", e)
		}
	})
}

// TestA429WithOnlyAResetWaitsForIt: a 429 that says when the window
// resets (X-RateLimit-Reset) but neither Retry-After nor what remains is
// retried after that reset, as after a Retry-After: it got jittered
// backoff and ran out of attempts (found by review; one that says nothing
// remains is the announced quota's, TestQuota*). A fractional
// Retry-After, read as none, is waited as sent. A 429 whose window has requests left (a burst refused) is not a
// wait for the reset: it backs off, as before.
func TestA429WithOnlyAResetWaitsForIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    []time.Duration // nil: backoff, under a second
	}{
		{"reset only", map[string]string{"X-RateLimit-Reset": "30"}, []time.Duration{30 * time.Second, 60 * time.Second}},
		{"fractional Retry-After", map[string]string{"Retry-After": "20.5"}, []time.Duration{20500 * time.Millisecond, 41 * time.Second}},
		{"requests remain", map[string]string{"X-RateLimit-Reset": "1800", "X-RateLimit-Remaining": "900", "X-RateLimit-Limit": "1000"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 2 {
					for k, v := range c.headers {
						w.Header().Set(k, v)
					}
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(describeOK))
			})
			cl, _ := newTestClient(t, h)
			sl := recordSleeps(cl)
			if _, err := cl.Describe(context.Background(), "a"); err != nil {
				t.Fatalf("describe after two 429s: %v", err)
			}
			// Refused again after waiting what it asked: twice as long.
			waits := sl.get()
			switch {
			case c.want != nil && !slices.Equal(waits, c.want):
				t.Errorf("waits %v, want %v", waits, c.want)
			case c.want == nil && (len(waits) != 2 || slices.Max(waits) >= time.Second):
				t.Errorf("waits %v, want two backoffs under a second", waits)
			}
		})
	}
}
