package extract

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sepipe/sepipe/service"
)

func TestReadObject(t *testing.T) {
	t.Parallel()
	modes := map[string]int{"both": totalsBoth, "totalResults": totalsResults, "totalPages": totalsPages, "none": totalsNone}
	for name, mode := range modes {
		for _, rows := range []int{0, 1, 9, 10, 11, 95, 100} {
			t.Run(name+"/"+itoa(rows), func(t *testing.T) {
				f := &fakeReport{rows: rows, totals: mode}
				c, _ := newTestClient(t, f, WithConcurrency(3), WithPageSize(10))
				col := newCollector()
				st, err := c.ReadObject(context.Background(), "course", Query{Fields: []string{"id"}}, col.fn)
				if err != nil {
					t.Fatal(err)
				}
				col.checkAll(t, rows)
				if st.Rows != int64(rows) {
					t.Errorf("stats rows %d, want %d", st.Rows, rows)
				}
				if st.Requests != int(f.requests.Load()) || st.Retries != 0 {
					t.Errorf("stats %+v, server saw %d requests", st, f.requests.Load())
				}
				if st.Pages != len(col.pages) {
					t.Errorf("stats pages %d, fn saw %d", st.Pages, len(col.pages))
				}
				want := max((rows+9)/10, 1)
				if rows > 0 && rows%10 == 0 {
					want++ // a full last page: the page after it shows the end
				}
				if mode != totalsNone && st.Pages != want {
					t.Errorf("fetched %d pages, want %d", st.Pages, want)
				}
				for p, n := range col.pages {
					if n != 1 {
						t.Errorf("page %d handed to fn %d times", p, n)
					}
				}
				for _, q := range f.queries {
					if q.ResultsPerPage != 10 || len(q.Fields) != 1 {
						t.Errorf("query %+v", q)
					}
				}
			})
		}
	}
}

// TestReadObjectPageAfterTheEndRefused: a service that answers 400 (or
// 404) to the page after a full last page, rather than an empty page,
// ends the read there: all rows, no error.
func TestReadObjectPageAfterTheEndRefused(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound} {
		f := &fakeReport{rows: 50, totals: totalsBoth, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p > 5 {
				writeJSON(w, status, map[string]any{"response": map[string]any{"code": 2001, "name": "ParameterError", "message": "page out of range"}})
				return true
			}
			return false
		}}
		c, _ := newTestClient(t, f, WithPageSize(10))
		col := newCollector()
		st, err := c.ReadObject(context.Background(), "course", Query{}, col.fn)
		if err != nil {
			t.Fatalf("%d past the end: %v", status, err)
		}
		col.checkAll(t, 50)
		if st.Rows != 50 || f.requests.Load() != 6 {
			t.Errorf("%d past the end: %+v, %d requests; want 50 rows in 6 requests", status, st, f.requests.Load())
		}
	}
}

func TestReadObjectCappedPageSize(t *testing.T) {
	t.Parallel()
	for _, mode := range []int{totalsBoth, totalsNone} {
		f := &fakeReport{rows: 23, totals: mode, maxPerPage: 5}
		c, _ := newTestClient(t, f, WithPageSize(10))
		col := newCollector()
		if _, err := c.ReadObject(context.Background(), "course", Query{}, col.fn); err != nil {
			t.Fatal(err)
		}
		col.checkAll(t, 23)
	}
}

