package extract_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
)

// TestSilentServerEndsWithinTimeoutTimesAttempts: a server that accepts
// connections and never answers ends a read after about timeout ×
// attempts, not minutes.
func TestSilentServerEndsWithinTimeoutTimesAttempts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer conn.Close() // hold it open, say nothing
		}
	}()
	c, err := extract.New("http://"+ln.Addr().String(), extract.WithAccessToken("tok-SECRET-4f1c9a"),
		extract.WithTimeout(200*time.Millisecond), extract.WithRetry(3, 2*time.Second), extract.WithRateLimit(0, 1),
		extract.WithBackoffForTest(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Objects(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer for 200ms") || !errors.Is(err, extract.ErrRetriesExhausted) {
		t.Fatalf("silent server: %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("took %s; 3 attempts of 200ms should end within about 0.7s", took)
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections, want one per attempt (3)", n)
	}
}

// TestStalledBodyIsCutButSlowBodyIsNot: a body that stops arriving is cut
// after the timeout; one that keeps arriving, however slowly in total, is
// read whole.
func TestStalledBodyIsCutButSlowBodyIsNot(t *testing.T) {
	var stall atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"objects":[`))
		w.(http.Flusher).Flush()
		for i := range 6 {
			if stall.Load() && i == 2 {
				time.Sleep(time.Second)
				return
			}
			time.Sleep(100 * time.Millisecond)
			if i > 0 {
				w.Write([]byte(","))
			}
			w.Write([]byte(`{"id":"o` + string(rune('a'+i)) + `","displayName":"x","urls":{}}`))
			w.(http.Flusher).Flush()
		}
		w.Write([]byte(`]}`))
	}))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithTimeout(300*time.Millisecond),
		extract.WithRetry(1, 0), extract.WithRateLimit(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := c.Objects(context.Background())
	if err != nil || len(objs) != 6 {
		t.Fatalf("slow but steady body (600ms in all, 100ms gaps): %d objects, %v", len(objs), err)
	}
	stall.Store(true)
	if _, err := c.Objects(context.Background()); err == nil || !strings.Contains(err.Error(), "no answer for 300ms") {
		t.Fatalf("stalled body: %v", err)
	}
}

// TestNoCredentialToAnotherOrigin: a redirect to another port of the same
// host is refused, and not asked again (another attempt would be sent to
// the same place); the other origin sees no request and no credential.
func TestNoCredentialToAnotherOrigin(t *testing.T) {
	var other atomic.Int32
	var sawAuth atomic.Bool
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		w.Write([]byte(`{"objects":[]}`))
	}))
	defer thief.Close()
	var same atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects") && r.URL.Query().Get("moved") == "" {
			if same.Add(1) == 1 {
				http.Redirect(w, r, r.URL.Path+"?moved=1", http.StatusFound) // same origin: followed
				return
			}
			http.Redirect(w, r, thief.URL+r.URL.Path, http.StatusFound)
			return
		}
		w.Write([]byte(`{"objects":[]}`))
	}))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1), extract.WithRetry(4, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Objects(context.Background()); err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	redirected := same.Load()
	_, err = c.Objects(context.Background())
	if !errors.Is(err, extract.ErrCrossOriginRedirect) {
		t.Fatalf("cross-origin redirect: %v, want ErrCrossOriginRedirect", err)
	}
	if other.Load() != 0 || sawAuth.Load() {
		t.Fatalf("the other origin got %d requests (credential: %v)", other.Load(), sawAuth.Load())
	}
	if n := same.Load() - redirected; n != 1 {
		t.Errorf("the refused redirect was asked for %d times, want once (not retried)", n)
	}
}

// TestResponseLargerThanTheLimitFails: a body past requests.max_response_bytes
// fails its request with a clear error, announced or not.
func TestResponseLargerThanTheLimitFails(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		big := `{"objects":[` + strings.Repeat(`{"id":"x","displayName":"y"},`, 100) + `{"id":"z"}]}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush() // no Content-Length
			}
			w.Write([]byte(big))
		}))
		c, _ := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithMaxResponseBytes(1024), extract.WithRateLimit(0, 1))
		_, err := c.Objects(context.Background())
		srv.Close()
		if !errors.Is(err, extract.ErrResponseTooLarge) || !strings.Contains(err.Error(), "reporting objects") || !strings.Contains(err.Error(), "1024") {
			t.Fatalf("chunked=%v: %v", chunked, err)
		}
	}
}

// TestHugeErrorMessageIsQuotedShort: an error quotes about 1 KB of what
// the service said, however much it said.
func TestHugeErrorMessageIsQuotedShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		w.Write([]byte(`{"response":{"code":2001,"name":"InvalidParameterError","message":"` + strings.Repeat("é", 3<<20) + `"}}`))
	}))
	defer srv.Close()
	c, _ := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1))
	_, err := c.Objects(context.Background())
	if err == nil || len(err.Error()) > 1400 || !strings.Contains(err.Error(), "InvalidParameterError (2001)") {
		t.Fatalf("%d bytes: %.300s", len(err.Error()), err)
	}
}
