package extract

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sepipe/sepipe/service"
)

// TestMaxPagesEndsUntotalledReads: pages that announce no totals and stay
// full end the read with ErrEndlessPages once WithMaxPages pages were
// read, for a report object and for a list; the requests stay within the
// bound and one window of concurrent pages.
func TestMaxPagesEndsUntotalledReads(t *testing.T) {
	t.Parallel()
	const maxPages, size, conc = 12, 5, 4
	t.Run("report object", func(t *testing.T) {
		f := newFakeTenant(t)
		f.before = func(w http.ResponseWriter, r *http.Request) bool {
			raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
			var q struct{ Page int }
			json.Unmarshal(raw, &q)
			var b strings.Builder
			fmt.Fprintf(&b, `{"page":%d,"results":[`, q.Page)
			for i := range size {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":%d}`, q.Page*size+i)
			}
			b.WriteString("]}")
			w.Write([]byte(b.String()))
			return true
		}
		c, _ := newTestClient(t, f, WithMaxPages(maxPages), WithPageSize(size), WithConcurrency(conc))
		var pages atomic.Int64 // the PageFunc is called from the page workers at once
		_, err := c.ReadObject(context.Background(), "o", Query{}, func(ctx context.Context, p *Page) (service.PageInfo, error) {
			pages.Add(1)
			return ParsePageInfo(p.Body)
		})
		if !errors.Is(err, ErrEndlessPages) || !strings.Contains(err.Error(), "requests.max_pages is 12") {
			t.Fatalf("err = %v, want ErrEndlessPages naming requests.max_pages", err)
		}
		if n := pages.Load(); n < maxPages || n > maxPages+conc {
			t.Errorf("%d pages read, want %d to %d", n, maxPages, maxPages+conc)
		}
	})
	t.Run("list", func(t *testing.T) {
		f := newFakeTenant(t)
		f.before = func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "assets") {
				return false
			}
			offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
			writeJSON(w, 200, map[string]any{"meta": map[string]any{}, "response": map[string]any{"items": assetItems(offset + limit)[offset:]}})
			return true
		}
		c, _ := newTestClient(t, f, WithMaxPages(maxPages), WithPageSize(size))
		col := &itemCollector{}
		_, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{}, col.fn)
		if !errors.Is(err, ErrEndlessPages) || !strings.Contains(err.Error(), "requests.max_pages is 12") {
			t.Fatalf("err = %v, want ErrEndlessPages naming requests.max_pages", err)
		}
		if n := f.requests.Load(); n != maxPages {
			t.Errorf("%d requests, want %d", n, maxPages)
		}
	})
	if _, err := New("http://x", WithMaxPages(0)); err == nil {
		t.Error("WithMaxPages(0) accepted")
	}
}