func TestReadObjectIntegrity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		f    *fakeReport
		want string
	}{
		{"duplicated page echoing its number", &fakeReport{rows: 50, remap: func(p int) int {
			if p == 3 {
				return 2
			}
			return p
		}}, "says it is page 2"},
		{"duplicated page without echo", &fakeReport{rows: 50, noEcho: true, remap: func(p int) int {
			if p == 3 {
				return 2
			}
			return p
		}}, "byte for byte"},
		{"duplicated page without echo or totals", &fakeReport{rows: 50, noEcho: true, totals: totalsNone, remap: func(p int) int {
			if p == 4 {
				return 1
			}
			return p
		}}, "repeats page 1"},
		{"total higher than rows", &fakeReport{rows: 50, totals: totalsResults, total: func(n int) int { return n + 3 }}, "page 6 of 6 holds 0 rows"},
		{"total lower than rows", &fakeReport{rows: 50, totals: totalsResults, total: func(n int) int { return n - 3 }}, "page 5 of 5 holds 10 rows, want 7"},
		// Totals a whole page short: every page is as announced, and only
		// the page after the last, full one shows the rows left.
		{"totals a page short", &fakeReport{rows: 50, totals: totalsBoth, total: func(n int) int { return n - 10 }}, "page 5 of 4 holds 10 rows, want 0"},
		{"totalPages a page short", &fakeReport{rows: 50, totals: totalsPages, total: func(n int) int { return n - 10 }}, "page 5 of 4 holds 10 rows, want 0"},
		{"totalPages does not fit totalResults", &fakeReport{rows: 50, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			writeJSON(w, 200, map[string]any{"page": p, "totalResults": 50, "totalPages": 7, "results": []map[string]int{{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}, {"id": 6}, {"id": 7}, {"id": 8}, {"id": 9}}})
			return true
		}}, "does not fit"},
		{"gap: empty page in the middle", &fakeReport{rows: 50, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p == 3 {
				_, _ = w.Write([]byte(`{"page":3,"resultsPerPage":10,"totalResults":50,"totalPages":5,"results":[]}`))
				return true
			}
			return false
		}}, "page 3 of 5 holds 0 rows"},
		{"gap without totals: short page then rows", &fakeReport{rows: 50, totals: totalsNone, noEcho: true, remap: func(p int) int {
			if p == 2 {
				return 99
			}
			return p
		}}, "page past the end must be empty"},
		{"gap without totals: short last page of a window", &fakeReport{rows: 70, totals: totalsNone, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p == 5 { // window 2..5 ends with a short page, page 6 still has rows
				_, _ = w.Write([]byte(`{"page":5,"results":[{"id":40},{"id":41}]}`))
				return true
			}
			return false
		}}, "page 6 holds 10 rows after page 5"},
		{"page bigger than asked", &fakeReport{rows: 50, totals: totalsNone, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p == 2 {
				_, _ = w.Write(pageBody(1, 11, 50, totalsNone, true, nil))
				return true
			}
			return false
		}}, "more than the page size"},
		{"total changes during the read", &fakeReport{rows: 50, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p == 4 {
				_, _ = w.Write(pageBody(4, 10, 60, totalsBoth, false, nil))
				return true
			}
			return false
		}}, "data changed during the read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestClient(t, tc.f, WithPageSize(10), WithConcurrency(4))
			_, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn)
			var ie *IntegrityError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *IntegrityError", err)
			}
			if ie.Object != "course" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if ie.Reads != 1+DefaultHealing {
				t.Fatalf("reads = %d, want %d (a persistent fault is re-read WithHealing times, then reported)", ie.Reads, 1+DefaultHealing)
			}
		})
	}
}

// A fault of one read only (data moving while paging) is healed: the read
// starts over, the PageFunc is told to discard, and the rows come out
// exactly once.
func TestReadObjectHealsDrift(t *testing.T) {
	t.Parallel()
	var faulted atomic.Bool
	f := &fakeReport{rows: 50}
	f.fault = func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 4 && faulted.CompareAndSwap(false, true) {
			_, _ = w.Write(pageBody(4, 10, 60, totalsBoth, false, nil))
			return true
		}
		return false
	}
	c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(4))
	col := newCollector()
	st, err := c.ReadObject(context.Background(), "course", Query{}, col.fn)
	if err != nil {
		t.Fatal(err)
	}
	col.checkAll(t, 50)
	// 5 pages and the empty one after the last, full one.
	if col.restarts != 1 || st.Restarts != 1 || st.Rows != 50 || st.Pages != 6 {
		t.Fatalf("restarts %d, stats %+v; want 1 restart, 6 pages, 50 rows", col.restarts, st)
	}
}

