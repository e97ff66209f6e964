package extract

import (
	"context"
	"net/http"
	"strconv"
	"testing"
)

// A list without a count whose items fill its last page exactly, and
// whose service refuses the page after it (400, 404, 416) instead of
// sending it empty, ends there, as ReadObject's read without totals does:
// the whole list failed (found by review).
func TestReadListWithoutCountRefusedAfterAFullLastPage(t *testing.T) {
	t.Parallel()
	const n = 20
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if off >= n {
			v3err(w, 404, 3004, "ResourceNotFoundError", "offset "+strconv.Itoa(off)+" is out of range")
			return
		}
		items := assetItems(n)
		writeJSON(w, 200, map[string]any{"response": map[string]any{"items": items[off:min(off+limit, n)]}})
	}))
	col := &itemCollector{}
	if _, err := c.ReadList(context.Background(), V3List("assets"), CollectionQuery{Limit: 10}, col.fn); err != nil {
		t.Fatalf("a count-less list whose last page is full, the page after it refused: %v", err)
	}
	col.exactly(t, n)
}
