package extract

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCreateShare(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	var got map[string]any
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v4/shares" {
			var b []byte
			b, _ = readAll(r)
			f.mu.Lock()
			defer f.mu.Unlock()
			_ = json.Unmarshal(b, &got)
			r.Body = newBody(b)
		}
		return false
	}
	c, _ := newTestClient(t, f)
	no := false
	s, err := c.CreateShare(context.Background(), ShareRequest{Title: "Deck", Assets: []string{"a1", "a2"}, Origin: "sepipe",
		DownloadAllowed: &no, ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600))})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got["expiresAt"] != "2030-01-02T02:04:05.006Z" || got["isDownloadAllowed"] != false || got["theme"] != nil {
		t.Fatalf("request body %v", got)
	}
	if s.ID == "" || len(s.Assets) != 2 || s.Theme == nil || s.AnonymousURL == "" || string(s.Extra) != `{"trackingCode":"xyz"}` {
		t.Fatalf("share %+v extra %s", s, s.Extra)
	}
	if _, err := c.CreateShare(context.Background(), ShareRequest{Title: strings.Repeat("x", 201), Origin: "o"}); err == nil {
		t.Fatal("invalid request sent")
	}
}

// A 5xx to a create is not retried: the share may exist.
func TestCreateShareServerErrorUncertain(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		problem(w, 503, "unavailable", "Service Unavailable", "try later")
		return true
	}
	c, _ := newTestClient(t, f)
	_, err := c.CreateShare(context.Background(), ShareRequest{Title: "t", Assets: []string{"a"}, Origin: "o"})
	var ue *UncertainError
	var ae *APIError
	if !errors.As(err, &ue) || !ue.Sent || ue.Status != 503 || !errors.As(err, &ae) || ae.Interface != IfaceV4 || f.requests.Load() != 1 {
		t.Fatalf("err = %v after %d requests", err, f.requests.Load())
	}
}