// A PageFunc that ignores Restart fails on the nil body, so it cannot
// keep rows of a discarded read.
func TestReadObjectRestartUnawareFails(t *testing.T) {
	t.Parallel()
	var faulted atomic.Bool
	f := &fakeReport{rows: 50}
	f.fault = func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 2 && faulted.CompareAndSwap(false, true) {
			_, _ = w.Write(pageBody(2, 10, 40, totalsBoth, false, nil))
			return true
		}
		return false
	}
	c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(1))
	_, err := c.ReadObject(context.Background(), "course", Query{}, func(ctx context.Context, p *Page) (service.PageInfo, error) {
		return ParsePageInfo(p.Body)
	})
	var pe *PageError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PageError from the PageFunc", err)
	}
}

// Overlapping pages with consistent totals are invisible to counts; key
// fields catch them.
func TestReadObjectDuplicateKeys(t *testing.T) {
	t.Parallel()
	overlap := func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 3 { // rows 15..24 instead of 20..29
			b := pageBody(3, 10, 50, totalsBoth, false, nil)
			b = bytes.Replace(b, []byte(`{"id":20,"name":"row 20"}`), []byte(`{"id":15,"name":"row 15 again"}`), 1)
			_, _ = w.Write(b)
			return true
		}
		return false
	}
	c, _ := newTestClient(t, &fakeReport{rows: 50, fault: overlap}, WithPageSize(10), WithHealing(0))
	_, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().keyed)
	var ie *IntegrityError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "row key 15") {
		t.Fatalf("err = %v, want a duplicate key *IntegrityError", err)
	}
	// A read whose keys spilled out of memory finds it too, when the read
	// ends.
	c4, _ := newTestClient(t, &fakeReport{rows: 50, fault: overlap}, WithPageSize(10), WithHealing(0), withKeyMemory(3))
	_, err = c4.ReadObject(context.Background(), "course", Query{}, newCollector().keyed)
	// (Pages 2 and 3 are fetched side by side: either may be read first.)
	if !errors.As(err, &ie) || !regexp.MustCompile(`row key 15 on page [23] was already read on page [23]`).MatchString(err.Error()) {
		t.Fatalf("keys spilled: err = %v, want a duplicate key *IntegrityError", err)
	}
	// No spill file to be had: the keys stay in memory, and the
	// duplicate is found as before.
	noSpace := func() (*os.File, error) { return nil, errors.New("no space left on device") }
	c5, _ := newTestClient(t, &fakeReport{rows: 50, fault: overlap}, WithPageSize(10), WithHealing(0), withKeyMemory(3), WithSpillFiles(noSpace))
	_, err = c5.ReadObject(context.Background(), "course", Query{}, newCollector().keyed)
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "row key 15 on page") {
		t.Fatalf("no spill file: err = %v, want a duplicate key *IntegrityError", err)
	}
	// Without keys the overlap passes the counts: the reason to yield keys.
	c2, _ := newTestClient(t, &fakeReport{rows: 50, fault: overlap}, WithPageSize(10))
	if _, err := c2.ReadObject(context.Background(), "course", Query{}, newCollector().fn); err != nil {
		t.Fatalf("without keys: %v", err)
	}
	// Keys that do not match the rows are the PageFunc's fault, reported.
	c3, _ := newTestClient(t, &fakeReport{rows: 5}, WithPageSize(10))
	short := func(ctx context.Context, p *Page) (service.PageInfo, error) {
		info, err := newCollector().keyed(ctx, p)
		if len(info.Keys) > 1 {
			info.Keys = info.Keys[:1]
		}
		return info, err
	}
	if _, err := c3.ReadObject(context.Background(), "course", Query{}, short); err == nil ||
		!strings.Contains(err.Error(), "the PageFunc counted") {
		t.Fatalf("keys not matching rows: err = %v", err)
	}
}

