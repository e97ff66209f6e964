package extract

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sepipe/sepipe/service"
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

// Objects lists the report objects (GET /objects).
func (c *Client) Objects(ctx context.Context) ([]Object, error) {
	info := reqInfo{op: "objects"}
	u, err := c.endpoint("objects")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", info, err)
	}
	buf := c.getBuf()
	defer c.putBuf(buf)
	if _, err := c.get(ctx, info, u, buf); err != nil {
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
			c.log.WarnContext(ctx, "the service listed a report object without an id; it is left out", "position", i)
			continue
		}
		if err := checkSegment(o.ID); err != nil {
			// No request can address it: its path would climb a level.
			c.log.WarnContext(ctx, "the service listed a report object whose id cannot be a path segment; it is left out", "object", o.ID, "position", i, "err", err)
			continue
		}
		// An unreadable url fails nothing: the client's own path for the
		// id (each segment escaped) serves instead.
		d, err := c.resolve(o.URLs.Describe)
		if err != nil {
			c.log.WarnContext(ctx, "unreadable urls.describe; using the standard path", "object", o.ID, "err", err)
			d = ""
		}
		u, err := c.resolve(o.URLs.Object)
		if err != nil {
			c.log.WarnContext(ctx, "unreadable urls.object; using the standard path", "object", o.ID, "err", err)
			u = ""
		}
		if d == "" {
			std, _ := c.endpoint("objects", o.ID, "describe") // the id was checked above
			d = std.String()
		}
		if u == "" {
			std, _ := c.endpoint("objects", o.ID)
			u = std.String()
		}
		out = append(out, Object{ID: o.ID, DisplayName: o.DisplayName, DescribeURL: d, ObjectURL: u})
	}
	return out, nil
}

// Describe lists the fields of an object (GET /objects/{id}/describe).
func (c *Client) Describe(ctx context.Context, objectID string) ([]service.Field, error) {
	info := reqInfo{op: "describe", object: objectID}
	if objectID == "" {
		return nil, fmt.Errorf("%s: empty object id", info)
	}
	u, err := c.endpoint("objects", objectID, "describe")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", info, err)
	}
	buf := c.getBuf()
	defer c.putBuf(buf)
	if _, err := c.get(ctx, info, u, buf); err != nil {
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
	out := make([]service.Field, 0, len(*body.Fields))
	for i, f := range *body.Fields {
		if f.ID == "" {
			return nil, fmt.Errorf("%s: field %d has no id", info, i)
		}
		out = append(out, service.Field{ID: f.ID, DisplayName: f.DisplayName, Type: f.Type, Options: f.Options})
	}
	return out, nil
}

// Page is one results page as the service sent it, or a restart signal.
type Page struct {
	Object string
	Number int
	// Offset is the offset of the page's first item, for the offset-paged
	// lists (ReadList); 0 for report objects.
	Offset int
	Body   []byte // raw JSON of the page; nil when Restart
	// Read is the read of the object this page belongs to: 1 for the
	// first, 2 after the first restart, and so on.
	Read int
	// Restart means the read starts over from page 1 (its pages did not
	// add up; see ReadObject): discard every page handed to the PageFunc
	// earlier in this ReadObject call. A restart page has no Body and
	// Number 0; the PageFunc is called with it alone, no other call in
	// flight, and should return service.PageInfo{} and nil (an error stops the
	// read).
	Restart bool
}

