package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
)

func TestCollectionsLand(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(200), servicetest.WithDeliveryRetryDelays(time.Millisecond))
	defer srv.Close()
	var got atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer receiver.Close()
	c := client(t, srv.URL, srv.Service.AccessToken(), extract.WithAPIToken(srv.Service.APIToken()))
	ctx := context.Background()
	sub, err := c.CreateSubscription(ctx, extract.SubscriptionRequest{
		Name: "warehouse", URL: receiver.URL + "/hook?token=hunter2-secret", Method: "POST",
		Headers: []extract.Header{{Name: "X-Receiver-Key", Value: "very-secret-value"}},
		Types:   []string{servicetest.EventCourseCompleted},
	})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Service.Advance(3*24*time.Hour) == 0 {
		t.Fatal("no events")
	}
	if err := srv.Service.WaitDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	counts := objectCounts(t, out)
	for _, name := range pipeline.Collections {
		if counts[name] == 0 {
			t.Errorf("collection %s has no rows (%v)", name, counts)
		}
		if objectResult(t, res, name).Err != nil {
			t.Errorf("%s failed", name)
		}
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM themes WHERE isGlobal AND division__id IS NULL`); n != 1 {
		t.Errorf("global themes = %d, want exactly one", n)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM assets WHERE stats__views IS NULL OR json_array_length(tags) IS NULL`); n != 0 {
		t.Errorf("%d assets lack typed stats or tags", n)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM webhook_delivery_logs WHERE subscriptionId = ? AND outcome = 'delivered' AND response__status = 200`, sub.ID); n != got.Load() || n == 0 {
		t.Errorf("delivered log rows = %d, receiver got %d", n, got.Load())
	}
	dump := warehousetest.Scalar[string](t, db, `SELECT string_agg(CAST(s AS VARCHAR), '|') FROM webhook_subscriptions s`) +
		warehousetest.Scalar[string](t, db, `SELECT string_agg(CAST(l AS VARCHAR), '|') FROM webhook_delivery_logs l`)
	for _, secret := range []string{"hunter2-secret", "very-secret-value", srv.Service.APIToken()} {
		if strings.Contains(dump, secret) {
			t.Errorf("the warehouse holds the secret %q", secret)
		}
	}
	if !strings.Contains(dump, "X-Receiver-Key") {
		t.Error("header names should be kept")
	}
	// Only the named streams run when Objects is given.
	res, err = pipeline.Sync(ctx, c, pipeline.Config{Out: t.TempDir(), Only: []string{"themes", "course"}, Now: clock(day1)})
	if err != nil || len(res.Objects) != 2 {
		t.Fatalf("%v %+v", err, res)
	}
}