func TestReadObjectPageFuncError(t *testing.T) {
	t.Parallel()
	f := &fakeReport{rows: 100}
	c, _ := newTestClient(t, f, WithPageSize(10))
	boom := errors.New("boom")
	_, err := c.ReadObject(context.Background(), "course", Query{}, func(ctx context.Context, p *Page) (service.PageInfo, error) {
		if p.Number == 4 {
			return service.PageInfo{}, boom
		}
		return ParsePageInfo(p.Body)
	})
	var pe *PageError
	if !errors.As(err, &pe) || pe.Page != 4 || pe.Object != "course" || !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadObjectPageErrorWrapsAPIError(t *testing.T) {
	t.Parallel()
	f := &fakeReport{rows: 100, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 3 {
			writeJSON(w, 404, map[string]any{"response": map[string]any{"code": 3004, "name": "ResourceNotFoundError", "message": "gone"}})
			return true
		}
		return false
	}}
	c, _ := newTestClient(t, f, WithPageSize(10))
	_, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn)
	var pe *PageError
	var ae *APIError
	if !errors.As(err, &pe) || pe.Page != 3 || !errors.As(err, &ae) || ae.Code != 3004 || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// Cancelling the context stops the workers: pages 2.. block in the handler
// until their request is cancelled, and ReadObject returns the cause.
func TestReadObjectCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("operator stopped the run")
	var blocked atomic.Int64
	f := &fakeReport{rows: 1000, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 1 {
			return false
		}
		if blocked.Add(1) == 3 {
			cancel(stop) // three workers are in flight
		}
		<-r.Context().Done()
		return true
	}}
	c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(3))
	var calls atomic.Int64
	st, err := c.ReadObject(ctx, "course", Query{}, func(ctx context.Context, p *Page) (service.PageInfo, error) {
		calls.Add(1)
		return ParsePageInfo(p.Body)
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the cancel cause", err)
	}
	if calls.Load() != 1 || st.Pages != 1 {
		t.Fatalf("fn called %d times, stats %+v; want page 1 only", calls.Load(), st)
	}
	if n := blocked.Load(); n > 3 {
		t.Fatalf("%d page requests started, want at most the 3 workers", n)
	}
}

