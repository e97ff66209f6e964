package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/pipeline"
)

// ef82ba3 made extract read a list whose count is no integer ("many",
// 23.5, true) as a list without a count, "rather than failing it". The
// sync does not read pages through extract's listCount but through
// transform's page walker, whose header() still fails the page
// ("page header is not an integer"): sepipe webhooks list reads such a
// list, but the sync fails the webhook_subscriptions stream.
func TestSyncReadsAListWhoseCountIsNoInteger(t *testing.T) {
	t.Parallel()
	c, _ := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/subscriptions") {
			svc.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, r)
		var page map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Errorf("subscriptions: %v", err)
		}
		page["count"] = json.RawMessage(`"many"`)
		b, _ := json.Marshal(page)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	if subs, err := c.Subscriptions(context.Background()); err != nil || len(subs) != 2 {
		t.Fatalf("extract reads the list: %d subscriptions, %v", len(subs), err)
	}
	var logs bytes.Buffer
	res, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: t.TempDir(), Only: []string{pipeline.StreamSubscriptions}, Now: clock(day1),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if res == nil {
		t.Fatalf("sync: %v", err)
	}
	o := objectResult(t, res, pipeline.StreamSubscriptions)
	if err != nil || o.Status != pipeline.StatusOK || o.Rows != 2 {
		t.Fatalf("sync err %v; status %q, rows %d, err %v", err, o.Status, o.Rows, o.Err)
	}
}