// ParsePageInfo reads the paging keys (page, resultsPerPage, totalResults,
// totalPages) and counts the rows of "results" in a results page. The keys
// are read as the sync's decoder reads them (service.LooseInt: an integral
// number, 1234.0 too, or a string holding one); null is absent. A body
// without a "results" array, or with a key that is no integer, is an
// error; "results": null counts as empty.
func ParsePageInfo(body []byte) (service.PageInfo, error) {
	var p struct {
		Page           json.RawMessage `json:"page"`
		ResultsPerPage json.RawMessage `json:"resultsPerPage"`
		TotalResults   json.RawMessage `json:"totalResults"`
		TotalPages     json.RawMessage `json:"totalPages"`
		Results        json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return service.PageInfo{}, fmt.Errorf("extract: parsing page: %w: %w", service.ErrMalformedPage, err)
	}
	if len(p.Results) == 0 {
		return service.PageInfo{}, fmt.Errorf(`extract: parsing page: %w: no "results" array`, service.ErrMalformedPage)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(p.Results, &rows); err != nil {
		return service.PageInfo{}, fmt.Errorf("extract: parsing page: \"results\": %w: %w", service.ErrMalformedPage, err)
	}
	info := service.PageInfo{TotalResults: -1, TotalPages: -1}
	for _, h := range []struct {
		key string
		raw json.RawMessage
		set func(int64)
	}{
		{"page", p.Page, func(v int64) { info.Page = int(v) }},
		{"resultsPerPage", p.ResultsPerPage, func(v int64) { info.ResultsPerPage = int(v) }},
		{"totalResults", p.TotalResults, func(v int64) { info.TotalResults = v }},
		{"totalPages", p.TotalPages, func(v int64) { info.TotalPages = int(v) }},
	} {
		if len(h.raw) == 0 || string(h.raw) == "null" {
			continue
		}
		v, ok := service.LooseInt(h.raw)
		if !ok || int64(int(v)) != v {
			return service.PageInfo{}, fmt.Errorf("extract: parsing page: %w: %q is %.40s, not an integer", service.ErrMalformedPage, h.key, h.raw)
		}
		h.set(v)
	}
	info.Rows = len(rows)
	return info, nil
}

// PageFunc handles one page. It is called from several goroutines at once,
// in no particular page order, so it must be safe for concurrent use. It
// must not retain p.Body after it returns (the client reuses buffers). It
// returns what the page said about itself (ParsePageInfo, or the caller's
// own decoding). An error stops the read.
//
// Two rules keep the caller from storing a row twice or a partial object:
//   - when p.Restart is true, the read starts over: discard every page
//     received so far in this ReadObject call (the call comes alone, after
//     every earlier call returned, and before any page of the new read);
//   - when ReadObject fails, discard every page received in the call.
//
// A PageFunc that ignores Restart sees a nil Body and fails to decode it,
// which fails the read: it cannot silently keep duplicates.
type PageFunc func(ctx context.Context, p *Page) (service.PageInfo, error)

// ReadStats says what a ReadObject (or ReadList) cost.
type ReadStats struct {
	Pages    int           // pages handed over in the last (kept) read
	Rows     int64         // rows they held
	Requests int           // HTTP requests sent, retries and restarts included
	Retries  int           // requests that were retries
	Waited   time.Duration // time slept between retries (Retry-After and backoff), summed over workers
	Restarts int           // reads started over after an integrity failure
}

func (s ReadStats) plus(o ReadStats) ReadStats {
	return ReadStats{Pages: o.Pages, Rows: o.Rows, Requests: s.Requests + o.Requests,
		Retries: s.Retries + o.Retries, Waited: s.Waited + o.Waited, Restarts: s.Restarts + o.Restarts}
}

// queryURL builds GET /objects/{id}?parameters=<base64 json>.
func (c *Client) queryURL(objectID string, q Query) (*url.URL, string, error) {
	doc, err := q.document()
	if err != nil {
		return nil, "", err
	}
	u, err := c.endpoint("objects", objectID)
	if err != nil {
		return nil, "", err
	}
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
	_, err = c.get(ctx, reqInfo{op: "query", object: objectID, page: n, params: params}, u, &buf)
	c.releaseBody(&buf) // the body is the caller's now, outside the budget
	if err != nil {
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
// 2..N are fetched concurrently (WithConcurrency workers, each calling fn),
// and, when page N is full, page N+1, which must be empty.
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
// When fn's decoder knows the stream's key fields it returns each row's
// key (service.PageInfo.Keys, from the same pass that decodes the page), and a key
// seen twice is an integrity failure too.
//
// Healing: after an integrity failure (the data changed while paging), the
// read starts over from page 1, at most WithHealing times (default 2). The
// PageFunc is told by a Page with Restart set and must discard what it
// received (see PageFunc). When the last read still does not add up, the
// *IntegrityError says how many reads were tried.
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
	var total ReadStats
	for read := 1; ; read++ {
		if n := int(c.pageCap.Load()); n > 0 && q.ResultsPerPage > n {
			q.ResultsPerPage = n // a larger size was refused on an earlier read
		}
		r := &reader{c: c, object: objectID, q: q, size: q.ResultsPerPage, fn: fn, read: read,
			seed: maphash.MakeSeed(), seen: map[uint64]int{}, keys: c.newKeySet()}
		err := r.run(ctx)
		if err == nil {
			err = r.finishKeys()
		}
		c.endKeys(ctx, r.keys, "object", objectID, "read", read)
		c.budget.releaseQuota(r.quota)
		total = total.plus(r.stats())
		ie, ok := err.(*IntegrityError)
		if !ok {
			if err == nil {
				c.log.DebugContext(ctx, "read object", "object", objectID, "pages", total.Pages, "rows", total.Rows,
					"requests", total.Requests, "retries", total.Retries, "restarts", total.Restarts)
			}
			return total, err
		}
		ie.Reads = read
		if read > c.heal {
			return total, ie
		}
		c.log.WarnContext(ctx, "pages did not add up; reading the object again from page 1",
			"object", objectID, "read", read, "cause", ie.Detail)
		if _, err := fn(ctx, &Page{Object: objectID, Read: read + 1, Restart: true}); err != nil {
			if ctx.Err() != nil {
				return total, context.Cause(ctx)
			}
			return total, &PageError{Object: objectID, Page: 0, Err: err}
		}
		total.Restarts++
	}
}

// reader is the state of one ReadObject.
type reader struct {
	c      *Client
	object string
	q      Query
	size   int // effective page size; fixed once page 1 is in
	fn     PageFunc
	read   int

	seed maphash.Seed
	mu   sync.Mutex
	seen map[uint64]int // body hash of non-empty pages → page number
	keys *keySet        // row keys → page number

	pages, rows, requests, retries, waited atomic.Int64

	quota *quotaReservation // the request quota set aside for pages 2..N
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
	return &IntegrityError{Object: r.object, Expected: expected, Got: got, Detail: fmt.Sprintf(format, args...), Reads: r.read}
}

// fetch gets page n, hands it to fn and checks what the page can be
// checked for alone: the echoed page number and repetition.
func (r *reader) fetch(ctx context.Context, n int) (service.PageInfo, error) {
	buf := r.c.getBuf()
	defer r.c.putBuf(buf)
	q := r.q
	q.Page = n
	u, params, err := r.c.queryURL(r.object, q)
	if err != nil {
		return service.PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
	}
	var info service.PageInfo
	// The page's JSON is checked once, by fn's decoder: a malformed page
	// is fetched again, like a dropped connection.
	for attempt := 1; ; attempt++ {
		st, err := r.c.get(ctx, reqInfo{op: "query", object: r.object, page: n, params: params, decoderChecks: true, quota: r.quota}, u, buf)
		r.requests.Add(int64(st.attempts))
		r.retries.Add(int64(st.retries()))
		r.waited.Add(int64(st.waited))
		if err != nil {
			if ctx.Err() != nil {
				return service.PageInfo{}, context.Cause(ctx)
			}
			return service.PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
		}
		info, err = r.fn(ctx, &Page{Object: r.object, Number: n, Body: buf.Bytes(), Read: r.read})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return service.PageInfo{}, context.Cause(ctx)
		}
		if !errors.Is(err, service.ErrMalformedPage) || attempt >= r.c.maxAttempts {
			return service.PageInfo{}, &PageError{Object: r.object, Page: n, Err: err}
		}
		r.c.log.DebugContext(ctx, "malformed page; fetching it again", "object", r.object, "page", n, "attempt", attempt, "bytes", buf.Len())
		r.retries.Add(1)
		wait := r.c.backoff(attempt)
		r.waited.Add(int64(wait))
		select {
		case <-ctx.Done():
			return service.PageInfo{}, context.Cause(ctx)
		case <-time.After(wait):
		}
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
	if info.Keys != nil {
		if err := r.checkKeys(n, info.Keys, info.Rows); err != nil {
			return info, err
		}
	}
	if info.Rows > 0 {
		// The decoder's hash of the rows where it gives one; else one of
		// the body, only then (hashing every body as well cost 2 % of a
		// sync's CPU for nothing).
		sum, what := info.RowsHash, "holds the same rows as page %d"
		if sum == 0 {
			sum, what = maphash.Bytes(r.seed, buf.Bytes()), "repeats page %d byte for byte"
		}
		r.mu.Lock()
		prev, dup := r.seen[sum]
		if !dup {
			r.seen[sum] = n
		}
		r.mu.Unlock()
		if dup {
			return info, r.integrity(int64(n), int64(prev), "page %d "+what+": the service repeated a page", n, prev)
		}
	}
	return info, nil
}

// checkKeys records the row keys of page n and reports a key already seen.
func (r *reader) checkKeys(n int, keys []string, rows int) error {
	if len(keys) != rows {
		return r.integrity(int64(rows), int64(len(keys)), "page %d: the PageFunc counted %d rows, the page holds %d", n, rows, len(keys))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if k == "" {
			continue // a row without a key; the decoder decided what to do with it
		}
		d, err := r.keys.add(k, n)
		if err != nil {
			return &PageError{Object: r.object, Page: n, Err: err}
		}
		if d != nil {
			return r.keyDup(d)
		}
	}
	return nil
}

// finishKeys checks the row keys a spilled key set has not checked yet:
// the read ended.
func (r *reader) finishKeys() error {
	d, err := r.keys.finish()
	if err != nil {
		last := int(r.pages.Load())
		return &PageError{Object: r.object, Page: last, Err: fmt.Errorf("the read's end, after its last page: check its row keys: %w", err)}
	}
	if d != nil {
		return r.keyDup(d)
	}
	return nil
}

func (r *reader) keyDup(d *keyDup) error {
	return r.integrity(1, 2, "row key %s on page %d was already read on page %d: a duplicate (moving data or a repeated page)", d.Key, d.At, d.Prev)
}

// fallbackPageSizes are the page sizes a read asks for, largest first,
// after the service refused a larger one on page 1 as a bad parameter: the
// interface does not show its maximum, and these are the maxima services
// commonly set. The last, 100, is the size the interface's own example and
// our fake take when none is asked.
var fallbackPageSizes = [...]int{500, 250, 200, 100}

// learnPageCap records that the service refused page 1 at asked rows and
// took size: every later read of this client (other objects, a re-read
// after an integrity failure) asks for size at most, without a refused
// request each. The smallest size learned wins.
func (c *Client) learnPageCap(ctx context.Context, asked, size int) {
	for {
		old := c.pageCap.Load()
		if old > 0 && old <= int64(size) {
			return
		}
		if c.pageCap.CompareAndSwap(old, int64(size)) {
			c.log.WarnContext(ctx, "the service refused pages of this size and took smaller ones: every read now asks for the smaller size (set requests.page_size to the service's maximum to skip the refused requests)",
				"refused", asked, "page_size", size)
			return
		}
	}
}

func (r *reader) run(ctx context.Context) error {
	first, err := r.fetch(ctx, 1)
	asked := r.size
	for _, smaller := range fallbackPageSizes {
		var ae *APIError
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ctx.Err() != nil {
			break
		}
		if smaller >= r.size {
			continue
		}
		// The page size may be past the service's maximum, which the
		// interface does not show: once more at a size it may take. Any
		// other fault of the query fails page 1 at every size, as it
		// would have at the first.
		r.c.log.WarnContext(ctx, "page 1 refused as a bad request, perhaps for its page size: asking again at a smaller one",
			"object", r.object, "asked", r.size, "now", smaller, "err", err)
		r.size, r.q.ResultsPerPage = smaller, smaller
		first, err = r.fetch(ctx, 1)
	}
	if err != nil {
		return err
	}
	if r.size < asked {
		r.c.learnPageCap(ctx, asked, r.size)
	}
	if e := first.ResultsPerPage; e > 0 && e != r.size {
		if e > r.size {
			return r.integrity(int64(r.size), int64(e), "page 1 says resultsPerPage %d, more than the %d asked for", e, r.size)
		}
		r.c.log.WarnContext(ctx, "service capped the page size", "object", r.object, "asked", r.size, "got", e)
		r.size = e
	}
	if first.ResultsPerPage <= 0 && first.Rows > 0 && first.Rows < r.size &&
		(first.TotalPages > 1 || first.TotalResults > int64(first.Rows)) {
		// Page 1 holds fewer rows than asked, more are to come, and it
		// does not say its size: the service capped the page size
		// without a word. Its pages hold page 1's count (the totals and
		// every later page are checked against it).
		r.c.log.WarnContext(ctx, "service capped the page size without saying so", "object", r.object, "asked", r.size, "got", first.Rows)
		r.size = first.Rows
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
func (r *reader) readKnown(ctx context.Context, first service.PageInfo) error {
	total, size := first.TotalResults, int64(r.size)
	n := first.TotalPages
	if limit := int64(r.c.maxPages); int64(n) > limit || total/size > limit {
		return &PageError{Object: r.object, Page: 1, Err: fmt.Errorf("%w: page 1 announces %d rows in %d pages, more than the %d pages a read may take (requests.max_pages)",
			ErrEndlessPages, total, n, limit)}
	}
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
	check := func(p int, info service.PageInfo) error {
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
	// A last page the rows fill exactly does not show the end: totals
	// that undercount (rows added during the read, or a service that
	// lies) would lose the rows after it without a word. The page after
	// it must then be empty: one more request, only for such a page.
	probe := 0 // known to be read: set aside with the pages
	if ReadsPastTheEnd(total, r.size) {
		probe = 1
	}
	lastRows := int64(first.Rows) // of page n, once read
	if n-1+probe >= 1 {
		if err := r.reserve(n - 1 + probe); err != nil {
			return err
		}
	}
	if n >= 2 {
		err := r.fetchRange(ctx, 2, n, func(p int, info service.PageInfo) error {
			if p == n {
				lastRows = int64(info.Rows) // read after fetchRange's Wait
			}
			return check(p, info)
		}, nil)
		if err != nil {
			return err
		}
	}
	if n >= 1 && lastRows == size {
		if probe == 0 { // only totalPages was known: the quota for it now
			if err := r.reserve(1); err != nil {
				return err
			}
		}
		// A service that refuses a page past its total says the same as
		// an empty one: nothing after it.
		if err := r.fetchRange(ctx, n+1, n+1, check, func(int) {}); err != nil {
			return err
		}
	}
	if got := r.rows.Load(); total >= 0 && got != total {
		return r.integrity(total, got, "rows read do not add up to totalResults")
	}
	return nil
}

// pastTheEnd reports whether err is the service refusing a page as past
// the end of the rows: 400, 404 or 416. The interface shows no answer for
// such a page; a service may refuse it instead of sending it empty. Only
// asked of pages the read expects to be past the end, never of one it
// needs.
func pastTheEnd(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusNotFound ||
		ae.Status == http.StatusRequestedRangeNotSatisfiable)
}

// ReadsPastTheEnd reports whether ReadObject, reading an object whose
// page 1 announces totalResults rows at pageSize a page, asks for one page
// more than the rows fill: when they fill the last page exactly, the page
// after it must be empty (totals that undercount would otherwise lose the
// rows after it). One request more; a plan counts it.
func ReadsPastTheEnd(totalResults int64, pageSize int) bool {
	return totalResults > 0 && pageSize > 0 && totalResults%int64(pageSize) == 0
}

// DefaultMaxPages bounds one read unless WithMaxPages says otherwise: an
// object whose page 1 announces more pages, or whose pages, without
// totals, are still full after this many, ends its stream with
// ErrEndlessPages (a service that lies would keep a run going for ever).
// At 1000 rows a page it is about a billion rows.
const DefaultMaxPages = 1 << 20

// ErrEndlessPages: a read's pages would not end (see WithMaxPages).
var ErrEndlessPages = errors.New("extract: the pages do not end")

// reserve sets the request quota aside for the pages left, or fails the
// read before it spends more (Client.reservePages).
func (r *reader) reserve(pages int) error {
	r.c.budget.releaseQuota(r.quota)
	res, err := r.c.reservePages(pages)
	r.quota = res
	if err != nil {
		return &PageError{Object: r.object, Page: 2, Err: err}
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
func (r *reader) readWindows(ctx context.Context, first service.PageInfo) error {
	shortAt, shortRows := 0, 0
	if first.Rows < r.size {
		shortAt, shortRows = 1, first.Rows
	}

	last := 1
	for shortAt == 0 || (shortAt == last && shortRows > 0) {
		if last >= r.c.maxPages {
			return &PageError{Object: r.object, Page: last, Err: fmt.Errorf("%w: %d full pages and no end (no totals announced; requests.max_pages is %d)", ErrEndlessPages, last, r.c.maxPages)}
		}
		w := r.c.concurrency
		if shortAt != 0 {
			w = 1 // only to confirm the end
		}
		from, to := last+1, last+w
		// A page the service refuses as past its end (pastTheEnd) reads as
		// an empty one: the first such page is the end, and rows after it
		// are the integrity failure rows after an empty page would be.
		rows := make([]int, w)
		err := r.fetchRange(ctx, from, to, func(p int, info service.PageInfo) error {
			if info.Rows > r.size {
				return r.integrity(int64(r.size), int64(info.Rows), "page %d holds more rows than the page size", p)
			}
			rows[p-from] = info.Rows
			return nil
		}, func(int) {})
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
// first error cancels the others. With pastEnd set, a page the service
// refuses as past its end (pastTheEnd) is no error: pastEnd is told, and
// check is not called for it.
func (r *reader) fetchRange(ctx context.Context, from, to int, check func(p int, info service.PageInfo) error, pastEnd func(p int)) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.c.concurrency)
	for p := from; p <= to; p++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			info, err := r.fetch(gctx, p)
			if err != nil && pastEnd != nil && pastTheEnd(err) {
				r.c.log.DebugContext(gctx, "a page past the end was refused: read as empty", "object", r.object, "page", p, "error", err)
				pastEnd(p)
				return nil
			}
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