// A PageFunc error cancels the other workers' requests.
func TestReadObjectErrorCancelsWorkers(t *testing.T) {
	t.Parallel()
	f := &fakeReport{rows: 1000, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p <= 2 {
			return false
		}
		<-r.Context().Done() // only ends if the client cancels
		return true
	}}
	c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(4))
	boom := errors.New("boom")
	_, err := c.ReadObject(context.Background(), "course", Query{}, func(ctx context.Context, p *Page) (service.PageInfo, error) {
		if p.Number == 2 {
			return service.PageInfo{}, boom
		}
		return ParsePageInfo(p.Body)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadObjectArguments(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, &fakeReport{})
	fn := newCollector().fn
	for name, call := range map[string]func() error{
		"empty id": func() error { _, err := c.ReadObject(context.Background(), "", Query{}, fn); return err },
		"nil fn":   func() error { _, err := c.ReadObject(context.Background(), "course", Query{}, nil); return err },
		"page 2":   func() error { _, err := c.ReadObject(context.Background(), "course", Query{Page: 2}, fn); return err },
	} {
		if call() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestQueryPage(t *testing.T) {
	t.Parallel()
	f := &fakeReport{rows: 25}
	c, _ := newTestClient(t, f)
	p, err := c.QueryPage(context.Background(), "course", Query{Page: 3, ResultsPerPage: 10})
	if err != nil {
		t.Fatal(err)
	}
	info, err := ParsePageInfo(p.Body)
	if err != nil {
		t.Fatal(err)
	}
	if p.Number != 3 || p.Object != "course" || info.Rows != 5 || info.Page != 3 || info.TotalResults != 25 || info.TotalPages != 3 {
		t.Fatalf("page %+v info %+v", p, info)
	}
}

func TestParsePageInfo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body string
		want service.PageInfo
		err  bool
	}{
		{`{"page":2,"resultsPerPage":10,"totalResults":25,"totalPages":3,"results":[{},{},{}]}`, service.PageInfo{Page: 2, ResultsPerPage: 10, TotalResults: 25, TotalPages: 3, Rows: 3, RowsHash: 0, Keys: nil}, false},
		{`{"results":[]}`, service.PageInfo{Page: 0, ResultsPerPage: 0, TotalResults: -1, TotalPages: -1, Rows: 0, RowsHash: 0, Keys: nil}, false},
		{`{"results":null}`, service.PageInfo{Page: 0, ResultsPerPage: 0, TotalResults: -1, TotalPages: -1, Rows: 0, RowsHash: 0, Keys: nil}, false},
		{`{"results":[1,[2],{"a":3},"x"],"totalResults":0}`, service.PageInfo{Page: 0, ResultsPerPage: 0, TotalResults: 0, TotalPages: -1, Rows: 4, RowsHash: 0, Keys: nil}, false},
		{`{"rows":[]}`, service.PageInfo{}, true},
		{`{"results":{}}`, service.PageInfo{}, true},
		{`{"results":[{"a":1},`, service.PageInfo{}, true},
		{`[]`, service.PageInfo{}, true},
		{`{"results":[],"page":"2"}`, service.PageInfo{Page: 2, ResultsPerPage: 0, TotalResults: -1, TotalPages: -1, Rows: 0, RowsHash: 0, Keys: nil}, false},
		{`{"results":[],"page":null,"totalResults":null}`, service.PageInfo{Page: 0, ResultsPerPage: 0, TotalResults: -1, TotalPages: -1, Rows: 0, RowsHash: 0, Keys: nil}, false},
		{`{"results":[],"page":"two"}`, service.PageInfo{}, true},
		{`{"results":[],"totalResults":12.5}`, service.PageInfo{}, true},
		{`{"results":[],"totalPages":true}`, service.PageInfo{}, true},
	}
	for _, tc := range cases {
		got, err := ParsePageInfo([]byte(tc.body))
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParsePageInfo(%s) = %+v, %v; want %+v, err %v", tc.body, got, err, tc.want, tc.err)
		}
	}
}

// service-shapes.md, Client tolerance: "ints sent as 56.0" (and the
// decoder of a sync, transform.walkPage, reads page headers as integral
// numbers or numeric strings). ParsePageInfo, which sepipe plan and
// sepipe discover use on the same pages, reads them the same way.
func TestParsePageInfoToleratesIntegralVariants(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"page":1,"resultsPerPage":100,"totalResults":1234.0,"totalPages":13,"results":[]}`,
		`{"page":"1","resultsPerPage":"100","totalResults":"1234","totalPages":"13","results":[]}`,
	} {
		info, err := ParsePageInfo([]byte(body))
		if err != nil || info.TotalResults != 1234 || info.TotalPages != 13 {
			t.Errorf("%s: info %+v, err %v", body, info, err)
		}
	}
}

func FuzzParsePageInfo(f *testing.F) {
	f.Add([]byte(`{"page":2,"resultsPerPage":10,"totalResults":25,"totalPages":3,"results":[{},{},{}]}`))
	f.Add([]byte(`{"results":null}`))
	f.Add([]byte(`{"results":[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := ParsePageInfo(body)
		if err != nil {
			return
		}
		if info.Rows < 0 {
			t.Fatalf("negative rows %d", info.Rows)
		}
	})
}

