package extract

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSubscriptionsCRUD(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	c, _ := newTestClient(t, f, WithAPIToken(tAPIToken))
	ctx := context.Background()
	req := SubscriptionRequest{Name: "done", URL: "https://hooks.example/x", Method: "POST",
		Headers: []Header{{"X-Auth", "dest-SECRET-42"}}, Types: []string{"COURSE_COMPLETED"}}
	s, err := c.CreateSubscription(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ID) != 26 || s.SignatureKey.Reveal() != tSigKey || s.Name != "done" || string(s.Extra) != `{"color":"blue"}` {
		t.Fatalf("created %+v extra %s", s, s.Extra)
	}
	if strings.Contains(fmt.Sprintf("%+v", s), tSigKey) {
		t.Fatal("signature key printed")
	}
	req.Name = "renamed"
	if u, err := c.UpdateSubscription(ctx, s.ID, req); err != nil || u.Name != "renamed" || u.SignatureKey != "" {
		t.Fatalf("updated %+v, %v", u, err)
	}
	if g, err := c.GetSubscription(ctx, s.ID); err != nil || g.Name != "renamed" {
		t.Fatalf("get %+v, %v", g, err)
	}
	if _, err := c.CreateSubscription(ctx, req); err != nil {
		t.Fatal(err)
	}
	all, err := c.Subscriptions(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list %d, %v", len(all), err)
	}
	logs, err := c.SubscriptionLogs(ctx, s.ID)
	if err != nil || len(logs) != 5 || logs[0].Response.Status != 200 || logs[0].Outcome != "delivered" || logs[0].Extra != nil {
		t.Fatalf("logs %+v, %v", logs, err)
	}
	if err := c.DeleteSubscription(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSubscription(ctx, s.ID)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Interface != IfaceWebhooks || ae.Status != 404 || ae.Op != "get subscription" {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.CreateSubscription(ctx, SubscriptionRequest{Name: "x", URL: "ftp://x", Method: "PUT"}); err == nil {
		t.Fatal("invalid request sent")
	}
}

// The wrong credential on webhooks: the error names the developer API
// token and does not echo it.
func TestWebhooksUnauthorized(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, newFakeTenant(t), WithAPIToken("wrong-api-token-1"))
	_, err := c.Subscriptions(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Credential != "developer API token" || strings.Contains(err.Error(), "wrong-api-token-1") ||
		!strings.Contains(err.Error(), "developer API token is missing, invalid or expired") {
		t.Fatalf("err = %v", err)
	}
}

// A DELETE whose answer is lost is retried; a 404 on the retry means the
// first attempt deleted it.
func TestDeleteSubscriptionRetryFindsItGone(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	var dropped atomic.Bool
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodDelete && dropped.CompareAndSwap(false, true) {
			f.mu.Lock()
			delete(f.subs, strings.TrimPrefix(r.URL.Path, "/webhooks/v1/subscriptions/"))
			f.mu.Unlock()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return true
		}
		return false
	}
	c, _ := newTestClient(t, f, WithAPIToken(tAPIToken))
	recordSleeps(c)
	s, err := c.CreateSubscription(context.Background(), SubscriptionRequest{Name: "a", URL: "https://x/y", Method: "GET", Types: []string{"COURSE_COMPLETED"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSubscription(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	// But a plain 404 (nothing sent before) is an error.
	if err := c.DeleteSubscription(context.Background(), "01NOPE0000000000000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// Create that drops after sending: one request, UncertainError.
func TestCreateSubscriptionDropped(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost {
			dropMidBody(w, r)
			return true
		}
		return false
	}
	c, _ := newTestClient(t, f, WithAPIToken(tAPIToken))
	_, err := c.CreateSubscription(context.Background(), SubscriptionRequest{Name: "a", URL: "https://x/y", Method: "GET", Types: []string{"COURSE_COMPLETED"}})
	var ue *UncertainError
	if !errors.As(err, &ue) || !ue.Sent || ue.Interface != IfaceWebhooks || f.requests.Load() != 1 {
		t.Fatalf("err = %v, requests %d", err, f.requests.Load())
	}
}
