package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
)

func TestCollectionsLand(t *testing.T) {
	t.Parallel()
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

// subscriptionsTenant is a fake tenant with two subscriptions, "first"
// and "second", whose logs hold deliveries, served through wrap (which
// may answer a request itself, or change the service's answer) to a
// client with the developer API token and opts.
func subscriptionsTenant(t *testing.T, wrap func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request), opts ...extract.Option) (*extract.Client, []*extract.Subscription) {
	t.Helper()
	svc := servicetest.New(servicetest.WithUsers(200), servicetest.WithDeliveryRetryDelays(time.Millisecond))
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wrap(svc, w, r) }))
	t.Cleanup(srv.Close)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(receiver.Close)
	c := client(t, srv.URL, svc.AccessToken(), append([]extract.Option{extract.WithAPIToken(svc.APIToken())}, opts...)...)
	ctx := context.Background()
	var subs []*extract.Subscription
	for _, name := range []string{"first", "second"} {
		s, err := c.CreateSubscription(ctx, extract.SubscriptionRequest{Name: name, URL: receiver.URL + "/hook", Method: "POST",
			Types: []string{servicetest.EventCourseCompleted}})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	if svc.Advance(3*24*time.Hour) == 0 {
		t.Fatal("no events")
	}
	if err := svc.WaitDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
	return c, subs
}

// syncDeliveryLogs syncs the delivery log stream alone, its log lines in
// logs.
func syncDeliveryLogs(t *testing.T, c *extract.Client, out string, logs *bytes.Buffer) (pipeline.ObjectResult, error) {
	t.Helper()
	res, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Only: []string{pipeline.StreamDeliveryLogs}, Now: clock(day1),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if res == nil {
		t.Fatalf("sync: %v", err)
	}
	return objectResult(t, res, pipeline.StreamDeliveryLogs), err
}

// service-interface.md, D: a Delete "permanently removes the webhook and
// its whole log history"; field-notes.md: "Deleting a subscription
// deletes its whole log." A subscription deleted between the listing of
// subscriptions and the read of its log (someone deletes one in the
// administration UI during a run) answers 404 to its logs: the whole
// delivery-log stream stopped, was classed as not entitled (skipped), and
// the logs of every other subscription were not loaded. The deleted one
// is now passed over with a warning naming it (what was read of its log
// before goes too), and the others commit.
func TestDeliveryLogsOfASubscriptionDeletedDuringTheRun(t *testing.T) {
	t.Parallel()
	// offset: the page of the log whose request comes after the deletion.
	for _, c := range []struct {
		name   string
		offset string
	}{{"before its log is read", "0"}, {"while its log is read", "5"}} {
		t.Run(c.name, func(t *testing.T) { deleteDuringTheRun(t, c.offset) })
	}
}

func deleteDuringTheRun(t *testing.T, offset string) {
	var once sync.Once
	var doomed atomic.Value
	doomed.Store("")
	c, subs := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
		if id := doomed.Load().(string); id != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/subscriptions/"+id+"/logs") &&
			r.URL.Query().Get("offset") == offset {
			once.Do(func() {
				del := httptest.NewRequest(http.MethodDelete, "/webhooks/v1/subscriptions/"+id, nil)
				del.Header.Set("Authorization", "Bearer "+svc.APIToken())
				rec := httptest.NewRecorder()
				svc.ServeHTTP(rec, del)
				if rec.Code != http.StatusNoContent {
					t.Errorf("delete: %d %s", rec.Code, rec.Body)
				}
			})
		}
		svc.ServeHTTP(w, r)
	}, extract.WithPageSize(5))
	doomed.Store(subs[0].ID) // the subscriptions list oldest first: its log is read first
	out := t.TempDir()
	var logs bytes.Buffer
	o, err := syncDeliveryLogs(t, c, out, &logs)
	if err != nil || o.Err != nil || o.Status != pipeline.StatusOK || o.Rows == 0 {
		t.Fatalf("sync err %v; %s: status %q, rows %d, err %v (the second subscription's log was not loaded)",
			err, pipeline.StreamDeliveryLogs, o.Status, o.Rows, o.Err)
	}
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM webhook_delivery_logs WHERE subscriptionId = ?`, subs[1].ID); n != o.Rows {
		t.Errorf("the second subscription's log has %d rows in the table, want all %d the stream loaded", n, o.Rows)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM webhook_delivery_logs WHERE subscriptionId = ?`, subs[0].ID); n != 0 {
		t.Errorf("the deleted subscription's log has %d rows in the table, want none: it went with the subscription", n)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "deleted since") || !strings.Contains(l, "subscription="+subs[0].ID) {
		t.Errorf("log %q: want a warning naming the deleted subscription", l)
	}
}

