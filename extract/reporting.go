package extract

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Object is one entry of the report object list.
type Object struct {
	ID          string
	DisplayName string
	// DescribeURL and ObjectURL are the service's urls.describe and
	// urls.object resolved to absolute URLs (absolute paths are taken on the
	// tenant host). When the service leaves one out it is the standard
	// path. The client never sends requests to them: Describe and the query
	// methods build their URLs from the base URL and the object id, so the
	// token cannot be sent to a host named by a response.
	DescribeURL string
	ObjectURL   string
}

// Field describes one field of a report object.
type Field struct {
	ID          string
	DisplayName string
	Type        string   // as the service wrote it: int, picklist, string, float, percent, date
	Options     []string // allowed values of a picklist field
}

// Objects lists the report objects (GET /objects).
func (c *Client) Objects(ctx context.Context) ([]Object, error) {
	info := reqInfo{op: "objects"}
	buf := c.getBuf()
	defer c.putBuf(buf)
	if _, err := c.get(ctx, info, c.endpoint("objects"), buf); err != nil {
		return nil, err
	}
	var body struct {
		Objects *[]struct {
			ID          string `json:"id"`
			DisplayName string `json:"displayName"`
			URLs        struct {
				Describe string `json:"describe"`
				Object   string `json:"object"`
			} `json:"urls"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
		return nil, fmt.Errorf("%s: decoding response: %w", info, err)
	}
	if body.Objects == nil {
		return nil, fmt.Errorf("%s: response has no \"objects\" list", info)
	}
	out := make([]Object, 0, len(*body.Objects))
	for i, o := range *body.Objects {
		if o.ID == "" {
			return nil, fmt.Errorf("%s: object %d has no id", info, i)
		}
		d, err := c.resolve(o.URLs.Describe)
		if err != nil {
			return nil, fmt.Errorf("%s: object %q: urls.describe: %w", info, o.ID, err)
		}
		u, err := c.resolve(o.URLs.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: object %q: urls.object: %w", info, o.ID, err)
		}
		if d == "" {
			d = c.endpoint("objects", o.ID, "describe").String()
		}
		if u == "" {
			u = c.endpoint("objects", o.ID).String()
		}
		out = append(out, Object{ID: o.ID, DisplayName: o.DisplayName, DescribeURL: d, ObjectURL: u})
	}
	return out, nil
}

// Describe lists the fields of an object (GET /objects/{id}/describe).
func (c *Client) Describe(ctx context.Context, objectID string) ([]Field, error) {
	info := reqInfo{op: "describe", object: objectID}
	if objectID == "" {
		return nil, fmt.Errorf("%s: empty object id", info)
	}
	buf := c.getBuf()
	defer c.putBuf(buf)
	if _, err := c.get(ctx, info, c.endpoint("objects", objectID, "describe"), buf); err != nil {
		return nil, err
	}
	var body struct {
		Fields *[]struct {
			ID          string   `json:"id"`
			DisplayName string   `json:"displayName"`
			Type        string   `json:"type"`
			Options     []string `json:"options"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
		return nil, fmt.Errorf("%s: decoding response: %w", info, err)
	}
	if body.Fields == nil {
		return nil, fmt.Errorf("%s: response has no \"fields\" list", info)
	}
	out := make([]Field, 0, len(*body.Fields))
	for i, f := range *body.Fields {
		if f.ID == "" {
			return nil, fmt.Errorf("%s: field %d has no id", info, i)
		}
		out = append(out, Field{ID: f.ID, DisplayName: f.DisplayName, Type: f.Type, Options: f.Options})
	}
	return out, nil
}

// Page is one results page as the service sent it.
type Page struct {
	Object string
	Number int
	Body   []byte // raw JSON of the page
}

// PageInfo is what a page says about itself.
type PageInfo struct {
	Page, ResultsPerPage int   // as echoed by the page; 0 if absent
	TotalResults         int64 // -1 if absent
	TotalPages           int   // -1 if absent
	Rows                 int   // rows in "results"
}

// ParsePageInfo reads the paging keys (page, resultsPerPage, totalResults,
// totalPages) and counts the rows of "results" in a results page. A body
// without a "results" array is an error; "results": null counts as empty.
func ParsePageInfo(body []byte) (PageInfo, error) {
	var p struct {
		Page           *int            `json:"page"`
		ResultsPerPage *int            `json:"resultsPerPage"`
		TotalResults   *int64          `json:"totalResults"`
		TotalPages     *int            `json:"totalPages"`
		Results        json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return PageInfo{}, fmt.Errorf("extract: parsing page: %w", err)
	}
	if len(p.Results) == 0 {
		return PageInfo{}, errors.New(`extract: parsing page: no "results" array`)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(p.Results, &rows); err != nil {
		return PageInfo{}, fmt.Errorf("extract: parsing page: \"results\": %w", err)
	}
	info := PageInfo{TotalResults: -1, TotalPages: -1}
	if p.Page != nil {
		info.Page = *p.Page
	}
	if p.ResultsPerPage != nil {
		info.ResultsPerPage = *p.ResultsPerPage
	}
	if p.TotalResults != nil {
		info.TotalResults = *p.TotalResults
	}
	if p.TotalPages != nil {
		info.TotalPages = *p.TotalPages
	}
	info.Rows = len(rows)
	return info, nil
}

// PageFunc handles one page. It is called from several goroutines at once,
// in no particular page order, so it must be safe for concurrent use. It
// must not retain p.Body after it returns (the client reuses buffers). It
// returns what the page said about itself (ParsePageInfo, or the caller's
// own decoding). An error stops the read. When ReadObject fails, every
// page already handed to the PageFunc must be discarded.
type PageFunc func(ctx context.Context, p *Page) (PageInfo, error)

// ReadStats says what a ReadObject cost.
type ReadStats struct {
	Pages    int           // pages handed to the PageFunc
	Rows     int64         // rows they held
	Requests int           // HTTP requests sent, retries included
	Retries  int           // requests that were retries
	Waited   time.Duration // time slept between retries (Retry-After and backoff), summed over workers
}

// queryURL builds GET /objects/{id}?parameters=<base64 json>.
func (c *Client) queryURL(objectID string, q Query) (*url.URL, string, error) {
	doc, err := q.document()
	if err != nil {
		return nil, "", err
	}
	u := c.endpoint("objects", objectID)
	u.RawQuery = "parameters=" + url.QueryEscape(base64.StdEncoding.EncodeToString(doc))
	return u, string(doc), nil
}

// QueryPage fetches one results page with q as given (q.Page 0 is reported
// as page 1, the service's first page). The returned Body belongs to the
// caller. Failures are *PageError.
func (c *Client) QueryPage(ctx context.Context, objectID string, q Query) (*Page, error) {
	n := max(q.Page, 1)
	if objectID == "" {
		return nil, &PageError{Object: objectID, Page: n, Err: errors.New("empty object id")}
	}
	u, params, err := c.queryURL(objectID, q)
	if err != nil {
		return nil, &PageError{Object: objectID, Page: n, Err: err}
	}
	var buf bytes.Buffer
	if _, err := c.get(ctx, reqInfo{op: "query", object: objectID, page: n, params: params}, u, &buf); err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &PageError{Object: objectID, Page: n, Err: err}
	}
	return &Page{Object: objectID, Number: n, Body: buf.Bytes()}, nil
}

// ReadObject reads every page of an object matching q and hands each to fn.
//
// Page 1 is fetched first. When it reports totalPages or totalResults, pages
// 2..N are fetched concurrently (WithConcurrency workers, each calling fn).
// Otherwise pages are fetched in windows of WithConcurrency pages until a
// page is short (fewer rows than the page size) or empty; if the short page
// held rows and was the last fetched, one more page is fetched to check
// that the object really ends there.
//
// The pages are reconciled: the rows must add up to totalResults when
// known, every page but the last must be full, the last must hold the
// remainder, a page past the end must be empty, a page must echo the page
// number asked for (when it echoes one) and no two non-empty pages may be
// byte-identical. Any mismatch is an *IntegrityError. q.Page must be 0 or
// 1; q.ResultsPerPage 0 means the client's page size. If page 1 echoes a
// smaller resultsPerPage (the service capped it), that size is used to
// reconcile.
//
// Cancelling ctx stops every worker and returns context.Cause(ctx). Other
// failures are *PageError or *IntegrityError. ReadStats is filled in
// either case.
func (c *Client) ReadObject(ctx context.Context, objectID string, q Query, fn PageFunc) (ReadStats, error) {
	switch {
	case objectID == "":
		return ReadStats{}, errors.New("extract: ReadObject: empty object id")
	case fn == nil:
		return ReadStats{}, errors.New("extract: ReadObject: nil PageFunc")
	case q.Page > 1 || q.Page < 0:
		return ReadStats{}, fmt.Errorf("extract: ReadObject %q: query page %d: ReadObject reads from page 1; use QueryPage for one page", objectID, q.Page)
	case q.ResultsPerPage < 0:
		return ReadStats{}, fmt.Errorf("extract: ReadObject %q: negative resultsPerPage %d", objectID, q.ResultsPerPage)
	}
	if q.ResultsPerPage == 0 {
		q.ResultsPerPage = c.pageSize
	}
	r := &reader{c: c, object: objectID, q: q, size: q.ResultsPerPage, fn: fn, seed: maphash.MakeSeed(), seen: map[uint64]int{}}
	err := r.run(ctx)
	if err == nil {
		c.log.DebugContext(ctx, "read object", "object", objectID, "pages", r.pages.Load(), "rows", r.rows.Load(),
			"requests", r.requests.Load(), "retries", r.retries.Load())
	}
	return r.stats(), err
}

// reader is the state of one ReadObject.
type reader struct {
	c      *Client
	object string
	q      Query
	size   int // effective page size; fixed once page 1 is in
	fn     PageFunc

	seed maphash.Seed
	mu   sync.Mutex
	seen map[uint64]int // body hash of non-empty pages → page number

	pages, rows, requests, retries, waited atomic.Int64
}

func (r *reader) stats() ReadStats {
	return ReadStats{
		Pages:    int(r.pages.Load()),
		Rows:     r.rows.Load(),
		Requests: int(r.requests.Load()),
		Retries:  int(r.retries.Load()),
		Waited:   time.Duration(r.waited.Load()),
	}
}

func (r *reader) integrity(expected, got int64, format string, args ...any) error {
	return &IntegrityError{Object: r.object, Expected: expected, Got: got, Detail: fmt.Sprintf(format, args...)}
}

// fetch gets page n, hands it to fn and checks what the page can be
// checked for alone: the echoed page number and repetition.
func (r *reader) fetch(ctx context.Context, n int) (PageInfo, error) {
	buf := r.c.getBuf()
	defer r.c.putBuf(buf)
	q := r.q
	q.Page = n
	u, params, err := r.c.queryURL(r.object, q)
	if err != nil {
		return PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
	}
	st, err := r.c.get(ctx, reqInfo{op: "query", object: r.object, page: n, params: params}, u, buf)
	r.requests.Add(int64(st.attempts))
	r.retries.Add(int64(st.retries()))
	r.waited.Add(int64(st.waited))
	if err != nil {
		if ctx.Err() != nil {
			return PageInfo{}, context.Cause(ctx)
		}
		return PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
	}
	sum := maphash.Bytes(r.seed, buf.Bytes())
	info, err := r.fn(ctx, &Page{Object: r.object, Number: n, Body: buf.Bytes()})
	if err != nil {
		if ctx.Err() != nil {
			return PageInfo{}, context.Cause(ctx)
		}
		return PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
	}
	r.pages.Add(1)
	r.rows.Add(int64(info.Rows))
	switch {
	case info.Rows < 0:
		return info, r.integrity(0, int64(info.Rows), "page %d: negative row count", n)
	case info.Page != 0 && info.Page != n:
		return info, r.integrity(int64(n), int64(info.Page), "page %d was asked for but the page says it is page %d", n, info.Page)
	case n > 1 && info.ResultsPerPage != 0 && info.ResultsPerPage != r.size:
		return info, r.integrity(int64(r.size), int64(info.ResultsPerPage), "page %d says resultsPerPage %d, page 1 used %d", n, info.ResultsPerPage, r.size)
	case n > 1 && info.Rows > r.size:
		return info, r.integrity(int64(r.size), int64(info.Rows), "page %d holds %d rows, more than the page size %d", n, info.Rows, r.size)
	}
	if info.Rows > 0 {
		r.mu.Lock()
		prev, dup := r.seen[sum]
		if !dup {
			r.seen[sum] = n
		}
		r.mu.Unlock()
		if dup {
			return info, r.integrity(int64(n), int64(prev), "page %d repeats page %d byte for byte", n, prev)
		}
	}
	return info, nil
}

func (r *reader) run(ctx context.Context) error {
	first, err := r.fetch(ctx, 1)
	if err != nil {
		return err
	}
	if e := first.ResultsPerPage; e > 0 && e != r.size {
		if e > r.size {
			return r.integrity(int64(r.size), int64(e), "page 1 says resultsPerPage %d, more than the %d asked for", e, r.size)
		}
		r.c.log.WarnContext(ctx, "service capped the page size", "object", r.object, "asked", r.size, "got", e)
		r.size = e
	}
	if first.Rows > r.size {
		return r.integrity(int64(r.size), int64(first.Rows), "page 1 holds %d rows, more than the page size %d", first.Rows, r.size)
	}
	if first.TotalResults < -1 || first.TotalPages < -1 {
		return r.integrity(0, first.TotalResults, "page 1 reports negative totals (totalResults %d, totalPages %d)", first.TotalResults, first.TotalPages)
	}
	if first.TotalResults >= 0 || first.TotalPages >= 0 {
		return r.readKnown(ctx, first)
	}
	return r.readWindows(ctx, first)
}

// readKnown reads pages 2..N when page 1 gave the totals.
func (r *reader) readKnown(ctx context.Context, first PageInfo) error {
	total, size := first.TotalResults, int64(r.size)
	n := first.TotalPages
	if total >= 0 {
		want := (total + size - 1) / size
		switch {
		case n < 0:
			n = int(want)
		case int64(n) != want && !(total == 0 && n == 1):
			return r.integrity(want, int64(n), "totalPages %d does not fit totalResults %d at %d rows per page", n, total, size)
		}
	}
	// expect gives the row count range of page p of n.
	expect := func(p int) (lo, hi int64) {
		switch {
		case int64(p) > pagesWithRows(n, total):
			return 0, 0 // past the end
		case p < n:
			return size, size
		case total >= 0:
			rest := total - int64(n-1)*size
			return rest, rest
		case n == 1:
			return 0, size // totalPages 1 may be an empty object
		default:
			return 1, size
		}
	}
	check := func(p int, info PageInfo) error {
		lo, hi := expect(p)
		got := int64(info.Rows)
		if got < lo || got > hi {
			exp := lo
			if got > hi {
				exp = hi
			}
			return r.integrity(exp, got, "page %d of %d holds %d rows, want %s (totalResults %d, totalPages %d, %d per page)",
				p, n, got, rowRange(lo, hi), total, first.TotalPages, size)
		}
		if p > 1 {
			if info.TotalResults >= 0 && total >= 0 && info.TotalResults != total {
				return r.integrity(total, info.TotalResults, "page %d reports totalResults %d, page 1 reported %d: the data changed during the read", p, info.TotalResults, total)
			}
			if info.TotalPages >= 0 && first.TotalPages >= 0 && info.TotalPages != first.TotalPages {
				return r.integrity(int64(first.TotalPages), int64(info.TotalPages), "page %d reports totalPages %d, page 1 reported %d: the data changed during the read", p, info.TotalPages, first.TotalPages)
			}
		}
		return nil
	}
	if err := check(1, first); err != nil {
		return err
	}
	if n >= 2 {
		if err := r.fetchRange(ctx, 2, n, check); err != nil {
			return err
		}
	}
	if got := r.rows.Load(); total >= 0 && got != total {
		return r.integrity(total, got, "rows read do not add up to totalResults")
	}
	return nil
}

// pagesWithRows is the number of pages that hold rows: n, or 0 for an empty object.
func pagesWithRows(n int, total int64) int64 {
	if total == 0 {
		return 0
	}
	return int64(n)
}

func rowRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// readWindows reads pages when no totals are known: windows of
// concurrency pages until a short page, then checks that what follows the
// short page is empty.
func (r *reader) readWindows(ctx context.Context, first PageInfo) error {
	shortAt, shortRows := 0, 0
	if first.Rows < r.size {
		shortAt, shortRows = 1, first.Rows
	}
	last := 1
	for shortAt == 0 || (shortAt == last && shortRows > 0) {
		w := r.c.concurrency
		if shortAt != 0 {
			w = 1 // only to confirm the end
		}
		from, to := last+1, last+w
		rows := make([]int, w)
		err := r.fetchRange(ctx, from, to, func(p int, info PageInfo) error {
			if info.Rows > r.size {
				return r.integrity(int64(r.size), int64(info.Rows), "page %d holds more rows than the page size", p)
			}
			rows[p-from] = info.Rows
			return nil
		})
		if err != nil {
			return err
		}
		for i, got := range rows {
			p := from + i
			switch {
			case shortAt != 0 && got != 0:
				return r.integrity(0, int64(got), "page %d holds %d rows after page %d held %d of %d: a page past the end must be empty (gap or moving data)",
					p, got, shortAt, shortRows, r.size)
			case shortAt == 0 && got < r.size:
				shortAt, shortRows = p, got
			}
		}
		last = to
	}
	return nil
}

// fetchRange fetches pages from..to with at most concurrency workers; the
// first error cancels the others.
func (r *reader) fetchRange(ctx context.Context, from, to int, check func(p int, info PageInfo) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.c.concurrency)
	for p := from; p <= to; p++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			info, err := r.fetch(gctx, p)
			if err != nil {
				return err
			}
			return check(p, info)
		})
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