// 429 to a create means it was not carried out: retried after Retry-After.
func TestCreateShareRateLimitedRetried(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		if f.requests.Load() == 1 {
			w.Header().Set("Retry-After", "2")
			problem(w, 429, "too-many-requests", "Too Many Requests", "")
			return true
		}
		return false
	}
	c, _ := newTestClient(t, f)
	sl := recordSleeps(c)
	if _, err := c.CreateShare(context.Background(), ShareRequest{Title: "t", Assets: []string{"a"}, Origin: "o"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := sl.get(); len(w) != 1 || w[0] != 2*time.Second || f.shares != 1 {
		t.Fatalf("waits %v shares %d", w, f.shares)
	}
}

func TestThemes(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	var queries []string
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		f.mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		f.mu.Unlock()
		return false
	}
	c, _ := newTestClient(t, f, WithConcurrency(1))
	yes := true
	th, err := c.Themes(context.Background(), ThemeQuery{Limit: 3, Sort: "-title", IncludeGlobal: &yes})
	if err != nil {
		t.Fatal(err)
	}
	if len(th) != 7 || !th[0].IsGlobal || th[0].ColorSettings.HeaderColor != "112233" || th[0].DisplayData.Logo.URL == "" ||
		string(th[0].Extra) != `{"brandNew":{"x":1}}` {
		t.Fatalf("themes %+v", th[0])
	}
	f.mu.Lock()
	q := append([]string(nil), queries...)
	f.mu.Unlock()
	if len(q) != 3 || q[0] != "includeGlobal=true&limit=3&offset=0&sort=-title" {
		t.Fatalf("queries %q", q)
	}
	if th, err := c.Themes(context.Background(), ThemeQuery{DivisionID: "d1"}); err != nil || len(th) != 2 {
		t.Fatalf("division themes %d, %v", len(th), err)
	}
	if _, err := c.Themes(context.Background(), ThemeQuery{Sort: "name"}); err == nil {
		t.Fatal("bad sort accepted")
	}
	one, err := c.GetTheme(context.Background(), th[1].ID)
	if err != nil || len(one.Experiences) != 1 {
		t.Fatalf("theme %+v, %v", one, err)
	}
	_, err = c.GetTheme(context.Background(), "nope")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Type != "/errors/not-found" || ae.Interface != IfaceV4 || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// service-interface.md, Sharing theme: createdAt, updatedAt are "ISO 8601
// date-time". Themes decoded them as RFC 3339 (time.Time), so one theme
// written in another ISO 8601 form (basic offset +0200, or no zone) failed
// the whole of Themes (sepipe check, sepipe discover), while the sync's
// decoder read both forms. Both are read now, to the instant the sync
// stores; a time in no ISO 8601 form is zero and its theme kept.
func TestThemesReadEveryISO8601Form(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"count": 3, "items": []map[string]any{
			{"id": "9c5f3aa0784df25db1db821354e337e9", "title": "Corporate Default", "isGlobal": true, "isDefault": true,
				"createdAt": "2026-03-05T11:53:27Z", "updatedAt": "2026-03-08T13:28:21Z", "division": nil},
			{"id": "0a5f3aa0784df25db1db821354e337e9", "title": "EMEA — Bold", "isGlobal": false, "isDefault": false,
				"createdAt": "2026-03-05T11:53:27+0200", "updatedAt": "2026-03-08T13:28:21", "division": map[string]any{"id": "1b5f3aa0784df25db1db821354e337e9"}},
			{"id": "2c5f3aa0784df25db1db821354e337e9", "title": "Odd", "createdAt": "last Tuesday", "updatedAt": 1772712807, "layout": "grid"},
		}})
	})
	c, _ := newTestClient(t, h)
	ts, err := c.Themes(context.Background(), ThemeQuery{})
	if err != nil || len(ts) != 3 {
		t.Fatalf("themes %d, err %v", len(ts), err)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for i, want := range [][2]time.Time{
		{at("2026-03-05T11:53:27Z"), at("2026-03-08T13:28:21Z")},
		{at("2026-03-05T09:53:27Z"), at("2026-03-08T13:28:21Z")},
		{},
	} {
		if !ts[i].CreatedAt.Equal(want[0]) || !ts[i].UpdatedAt.Equal(want[1]) {
			t.Errorf("theme %d: createdAt %v, updatedAt %v; want %v, %v", i, ts[i].CreatedAt, ts[i].UpdatedAt, want[0], want[1])
		}
	}
	if ts[1].Division == nil || ts[1].Division.ID == "" || string(ts[2].Extra) != `{"layout":"grid"}` || ts[2].Title != "Odd" {
		t.Errorf("themes %+v, %+v", ts[1], ts[2])
	}
}

// v4 401 names the access token; a token source refreshes it once.
func TestTokenSourceRefresh(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	calls := 0
	srcTok := []string{"expired-token-1", testToken}
	c, srv := newTestClient(t, f)
	c2, err := New(srv.URL, WithHTTPClient(srv.Client()), WithRateLimit(0, 1), WithTokenSource(func(ctx context.Context) (string, error) {
		calls++
		return srcTok[min(calls-1, 1)], nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	// First token from the source is expired: 401, refresh, retry once.
	if _, err := c2.GetTheme(context.Background(), themeItems(1)[0]["id"].(string)); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("source called %d times, want 2", calls)
	}
	// A source that keeps giving a bad token: one refresh, then the 401.
	c3, _ := New(srv.URL, WithHTTPClient(srv.Client()), WithRateLimit(0, 1), WithTokenSource(func(ctx context.Context) (string, error) {
		return "always-bad-token", nil
	}))
	_, err = c3.GetTheme(context.Background(), "x")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Credential != "access token (v4)" || strings.Contains(err.Error(), "always-bad-token") {
		t.Fatalf("err = %v", err)
	}
	_ = c
}
