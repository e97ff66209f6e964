package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sepipe/sepipe/service"
)

// itemCollector records v3 item ids and honours Restart.
type itemCollector struct {
	mu       sync.Mutex
	ids      map[string]int
	restarts int
}

// fn decodes a v3 page as a decoder with the key field id does.
func (c *itemCollector) fn(ctx context.Context, p *Page) (service.PageInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Restart {
		c.ids = map[string]int{}
		c.restarts++
		return service.PageInfo{}, nil
	}
	if c.ids == nil {
		c.ids = map[string]int{}
	}
	total, items, err := decodeV3List(p.Body)
	if err != nil {
		return service.PageInfo{}, fmt.Errorf("%w: %w", service.ErrMalformedPage, err)
	}
	info := service.PageInfo{TotalResults: total, Rows: len(items), Keys: []string{}}
	for _, it := range items {
		var v struct{ ID string }
		if err := json.Unmarshal(it, &v); err != nil {
			return service.PageInfo{}, err
		}
		c.ids[v.ID]++
		info.Keys = append(info.Keys, strconv.Quote(v.ID))
	}
	return info, nil
}

func (c *itemCollector) exactly(t *testing.T, n int) {
	t.Helper()
	if len(c.ids) != n {
		t.Fatalf("%d distinct items, want %d", len(c.ids), n)
	}
	for id, k := range c.ids {
		if k != 1 {
			t.Fatalf("item %s seen %d times", id, k)
		}
	}
}

func TestReadCollectionPaging(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, limit, requests int
	}{
		{23, 10, 3}, // short last page: count and short page agree
		{20, 10, 3}, // full last page: one more, empty page confirms the end
		{0, 10, 1},
		{5, 0, 1}, // client page size
	} {
		f := newFakeTenant(t)
		f.list = func(string) []map[string]any { return assetItems(tc.n) }
		c, _ := newTestClient(t, f, WithPageSize(10))
		col := &itemCollector{}
		st, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: tc.limit, Fields: []string{"id", "name"}, Sort: "-name"}, col.fn)
		if err != nil {
			t.Fatal(err)
		}
		col.exactly(t, tc.n)
		if st.Requests != tc.requests || st.Rows != int64(tc.n) {
			t.Fatalf("n=%d: stats %+v, want %d requests", tc.n, st, tc.requests)
		}
	}
}

func TestAssetsTyped(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, newFakeTenant(t))
	as, err := c.Assets(context.Background(), CollectionQuery{Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	a := as[3]
	if len(as) != 23 || a.Name != "asset 3" || a.ID == "" || !strings.Contains(string(a.Raw), `"stats":{`) {
		t.Fatalf("asset %+v raw %s", a, a.Raw)
	}
	one, err := c.GetAsset(context.Background(), a.ID)
	if err != nil || one.ID != a.ID {
		t.Fatalf("get %+v, %v", one, err)
	}
	_, err = c.GetAsset(context.Background(), "nope")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Interface != IfaceV3 || ae.Code != 3004 {
		t.Fatalf("err = %v", err)
	}
}

// Drift while paging: healed when it stops, a clear error when it does not;
// never a silent duplicate or gap.
func TestReadCollectionIntegrity(t *testing.T) {
	t.Parallel()
	insertAt := func(items []map[string]any) []map[string]any { // a new item at the front
		n := assetItems(len(items) + 1)
		n[0]["id"] = "new-item-" + itoa(len(items))
		return append([]map[string]any{n[0]}, items...)
	}
	cases := []struct {
		name string
		// list is given the request number of the assets list (1-based).
		list      func(n int64) []map[string]any
		healed    bool
		wantError string
	}{
		{"insert during the first read", func(n int64) []map[string]any {
			if n >= 2 {
				return insertAt(assetItems(23))
			}
			return assetItems(23)
		}, true, ""},
		{"insert on every page", func(n int64) []map[string]any {
			items := assetItems(23)
			for range n {
				items = insertAt(items)
			}
			return items
		}, false, "the count changed"},
		{"swap with equal count (keys catch the duplicate)", func(n int64) []map[string]any {
			items := assetItems(23)
			if n == 2 { // second page shifted back by one: item 9 again, one lost at the end
				items = append(items[:0:0], items[:1]...)
				items = append(items, assetItems(23)...)[:23]
			}
			return items
		}, true, ""},
		{"count lies", func(n int64) []map[string]any { return nil }, false, "want 3"},
	}
	for _, tc := range cases {
		for _, spill := range []bool{false, true} {
			name := tc.name
			var opts []Option
			if spill { // the keys leave memory after two: the duplicate is found when the read ends
				name += ", keys spilled"
				opts = append(opts, withKeyMemory(2))
			}
			t.Run(name, func(t *testing.T) {
				f := newFakeTenant(t)
				var n atomic.Int64
				f.list = func(string) []map[string]any { return tc.list(n.Add(1)) }
				if tc.list(0) == nil {
					f.list = nil
					f.before = func(w http.ResponseWriter, r *http.Request) bool {
						if r.URL.Query().Get("offset") == "20" {
							writeJSON(w, 200, map[string]any{"meta": map[string]int{"count": 23}, "response": map[string]any{"items": assetItems(21)[20:]}})
							return true
						}
						return false
					}
				}
				c, _ := newTestClient(t, f, opts...)
				col := &itemCollector{}
				_, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn)
				if tc.healed {
					if err != nil {
						t.Fatal(err)
					}
					if col.restarts == 0 {
						t.Fatal("not healed")
					}
					for id, k := range col.ids {
						if k != 1 {
							t.Fatalf("item %s seen %d times", id, k)
						}
					}
					return
				}
				var ie *IntegrityError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantError) || ie.Reads != 1+DefaultHealing {
					t.Fatalf("err = %v, want an *IntegrityError with %q after %d reads", err, tc.wantError, 1+DefaultHealing)
				}
			})
		}
	}
}