// TestReadObjectWithoutTotalsPagesPastTheEndRefused: without totals the
// reader asks for windows of pages, some past the end; a service that
// refuses those (400, 404 or 416) ends the read there, as an empty page
// would (it failed the read); rows after a refused page are still an
// integrity failure.
func TestReadObjectWithoutTotalsPagesPastTheEndRefused(t *testing.T) {
	t.Parallel()
	refuse := func(status, from int) func(w http.ResponseWriter, r *http.Request, p int) bool {
		return func(w http.ResponseWriter, r *http.Request, p int) bool {
			if p >= from {
				writeJSON(w, status, map[string]any{"response": map[string]any{"code": 2001, "name": "ParameterError", "message": "page out of range"}})
				return true
			}
			return false
		}
	}
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestedRangeNotSatisfiable} {
		for _, rows := range []int{47, 50} { // a short last page, and a full one
			f := &fakeReport{rows: rows, totals: totalsNone, fault: refuse(status, 6)}
			c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(4))
			col := newCollector()
			if _, err := c.ReadObject(context.Background(), "course", Query{}, col.fn); err != nil {
				t.Fatalf("%d rows, %d past the end: %v", rows, status, err)
			}
			col.checkAll(t, rows)
		}
	}
	// Page 3 refused, pages 4 and 5 hold rows: not an end.
	f := &fakeReport{rows: 50, totals: totalsNone, fault: func(w http.ResponseWriter, r *http.Request, p int) bool {
		if p == 3 {
			writeJSON(w, http.StatusNotFound, map[string]any{"response": map[string]any{"code": 2001, "message": "no such page"}})
			return true
		}
		return false
	}}
	c, _ := newTestClient(t, f, WithPageSize(10), WithConcurrency(4))
	if _, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn); err == nil || !strings.Contains(err.Error(), "after page 3") {
		t.Errorf("rows after a refused page: %v, want an integrity failure", err)
	}
}

// Object ids come from the service and become URL path segments (and file
// names): "." and ".." would address another level, so the reporting
// reader refuses them, as ReadList does, naming the id, before any
// request; Objects leaves such an object out.
func TestReportingRefusesDotObjectIDs(t *testing.T) {
	t.Parallel()
	var paths []string
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/objects") {
			writeJSON(w, 200, map[string]any{"objects": []map[string]any{
				{"id": "course", "displayName": "Course"}, {"id": "..", "displayName": "Up"}, {"id": ".", "displayName": "Here"},
				{"id": "a/b", "displayName": "Slash"}}})
			return
		}
		http.NotFound(w, r)
	})
	c, _ := newTestClient(t, h)
	ctx := context.Background()
	for _, id := range []string{".", ".."} {
		want := `bad path segment "` + id + `"`
		if _, err := c.Describe(ctx, id); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `describe "`+id+`"`) {
			t.Errorf("Describe(%q): err = %v, want one naming the id", id, err)
		}
		_, err := c.QueryPage(ctx, id, Query{})
		var pe *PageError
		if !errors.As(err, &pe) || pe.Object != id || !strings.Contains(err.Error(), want) {
			t.Errorf("QueryPage(%q): err = %v, want a *PageError naming the id", id, err)
		}
		_, err = c.ReadObject(ctx, id, Query{}, func(context.Context, *Page) (service.PageInfo, error) { return service.PageInfo{}, nil })
		if !errors.As(err, &pe) || pe.Object != id || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadObject(%q): err = %v, want a *PageError naming the id", id, err)
		}
	}
	if len(paths) != 0 {
		t.Fatalf("requests sent for refused ids: %v", paths)
	}
	objs, err := c.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range objs {
		ids = append(ids, o.ID)
	}
	if strings.Join(ids, " ") != "course a/b" || !strings.HasSuffix(objs[1].ObjectURL, "/objects/a%2Fb") {
		t.Fatalf("objects %v (%+v), want course and a/b", ids, objs)
	}
}