// A subscription whose id ReadList cannot put in a URL (a slash in it)
// failed the whole delivery-log stream; it is passed over with a warning
// naming it, and the other subscriptions' logs commit.
func TestDeliveryLogsPassOverAnIDNoURLCanName(t *testing.T) {
	t.Parallel()
	const bad = "01JBAD/../x"
	c, subs := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/subscriptions") {
			svc.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, r)
		var page struct {
			Count int               `json:"count"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
			t.Errorf("subscriptions: %d %s (%v)", rec.Code, rec.Body, err)
		}
		page.Count += 2
		page.Items = append(page.Items, json.RawMessage(`{"id":"`+bad+`","name":"odd"}`), json.RawMessage(`{"name":"no id"}`))
		b, _ := json.Marshal(page)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	out := t.TempDir()
	var logs bytes.Buffer
	o, err := syncDeliveryLogs(t, c, out, &logs)
	if err != nil || o.Status != pipeline.StatusOK || o.Rows == 0 {
		t.Fatalf("sync err %v; status %q, rows %d, err %v", err, o.Status, o.Rows, o.Err)
	}
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(DISTINCT subscriptionId) FROM webhook_delivery_logs WHERE subscriptionId IN (?, ?)`, subs[0].ID, subs[1].ID); n != 2 {
		t.Errorf("logs of %d subscriptions loaded, want both", n)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "subscription="+bad) {
		t.Errorf("log %q: want a warning naming the subscription %s", l, bad)
	}
	// One without an id: no URL names its log either, and it was passed
	// over without a word.
	if l := logs.String(); !strings.Contains(l, "subscriptions without an id are listed") || !strings.Contains(l, "subscriptions=1") {
		t.Errorf("log %q: want a warning counting the subscription without an id", l)
	}
}

// A tenant without webhooks answers 403 or 404 to the subscription list
// itself: the delivery-log stream is still skipped (not entitled), not
// failed, and not committed empty.
func TestDeliveryLogsSkippedWhenTheSubscriptionListIsRefused(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusForbidden, http.StatusNotFound} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			c, _ := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/subscriptions") {
					http.Error(w, http.StatusText(status), status)
					return
				}
				svc.ServeHTTP(w, r)
			})
			_, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: t.TempDir(), Only: []string{pipeline.StreamDeliveryLogs}, Now: clock(day1)})
			var re *pipeline.RunError
			if !errors.As(err, &re) || len(re.Skipped) != 1 || re.Skipped[0].Object != pipeline.StreamDeliveryLogs || len(re.Failed) != 0 {
				t.Fatalf("sync err %v: want the stream skipped", err)
			}
		})
	}
}

// A 404 to the log of a subscription that is still listed is no deletion:
// the delivery-log stream is skipped as before (not committed without
// that log), and the list is read once more to tell.
func TestDeliveryLogsSkippedWhenAListedSubscriptionsLogIsNotFound(t *testing.T) {
	t.Parallel()
	var missing atomic.Value
	missing.Store("")
	var lists atomic.Int64
	c, subs := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/subscriptions") {
			lists.Add(1)
		}
		if id := missing.Load().(string); id != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/subscriptions/"+id+"/logs") {
			http.Error(w, http.StatusText(http.StatusNotFound), http.StatusNotFound)
			return
		}
		svc.ServeHTTP(w, r)
	})
	missing.Store(subs[1].ID)
	lists.Store(0)
	_, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: t.TempDir(), Only: []string{pipeline.StreamDeliveryLogs}, Now: clock(day1)})
	var re *pipeline.RunError
	if !errors.As(err, &re) || len(re.Skipped) != 1 || len(re.Failed) != 0 || !errors.Is(err, extract.ErrNotFound) || !strings.Contains(err.Error(), subs[1].ID) {
		t.Fatalf("sync err %v: want the stream skipped, naming the subscription and the 404", err)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("the subscriptions were listed %d times, want 2", n)
	}
}

// A subscription's log read again from its start (new deliveries shifted
// its pages while they were read: the client heals by reading again)
// discarded what the stream had kept of every subscription's log, so the
// logs read before it were missing from the committed table. Only the
// pages of the log read again are discarded now.
func TestDeliveryLogsOfOneSubscriptionReadAgainKeepTheOthers(t *testing.T) {
	t.Parallel()
	var once sync.Once
	var shifting atomic.Value
	shifting.Store("")
	var firstPages atomic.Int64
	c, subs := subscriptionsTenant(t, func(svc *servicetest.Service, w http.ResponseWriter, r *http.Request) {
		id := shifting.Load().(string)
		if id == "" || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/subscriptions/"+id+"/logs") {
			svc.ServeHTTP(w, r)
			return
		}
		if r.URL.Query().Get("offset") == "0" {
			firstPages.Add(1)
		} else {
			once.Do(func() {
				if svc.Advance(24*time.Hour) == 0 {
					t.Error("no new events")
				}
				if err := svc.WaitDeliveries(r.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		svc.ServeHTTP(w, r)
	}, extract.WithPageSize(5))
	ctx := context.Background()
	before, err := c.SubscriptionLogs(ctx, subs[0].ID)
	if err != nil || len(before) <= 5 {
		t.Fatalf("the first log holds %d entries (%v), want more than a page", len(before), err)
	}
	shifting.Store(subs[1].ID) // read second: its second page comes after new deliveries
	out := t.TempDir()
	var logs bytes.Buffer
	o, err := syncDeliveryLogs(t, c, out, &logs)
	if err != nil || o.Status != pipeline.StatusOK {
		t.Fatalf("sync err %v; status %q, err %v", err, o.Status, o.Err)
	}
	if n := firstPages.Load(); n < 2 {
		t.Fatalf("the second log's first page was read %d times: the test shifted nothing", n)
	}
	after, err := c.SubscriptionLogs(ctx, subs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	for i, want := range []int{len(before), len(after)} {
		if n := warehousetest.Scalar[int64](t, db, `SELECT count(DISTINCT id) FROM webhook_delivery_logs WHERE subscriptionId = ?`, subs[i].ID); n != int64(want) {
			t.Errorf("subscription %d: %d log entries in the table, want the %d read", i+1, n, want)
		}
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) - count(DISTINCT id) FROM webhook_delivery_logs`); n != 0 {
		t.Errorf("%d log entries twice in the table", n)
	}
}
