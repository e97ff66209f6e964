package extract_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
)

func newOAuth(t *testing.T, srv *servicetest.Server, store extract.TokenStore, refresh string) *extract.OAuth {
	t.Helper()
	o, err := extract.NewOAuth(srv.URL, extract.OAuthConfig{
		ClientID: srv.Service.ClientID(), ClientSecret: srv.Service.ClientSecret(), RefreshToken: refresh,
	}, store, extract.WithOAuthHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOAuthRotatesAndPersistsBeforeUse(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	store := &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), ".sepipe", "token.json")}
	o := newOAuth(t, srv, store, srv.Service.RefreshToken())
	ctx := context.Background()
	tok, err := o.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := store.Load()
	if err != nil || !ok {
		t.Fatalf("store after refresh: ok=%v err=%v", ok, err)
	}
	if st.AccessToken != tok || st.RefreshToken == "" || st.RefreshToken == srv.Service.RefreshToken() {
		t.Fatalf("store does not hold the rotated tokens: %v", st)
	}
	if time.Until(st.Expiry) < 50*time.Minute || time.Until(st.Expiry) > 61*time.Minute {
		t.Errorf("expiry %s, want about an hour from now", st.Expiry)
	}
	fi, err := os.Stat(store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token store mode %v, want 0600", fi.Mode().Perm())
	}
	// A valid token is reused: no second refresh.
	if again, err := o.Token(ctx); err != nil || again != tok {
		t.Fatalf("second Token: %v (same=%v)", err, again == tok)
	}
	if n := srv.Service.OAuth().Refreshes; n != 1 {
		t.Fatalf("refreshes = %d, want 1", n)
	}
	// A second process seeded with the same (now spent) refresh token
	// takes the store's token instead of replaying the spent one.
	o2 := newOAuth(t, srv, store, srv.Service.RefreshToken())
	if tok2, err := o2.Token(ctx); err != nil || tok2 != tok {
		t.Fatalf("second process: %v (same token=%v)", err, tok2 == tok)
	}
	// Refused by the service: a new token, and the store rotates again.
	tok3, err := o2.Refresh(ctx, tok)
	if err != nil || tok3 == tok {
		t.Fatalf("refresh after 401: %v (new=%v)", err, tok3 != tok)
	}
	st2, _, _ := store.Load()
	if st2.RefreshToken == st.RefreshToken || st2.AccessToken != tok3 {
		t.Fatal("store was not rotated by the second refresh")
	}
	if s := srv.Service.OAuth(); s.Refreshes != 2 || s.Replays != 0 {
		t.Fatalf("oauth stats %+v, want 2 refreshes and no replay", s)
	}
	// The first process, whose cached token was replaced, follows the store.
	if tok4, err := o.Refresh(ctx, tok); err != nil || tok4 != tok3 {
		t.Fatalf("first process after rotation: %v (follows store=%v)", err, tok4 == tok3)
	}
}

func TestOAuthRefusedReplayNamesNoSecret(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	dir := t.TempDir()
	ctx := context.Background()
	first := newOAuth(t, srv, &extract.FileTokenStore{Path: filepath.Join(dir, "a.json")}, srv.Service.RefreshToken())
	if _, err := first.Token(ctx); err != nil {
		t.Fatal(err)
	}
	// A thief (another store) replays the spent refresh token.
	thief := newOAuth(t, srv, &extract.FileTokenStore{Path: filepath.Join(dir, "b.json")}, srv.Service.RefreshToken())
	_, err := thief.Token(ctx)
	if !errors.Is(err, extract.ErrRefreshFailed) {
		t.Fatalf("replay: %v, want ErrRefreshFailed", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "invalid_grant") || !strings.Contains(msg, "already been used") {
		t.Errorf("replay error does not say why: %s", msg)
	}
	for _, s := range []string{srv.Service.RefreshToken(), srv.Service.ClientSecret()} {
		if strings.Contains(msg, s) {
			t.Errorf("error holds a secret: %s", msg)
		}
	}
	if s := srv.Service.OAuth(); s.Replays != 1 {
		t.Errorf("replays = %d, want 1", s.Replays)
	}
}

func TestOAuthConcurrentCallersShareOneRefresh(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5), servicetest.WithLatency(20*time.Millisecond))
	defer srv.Close()
	o := newOAuth(t, srv, &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}, srv.Service.RefreshToken())
	var wg sync.WaitGroup
	toks := make([]string, 16)
	errs := make([]error, 16)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = o.Token(context.Background()) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("caller %d: %v (same=%v)", i, errs[i], toks[i] == toks[0])
		}
	}
	if n := srv.Service.OAuth().Refreshes; n != 1 {
		t.Fatalf("refreshes = %d, want 1", n)
	}
}