// TestReadObjectSilentlyCappedPageSize: a service that caps the page size
// below what was asked without echoing resultsPerPage (the interface does
// not show its maximum) is read at page 1's count, when its totals say
// more pages follow: the read failed its integrity check on page 1 ("holds
// 5 rows, want 10").
func TestReadObjectSilentlyCappedPageSize(t *testing.T) {
	t.Parallel()
	for _, mode := range []int{totalsBoth, totalsResults, totalsPages} {
		f := &fakeReport{rows: 23, totals: mode, maxPerPage: 5, noEcho: true}
		c, _ := newTestClient(t, f, WithPageSize(10))
		col := newCollector()
		if _, err := c.ReadObject(context.Background(), "course", Query{}, col.fn); err != nil {
			t.Fatalf("totals mode %d: %v", mode, err)
		}
		col.checkAll(t, 23)
	}
}

// TestReadObjectPageSizeRefused: a service that answers 400 to a page size
// past its maximum is read at the largest of fallbackPageSizes it takes,
// once page 1 is refused; the client remembers that size, so a second
// object (and a re-read) asks for it at once; a query the service refuses
// for another reason fails as before, after one request at each smaller
// size.
func TestReadObjectPageSizeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max, want int
	}{{500, 500}, {300, 250}, {200, 200}, {199, 100}} {
		var sizes []int
		var mu sync.Mutex
		refuse := func(w http.ResponseWriter, r *http.Request, _ int) bool {
			raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
			var q wireQuery
			_ = json.Unmarshal(raw, &q)
			mu.Lock()
			sizes = append(sizes, q.ResultsPerPage)
			mu.Unlock()
			if q.ResultsPerPage > tc.max {
				writeJSON(w, 400, map[string]any{"response": map[string]any{"code": 2001, "name": "InvalidParameterError", "message": fmt.Sprintf("resultsPerPage must be at most %d", tc.max)}})
				return true
			}
			return false
		}
		f := &fakeReport{rows: 1230, totals: totalsBoth, fault: refuse}
		c, _ := newTestClient(t, f, WithPageSize(1000))
		col := newCollector()
		if _, err := c.ReadObject(context.Background(), "course", Query{}, col.fn); err != nil {
			t.Fatalf("max %d: a read past the service's page size maximum: %v", tc.max, err)
		}
		col.checkAll(t, 1230)
		mu.Lock()
		probes := 0
		for _, n := range sizes {
			if n > tc.want {
				probes++
			} else if n != tc.want {
				t.Errorf("max %d: a page asked at %d rows, want %d", tc.max, n, tc.want)
			}
		}
		sizes = nil
		mu.Unlock()
		if want := map[int]int{500: 1, 300: 2, 200: 3, 199: 4}[tc.max]; probes != want {
			t.Errorf("max %d: %d refused requests, want %d (one per size tried above the maximum)", tc.max, probes, want)
		}
		// A second read of the same client asks for the size taken at once.
		col = newCollector()
		if _, err := c.ReadObject(context.Background(), "course", Query{}, col.fn); err != nil {
			t.Fatalf("max %d: second read: %v", tc.max, err)
		}
		col.checkAll(t, 1230)
		mu.Lock()
		for _, n := range sizes {
			if n != tc.want {
				t.Errorf("max %d: the second read asked for %d rows a page, want %d", tc.max, n, tc.want)
			}
		}
		mu.Unlock()
	}

	bad := &fakeReport{rows: 230, totals: totalsBoth, fault: func(w http.ResponseWriter, r *http.Request, _ int) bool {
		writeJSON(w, 400, map[string]any{"response": map[string]any{"code": 2001, "name": "InvalidParameterError", "message": "unknown field nope"}})
		return true
	}}
	c, _ := newTestClient(t, bad, WithPageSize(1000))
	_, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), "unknown field nope") {
		t.Fatalf("a query refused for a bad field: %v, want the service's 400", err)
	}
	if n := bad.requests.Load(); n != 5 {
		t.Errorf("%d requests for a refused query, want 5 (at 1000, then at each smaller size)", n)
	}
	if n := c.pageCap.Load(); n != 0 {
		t.Errorf("a query refused at every size taught the client a page size of %d", n)
	}
}
