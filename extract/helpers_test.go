package extract

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/service"
)

const testToken = "tok-SECRET-4f1c9a"

// newTestClient starts h on an httptest server and returns a client of it
// with no rate limit and millisecond backoff.
func newTestClient(t *testing.T, h http.Handler, opts ...Option) (*Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base := []Option{
		WithAccessToken(testToken),
		WithHTTPClient(srv.Client()),
		WithRateLimit(0, 1),
		withBackoff(time.Millisecond, 4*time.Millisecond),
	}
	c, err := New(srv.URL, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv
}

// sleepLog replaces the client's sleep: it records the waits asked for and
// returns at once, so retry tests take no time and assert exact durations.
type sleepLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func recordSleeps(c *Client) *sleepLog {
	l := &sleepLog{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		l.mu.Lock()
		l.waits = append(l.waits, d)
		l.mu.Unlock()
		return ctx.Err()
	}
	return l
}

func (l *sleepLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

// logBuffer is a concurrency-safe slog sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func debugLogger(b *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Totals modes of fakeReport.
const (
	totalsBoth = iota
	totalsResults
	totalsPages
	totalsNone
)

// fakeReport serves one object "course" with rows rows {"id": i} in pages.
type fakeReport struct {
	rows   int
	totals int
	// maxPerPage caps resultsPerPage when > 0 (and echoes the cap).
	maxPerPage int
	// noEcho leaves out page and resultsPerPage.
	noEcho bool
	// fault may answer a results request itself (return true) or change
	// the page served: it gets the page asked for and returns the page to
	// serve and a total to report (both may be left as given).
	fault func(w http.ResponseWriter, r *http.Request, page int) bool
	remap func(page int) int
	total func(total int) int

	requests atomic.Int64
	mu       sync.Mutex
	perPage  map[int]int
	queries  []wireQuery
}

func (f *fakeReport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, reportingPath)
	switch path {
	case "/objects":
		writeJSON(w, 200, map[string]any{"objects": []any{map[string]any{
			"id": "course", "displayName": "Courses",
			"urls": map[string]string{"describe": reportingPath + "/objects/course/describe", "object": reportingPath + "/objects/course"},
		}}})
		return
	case "/objects/course/describe":
		writeJSON(w, 200, map[string]any{"fields": []any{map[string]any{"id": "id", "displayName": "Id", "type": "int"}}})
		return
	case "/objects/course":
	default:
		http.NotFound(w, r)
		return
	}
	raw, err := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
	var q wireQuery
	if err == nil {
		err = json.Unmarshal(raw, &q)
	}
	if err != nil {
		writeJSON(w, 400, map[string]any{"response": map[string]any{"code": 2001, "name": "InvalidParameterError", "message": err.Error()}})
		return
	}
	f.mu.Lock()
	if f.perPage == nil {
		f.perPage = map[int]int{}
	}
	f.perPage[q.Page]++
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	if f.fault != nil && f.fault(w, r, q.Page) {
		return
	}
	size := q.ResultsPerPage
	if f.maxPerPage > 0 && size > f.maxPerPage {
		size = f.maxPerPage
	}
	serve := q.Page
	if f.remap != nil {
		serve = f.remap(serve)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(pageBody(serve, size, f.rows, f.totals, f.noEcho, f.total))
}

// pageBody renders page p of rows rows at size per page.
func pageBody(p, size, rows, totals int, noEcho bool, totalFn func(int) int) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	if !noEcho {
		fmt.Fprintf(&b, `"page":%d,"resultsPerPage":%d,`, p, size)
	}
	total := rows
	if totalFn != nil {
		total = totalFn(total)
	}
	if totals == totalsBoth || totals == totalsResults {
		fmt.Fprintf(&b, `"totalResults":%d,`, total)
	}
	if totals == totalsBoth || totals == totalsPages {
		fmt.Fprintf(&b, `"totalPages":%d,`, (total+size-1)/size)
	}
	b.WriteString(`"results":[`)
	for i := (p - 1) * size; i < p*size && i < rows; i++ {
		if i > (p-1)*size {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"row %d"}`, i, i)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// collector is a PageFunc that records every row id it sees.
type collector struct {
	mu       sync.Mutex
	ids      map[int]int // id → times seen
	pages    map[int]int
	restarts int
}

func newCollector() *collector { return &collector{ids: map[int]int{}, pages: map[int]int{}} }

// keyed is fn returning each row's id as its key, as a decoder with key
// fields does.
func (c *collector) keyed(ctx context.Context, p *Page) (service.PageInfo, error) {
	info, err := c.fn(ctx, p)
	if err != nil || p.Restart {
		return info, err
	}
	var body struct {
		Results []struct {
			ID json.RawMessage `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(p.Body, &body); err != nil {
		return info, err
	}
	info.Keys = []string{}
	for _, r := range body.Results {
		info.Keys = append(info.Keys, string(r.ID))
	}
	return info, nil
}

func (c *collector) fn(ctx context.Context, p *Page) (service.PageInfo, error) {
	if p.Restart {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ids, c.pages = map[int]int{}, map[int]int{}
		c.restarts++
		return service.PageInfo{}, nil
	}
	info, err := ParsePageInfo(p.Body)
	if err != nil {
		return info, err
	}
	var body struct {
		Results []struct {
			ID int `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(p.Body, &body); err != nil {
		return info, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages[p.Number]++
	for _, r := range body.Results {
		c.ids[r.ID]++
	}
	return info, nil
}

// checkAll asserts ids 0..n-1 were each seen once.
func (c *collector) checkAll(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) != n {
		t.Fatalf("saw %d distinct rows, want %d", len(c.ids), n)
	}
	for i := range n {
		if c.ids[i] != 1 {
			t.Fatalf("row %d seen %d times", i, c.ids[i])
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