// A page repeated by the service is fetched again, not passed on.
func TestReadCollectionRepeatedPage(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	var repeated atomic.Int64
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("offset") == "10" && repeated.Add(1) == 1 {
			r.URL.RawQuery = "limit=10&offset=0"
		}
		return false
	}
	c, _ := newTestClient(t, f)
	col := &itemCollector{}
	st, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn)
	if err != nil {
		t.Fatal(err)
	}
	col.exactly(t, 23)
	if col.restarts != 0 || st.Requests != 4 {
		t.Fatalf("restarts %d, stats %+v; want one re-fetch, no restart", col.restarts, st)
	}
}

// A list path segment from the service (a subscription id) cannot climb
// or add path levels.
func TestReadListRejectsClimbingSegments(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, newFakeTenant(t))
	for _, id := range []string{"..", ".", "a/b", "a?b", ""} {
		_, err := c.ReadList(context.Background(), DeliveryLogList(id), CollectionQuery{}, (&itemCollector{}).fn)
		if !errors.Is(err, ErrBadListPath) || !strings.Contains(err.Error(), strconv.Quote(id)) {
			t.Errorf("id %q: err = %v, want ErrBadListPath naming the segment", id, err)
		}
	}
}

// A service may refuse a page past the end of a list (400, 404 or 416)
// instead of sending it empty, as ReadObject allows: the probe beyond a
// known count after a full last page, or after a short page without a
// count, then reads as empty. A refused first page, or a page the count
// says holds items, is still an error naming the list and the page.
func TestReadListPastTheEndRefused(t *testing.T) {
	t.Parallel()
	// serve answers the assets list of n items; refuse(offset) gives the
	// status refusing the page at offset, 0 to serve it.
	serve := func(n int, count bool, refuse func(offset int) int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v3/assets.json" {
				http.NotFound(w, r)
				return
			}
			off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
			if s := refuse(off); s != 0 {
				v3err(w, s, 3004, "ResourceNotFoundError", "offset "+strconv.Itoa(off)+" is out of range")
				return
			}
			items := assetItems(n)
			body := map[string]any{"response": map[string]any{"items": items[min(off, n):min(off+limit, n)]}}
			if count {
				body["meta"] = map[string]int{"count": n}
			}
			writeJSON(w, 200, body)
		})
	}
	for _, tc := range []struct {
		name     string
		n        int
		count    bool
		status   int
		requests int
	}{
		{"404 beyond the count after a full last page", 20, true, 404, 3},
		{"400 beyond the count after a full last page", 20, true, 400, 3},
		{"416 beyond the count after a full last page", 20, true, 416, 3},
		{"404 after a short page without a count", 23, false, 404, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestClient(t, serve(tc.n, tc.count, func(off int) int {
				if off >= tc.n {
					return tc.status
				}
				return 0
			}))
			col := &itemCollector{}
			st, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn)
			if err != nil {
				t.Fatalf("ReadList against a service refusing the page past the end: %v", err)
			}
			col.exactly(t, tc.n)
			if st.Requests != tc.requests || st.Rows != int64(tc.n) || st.Restarts != 0 {
				t.Fatalf("stats %+v, want %d requests", st, tc.requests)
			}
		})
	}

	// A 404 on the first page: the list is not there (or not entitled).
	c, _ := newTestClient(t, serve(0, true, func(int) int { return 404 }))
	_, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, (&itemCollector{}).fn)
	var ae *APIError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(err.Error(), "list assets") {
		t.Fatalf("404 on the first page: err = %v, want a not-found error naming the list", err)
	}
	// A 404 on a page the count says holds items fails the read.
	c, _ = newTestClient(t, serve(30, true, func(off int) int {
		if off == 10 {
			return 404
		}
		return 0
	}))
	_, err = c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, (&itemCollector{}).fn)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "page 2") {
		t.Fatalf("404 on page 2 of 3: err = %v, want a not-found error naming the page", err)
	}
}

// A list without a count whose items fill the last page exactly ends at
// the empty page after it; it is not fetched again (which would repeat it
// byte for byte, an integrity failure).
func TestReadListWithoutCountEndsAfterFullLastPage(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 1, 20: 3, 23: 4} { // 23: the short page is confirmed by an empty one
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			items := assetItems(n)
			writeJSON(w, 200, map[string]any{"response": map[string]any{"items": items[min(off, n):min(off+10, n)]}})
		})
		c, _ := newTestClient(t, h)
		col := &itemCollector{}
		st, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn)
		if err != nil {
			t.Fatalf("%d items: %v", n, err)
		}
		col.exactly(t, n)
		if st.Requests != want || st.Restarts != 0 {
			t.Fatalf("%d items: stats %+v, want %d requests", n, st, want)
		}
	}
}

// TestReadListCountVariants: a list's count sent as 23.0 or "23", as page
// headers may be (docs/service-shapes.md, client tolerance), reads the
// list; one that is no integer at all reads it without a count (a short
// page, then an empty one) rather than failing it. Both failed the read
// ("cannot unmarshal").
func TestReadListCountVariants(t *testing.T) {
	t.Parallel()
	const n = 23
	for _, count := range []any{23.0, "23", " 23 ", "23.0", "many", true, nil} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
				limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
				items := assetItems(n)
				writeJSON(w, 200, map[string]any{"meta": map[string]any{"count": count},
					"response": map[string]any{"items": items[min(off, n):min(off+limit, n)]}})
			}))
			col := &itemCollector{}
			if _, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn); err != nil {
				t.Fatalf("count %#v: %v", count, err)
			}
			col.exactly(t, n)
		})
	}
}
