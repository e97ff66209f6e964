package extract

import (
	"context"
	"net/http"
	"strconv"
	"testing"
)

// 42ab594 reads a page past the end that the service refuses (400, 404,
// 416) as empty "as ReadObject does", and a6625fc ends a count-less list
// at an empty page after a full one (its items fill the last page
// exactly). But pastEnd, for a list without a count, expects the end only
// after a short page: a count-less list (v4, webhook lists without
// "count") of exactly 20 items at 10 a page, whose service refuses offset
// 20 with a 404 instead of sending it empty, fails the whole list, where
// ReadObject's readWindows reads such a refusal after full pages as the end.
func TestRev4ReadListWithoutCountRefusedAfterAFullLastPage(t *testing.T) {
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
