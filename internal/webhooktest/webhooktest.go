package webhooktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/webhooks"
)

// Secret is a signing key for test subscriptions.
const Secret = "bGlzdGVuLXRlc3Qtc2VjcmV0LTMyLWJ5dGVzLWxvbmc="

// StartListen runs webhooks.Listen on a free local port until the
// returned stop is called (or the test ends); stop returns Listen's error.
func StartListen(t testing.TB, cfg webhooks.ListenConfig) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	ready := make(chan struct{})
	cfg.Ready = func(net.Addr) { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- webhooks.Listen(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("listen did not start: %v", err)
	}
	var once sync.Once
	var lerr error
	stop = func() error {
		once.Do(func() { cancel(); lerr = <-done })
		return lerr
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

// Sign is the service's signature of raw at ts under key.
func Sign(key string, raw []byte, ts int64) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(raw)
	m.Write([]byte("." + strconv.FormatInt(ts, 10)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Event is a COURSE_COMPLETED event with id.
func Event(id string) []byte {
	return []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"` + id + `","time":"2026-11-23T04:00:00Z","data":{"userId":10042}}`)
}

// Deliver POSTs body signed at ts (now when zero) and returns the status,
// or 0 when there was no answer.
func Deliver(hc *http.Client, url string, body []byte, key string, ts int64) int {
	if ts == 0 {
		ts = time.Now().Unix()
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooks.SignatureHeader, Sign(key, body, ts))
	req.Header.Set(webhooks.SignatureTimestampHeader, strconv.FormatInt(ts, 10))
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Received is event i of a batch as the receiver hands it to the spool:
// an id, a type, the raw JSON, and an event time on two of every three.
func Received(i int) *service.Event {
	id := fmt.Sprintf("ev-%05d", i)
	ev := &service.Event{ID: id, Type: "COURSE_COMPLETED", Subscription: "lms",
		Raw:        []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"` + id + `","data":{"n":` + fmt.Sprint(i) + `}}`),
		ReceivedAt: time.Date(2026, 11, 23, 4, 5, 6, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)}
	if i%3 != 0 {
		ev.Time = time.Date(2026, 11, 23, 4, 0, i%60, 0, time.UTC)
	}
	return ev
}
