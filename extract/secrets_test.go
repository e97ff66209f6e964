package extract

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A debug log of a run of every call, with failures on every interface
// (401s, 5xx that echo the request, dropped connections, retries), holds
// no credential value; neither do the errors or the printed values.
func TestNoCredentialInLogsOrErrors(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	f := newFakeTenant(t)
	var n atomic.Int64
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		switch n.Add(1) % 5 {
		case 2: // a 5xx that echoes everything it got
			body, _ := io.ReadAll(r.Body)
			v3err(w, 500, 5000, "InternalError", "failed "+r.URL.String()+" "+string(body)+" "+r.Header.Get("Authorization"))
			return true
		case 4:
			if r.Method == http.MethodGet {
				dropMidBody(w, r)
				return true
			}
		}
		return false
	}
	refreshed := "refreshed-TOKEN-0f0f0f"
	var srcCalls atomic.Int64
	c, srv := newTestClient(t, f, WithLogger(debugLogger(&logs)), WithAPIToken(tAPIToken), WithRetry(10, 1e12))
	recordSleeps(c)
	ctx := context.Background()
	var out []string
	note := func(v any, err error) {
		out = append(out, fmt.Sprintf("%v %+v %#v", v, v, v))
		if err != nil {
			out = append(out, err.Error(), fmt.Sprintf("%+v %#v", err, err))
		}
	}
	pub, err := c.PublicSession(ctx, "demo")
	note(pub, err)
	s, err := c.PasswordSession(ctx, "demo", "admin", tPassword)
	note(s, err)
	for s == nil { // a POST is not retried: try again as a caller would
		s, err = c.PasswordSession(ctx, "demo", "admin", tPassword)
		note(s, err)
	}
	note(c.PasswordSession(ctx, "demo", "admin", "wrong-PASSWORD-123"))
	tk, err := c.UserTicket(ctx, s, "demo", 2)
	note(tk, err)
	if tk != nil {
		note(c.TicketSession(ctx, "demo", tk.Key))
	}
	note(c.TicketSession(ctx, "demo", "bad-TICKET-4444"))
	tok, err := c.AutoLoginToken(ctx, s, AutoLoginRequest{LoginDir: "demo", Username: "user1"})
	note(tok, err)
	note(c.TokenSession(ctx, "demo", tAutoToken))
	note(c.UserTicket(ctx, &Session{ID: 918273, Key: "stale-SKY-5555", UID: 1}, "demo", 2))
	note(c.AutoLoginToken(ctx, &Session{ID: 918273, Key: "stale-SKY-5555", UID: 1}, AutoLoginRequest{}))
	note(c.Assets(ctx, CollectionQuery{Limit: 5}))
	note(c.GetAsset(ctx, fmt.Sprintf("%032x", 1)))
	note(c.CreateShare(ctx, ShareRequest{Title: "t", Assets: []string{"a"}, Origin: "o"}))
	note(c.Themes(ctx, ThemeQuery{Limit: 2}))
	note(c.GetTheme(ctx, fmt.Sprintf("%032x", 100)))
	sub, err := c.CreateSubscription(ctx, SubscriptionRequest{Name: "n", URL: "https://d/x", Method: "POST",
		Headers: []Header{{"Authorization", "dest-SECRET-42"}}, Types: []string{"COURSE_COMPLETED"}})
	note(sub, err)
	if sub != nil {
		note(c.UpdateSubscription(ctx, sub.ID, SubscriptionRequest{Name: "n2", URL: "https://d/x", Method: "GET",
			Headers: []Header{{"Authorization", "dest-SECRET-42"}}, Types: []string{"COURSE_COMPLETED"}}))
		note(c.GetSubscription(ctx, sub.ID))
		note(c.SubscriptionLogs(ctx, sub.ID))
		note(nil, c.DeleteSubscription(ctx, sub.ID))
	}
	note(c.Subscriptions(ctx))
	// Wrong credentials, and a token source.
	bad, _ := New(srv.URL, WithHTTPClient(srv.Client()), WithLogger(debugLogger(&logs)), WithAccessToken("wrong-ACCESS-777"),
		WithAPIToken("wrong-API-888"), WithRateLimit(0, 1))
	note(bad.Themes(ctx, ThemeQuery{}))
	note(bad.Subscriptions(ctx))
	note(bad.Assets(ctx, CollectionQuery{}))
	src, _ := New(srv.URL, WithHTTPClient(srv.Client()), WithLogger(debugLogger(&logs)), WithAccessToken("expired-TOKEN-999"),
		WithRateLimit(0, 1), WithRetry(10, 1e12), WithTokenSource(func(context.Context) (string, error) {
			if srcCalls.Add(1) == 1 {
				return testToken, nil
			}
			return refreshed, nil
		}))
	recordSleeps(src)
	note(src.GetTheme(ctx, fmt.Sprintf("%032x", 100)))
	note(c, nil)
	note(src, nil)

	all := logs.String() + strings.Join(out, "\n")
	if !strings.Contains(all, "legacy request") || !strings.Contains(all, "webhooks request") || !strings.Contains(all, "sid=REDACTED") {
		t.Fatalf("the run did not log what it should:\n%s", logs.String())
	}
	for _, cred := range []string{testToken, tAPIToken, tPassword, tSessKey, "918273", tTicket, tAutoToken, tSigKey,
		"sess-TOKEN-aa11bb22", "pub-KEY-000111", "dest-SECRET-42", "wrong-PASSWORD-123", "bad-TICKET-4444", "stale-SKY-5555",
		"wrong-ACCESS-777", "wrong-API-888", "expired-TOKEN-999", refreshed} {
		if strings.Contains(all, cred) {
			i := strings.Index(all, cred)
			t.Errorf("credential %q leaked: …%s…", cred, all[max(i-200, 0):min(i+50, len(all))])
		}
	}
}