func TestOAuthNewConfiguredTokenReseeds(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	store := &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}
	// The store holds a chain seeded from an older configured token whose
	// refresh token the service no longer knows.
	if err := store.Save(extract.StoredToken{RefreshToken: "0123456789abcdef-stale", Seed: "deadbeefdeadbeef", Source: "environment"}); err != nil {
		t.Fatal(err)
	}
	o := newOAuth(t, srv, store, srv.Service.RefreshToken())
	if s, err := o.Status(); err != nil || s.Origin != extract.OriginSeed {
		t.Fatalf("status %+v, %v: want the configured token to win over a chain from another seed", s, err)
	}
	if _, err := o.Token(context.Background()); err != nil {
		t.Fatalf("reseeded refresh: %v", err)
	}
	if s, _ := o.Status(); s.Origin != extract.OriginStore || !s.HasAccess || s.AccessExpired {
		t.Fatalf("status after refresh %+v", s)
	}
}

func TestClientRefreshesOnExpiryAndOn401(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5), servicetest.WithTokenTTL(time.Hour))
	defer srv.Close()
	o := newOAuth(t, srv, &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}, srv.Service.RefreshToken())
	c, err := extract.New(srv.URL, extract.WithOAuth(o), extract.WithHTTPClient(srv.Client()), extract.WithRateLimit(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Objects(ctx); err != nil {
		t.Fatal(err)
	}
	// A day passes on the tenant: the token the client holds looks valid
	// to it but the service refuses it; the client refreshes and retries.
	srv.Service.Advance(24 * time.Hour)
	if _, err := c.Objects(ctx); err != nil {
		t.Fatalf("after the token expired on the service: %v", err)
	}
	if n := srv.Service.OAuth().Refreshes; n != 2 {
		t.Fatalf("refreshes = %d, want 2", n)
	}
}

func TestOAuthRefreshesBeforeExpiry(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	o, err := extract.NewOAuth(srv.URL, extract.OAuthConfig{
		ClientID: srv.Service.ClientID(), ClientSecret: srv.Service.ClientSecret(), RefreshToken: srv.Service.RefreshToken(),
	}, &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}, extract.WithOAuthHTTPClient(srv.Client()), extract.WithOAuthClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := o.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(50 * time.Minute) // still 10 minutes left: reused
	mu.Unlock()
	if b, _ := o.Token(ctx); b != a {
		t.Fatal("refreshed a token with 10 minutes left")
	}
	mu.Lock()
	now = now.Add(9 * time.Minute) // one minute left, inside the margin
	mu.Unlock()
	if b, err := o.Token(ctx); err != nil || b == a {
		t.Fatalf("no refresh inside the expiry margin: %v", err)
	}
	if n := srv.Service.OAuth().Refreshes; n != 2 {
		t.Fatalf("refreshes = %d, want 2", n)
	}
}

// TestOAuthAsksAgainAfterATransientFailure: a token endpoint that fails
// in a way that may pass (a 502 with an HTML body, a 503 asking to wait,
// a dropped connection) is asked again, after the wait it asks for or a
// doubling one, and the request that needed the token goes through; a
// refusal (400 invalid_grant) is final at once, and an endpoint that
// keeps failing ends after refreshAttempts (4) with ErrRefreshFailed.
func TestOAuthAsksAgainAfterATransientFailure(t *testing.T) {
	t.Parallel()
	type answer func(w http.ResponseWriter)
	bad := func(status int, header, body string) answer {
		return func(w http.ResponseWriter) {
			if header != "" {
				k, v, _ := strings.Cut(header, ": ")
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	drop := func(w http.ResponseWriter) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	refused := bad(http.StatusBadRequest, "Content-Type: application/json", `{"error":"invalid_grant","error_description":"the refresh token was revoked"}`)
	for _, c := range []struct {
		name    string
		answers []answer // the token endpoint's first answers; then a token
		calls   int      // token requests
		waits   []time.Duration
		refused bool
	}{
		{"a 502", []answer{bad(http.StatusBadGateway, "Content-Type: text/html", "<html>bad gateway</html>")}, 2, []time.Duration{time.Second}, false},
		// A proxy that echoes the request's form past the 300 bytes an
		// error quotes: no part of a credential reaches the error or the
		// log (it was cut before it was scrubbed, its head kept).
		{"a 502 echoing the form", []answer{bad(http.StatusBadGateway, "Content-Type: text/plain",
			strings.Repeat("x", 270)+" refresh_token=ref%2Fold-123456789&client_secret=secret-123456789")}, 2, []time.Duration{time.Second}, false},
		{"a 503 asking to wait, then a dropped connection", []answer{bad(http.StatusServiceUnavailable, "Retry-After: 7", ""), drop}, 3,
			[]time.Duration{7 * time.Second, 2 * time.Second}, false},
		{"a 429 asking too long a wait", []answer{bad(http.StatusTooManyRequests, "Retry-After: 3600", "")}, 2, []time.Duration{30 * time.Second}, false},
		{"a refusal", []answer{refused}, 1, nil, true},
		{"failing on", []answer{drop, drop, drop, drop, drop}, 4, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			mux := http.NewServeMux()
			mux.HandleFunc(extract.OAuthTokenPath, func(w http.ResponseWriter, r *http.Request) {
				if n := int(calls.Add(1)); n <= len(c.answers) {
					c.answers[n-1](w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"access_token":"acc-new-123456789","token_type":"bearer","expires_in":3600,"refresh_token":"ref-new-123456789"}`))
			})
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer acc-new-123456789" {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"fields":[{"id":"courseId","displayName":"Course","type":"int"}]}`))
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			var mu sync.Mutex
			var waits []time.Duration
			var logs strings.Builder
			o, err := extract.NewOAuth(srv.URL, extract.OAuthConfig{ClientID: "cid", ClientSecret: "secret-123456789", RefreshToken: "ref/old-123456789"},
				&extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}, extract.WithOAuthHTTPClient(srv.Client()),
				extract.WithOAuthLogger(slog.New(slog.NewTextHandler(&logs, nil))),
				extract.WithOAuthSleep(func(ctx context.Context, d time.Duration) error {
					mu.Lock()
					defer mu.Unlock()
					waits = append(waits, d)
					return ctx.Err()
				}))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := extract.New(srv.URL, extract.WithOAuth(o), extract.WithHTTPClient(srv.Client()), extract.WithBackoffForTest(time.Millisecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Describe(context.Background(), "course")
			switch {
			case c.refused && !errors.Is(err, extract.ErrRefreshFailed):
				t.Errorf("describe: %v, want ErrRefreshFailed", err)
			case !c.refused && err != nil:
				t.Errorf("describe: %v", err)
			}
			// A refusal is one, an endpoint failing on is an outage
			// (a later run may succeed with the same tokens).
			if c.refused {
				if outage, refused := extract.RefreshOutage(err), extract.RefreshRefused(err); outage != (c.name == "failing on") || refused != (c.name == "a refusal") {
					t.Errorf("RefreshOutage %v, RefreshRefused %v for %v", outage, refused, err)
				}
			}
			var text string
			if err != nil {
				text = err.Error()
			}
			mu.Lock()
			text += logs.String()
			mu.Unlock()
			for _, part := range []string{"old-1234", "secret-1", "123456789"} {
				if strings.Contains(text, part) {
					t.Errorf("the error or the log holds part of a credential (%q): %s", part, text)
				}
			}
			if n := int(calls.Load()); n != c.calls {
				t.Errorf("%d token requests, want %d", n, c.calls)
			}
			if !slices.Equal(waits, c.waits) {
				t.Errorf("waits %v, want %v", waits, c.waits)
			}
		})
	}
}

// TestSignalDuringRefreshKeepsTheRotation: a run cancelled (SIGTERM)
// while the token endpoint answers must still save the rotated refresh
// token: dropping the answer left the store with the spent one, and the
// next run was refused (invalid_grant) until sepipe auth login (found by
// review).
func TestSignalDuringRefreshKeepsTheRotation(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		// The endpoint rotates; the signal arrives before its answer.
		resp, err := http.DefaultTransport.RoundTrip(r.Clone(context.Background()))
		if r.URL.Path == extract.OAuthTokenPath {
			cancel()
			select {
			case <-r.Context().Done(): // the request was bound to the run
				if resp != nil {
					resp.Body.Close()
				}
				return nil, r.Context().Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return resp, err
	})}
	store := &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), ".sepipe", "token.json")}
	o, err := extract.NewOAuth(srv.URL, extract.OAuthConfig{
		ClientID: srv.Service.ClientID(), ClientSecret: srv.Service.ClientSecret(), RefreshToken: srv.Service.RefreshToken(),
	}, store, extract.WithOAuthHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Token(ctx); err != nil {
		t.Logf("interrupted refresh: %v", err)
	}
	next := newOAuth(t, srv, store, srv.Service.RefreshToken())
	if _, err := next.Token(context.Background()); err != nil {
		t.Errorf("the run after an interrupted refresh is locked out: %v (token endpoint: %+v)", err, srv.Service.OAuth())
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTokenStoreIsTheOwnersAlone: a token file readable by others (a
// backup restored, a copy) is made the owner's alone when it is read; it
// was used as it was for as long as its access token lasted (found by
// review).
func TestTokenStoreIsTheOwnersAlone(t *testing.T) {
	t.Parallel()
	store := &extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "token.json")}
	if err := store.Save(extract.StoredToken{AccessToken: "a", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.Load(); err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	if fi, err := os.Stat(store.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token store mode %v after a load, want 0600 (%v)", fi.Mode().Perm(), err)
	}
}
