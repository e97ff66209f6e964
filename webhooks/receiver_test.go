package webhooks_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/webhooktest"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/webhooks"
)

// memSink is an EventSink in memory, deduplicating by id.
type memSink struct {
	mu   sync.Mutex
	evs  map[string]service.Event
	fail error
}

func newMemSink() *memSink { return &memSink{evs: map[string]service.Event{}} }

func (s *memSink) Accept(_ context.Context, ev *service.Event) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	if _, ok := s.evs[ev.ID]; ok {
		return true, nil
	}
	s.evs[ev.ID] = *ev
	return false, nil
}

func (s *memSink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.evs)
}

func (s *memSink) get(id string) (service.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.evs[id]
	return ev, ok
}

const (
	rKey    = "c2lnbmluZy1rZXktb25lLXRoaXJ0eS10d28tYnl0ZXM="
	rOldKey = "b2xkLWtleS1iZWZvcmUtcm90YXRpb24tMzItYnl0ZXM="
)

var rNow = time.Date(2026, 11, 23, 4, 5, 6, 0, time.UTC)

func eventBody(id string) []byte {
	return []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"` + id + `","time":"2026-11-23T04:00:00Z","data":{"userId":10042,"score":87.5}}`)
}

func TestReceiverStatuses(t *testing.T) {
	ts := rNow.Unix()
	body := eventBody("ev-1")
	getQuery := "subscription=lms&" + url.Values{"type": {"content-viewed"}, "specversion": {"1"}, "id": {"ev-get"},
		"time": {"2026-11-23T04:00:00Z"}, "data": {`{"share":{"id":"s1"}}`}}.Encode()
	cases := []struct {
		name    string
		method  string
		query   string
		body    []byte
		chunked bool // no Content-Length
		sig     string
		ts      string
		status  int
		stored  string // id stored, "" if nothing
	}{
		{"post ok", "POST", "subscription=lms", body, false, webhooktest.Sign(rKey, body, ts), fmt.Sprint(ts), 200, "ev-1"},
		{"post rotated old key", "POST", "", body, false, webhooktest.Sign(rOldKey, body, ts), fmt.Sprint(ts), 200, "ev-1"},
		{"several signatures, one good", "POST", "", body, false, "bm9wZQ==, " + webhooktest.Sign("other", body, ts) + "," + webhooktest.Sign(rKey, body, ts), fmt.Sprint(ts), 200, "ev-1"},
		{"get ok", "GET", getQuery, nil, false, webhooktest.Sign(rKey, []byte(getQuery), ts), fmt.Sprint(ts), 200, "ev-get"},
		{"forged", "POST", "", body, false, webhooktest.Sign("not-the-key", body, ts), fmt.Sprint(ts), 401, ""},
		{"tampered body", "POST", "", eventBody("ev-2"), false, webhooktest.Sign(rKey, body, ts), fmt.Sprint(ts), 401, ""},
		{"signature of another timestamp", "POST", "", body, false, webhooktest.Sign(rKey, body, ts-1), fmt.Sprint(ts), 401, ""},
		{"no signature", "POST", "", body, false, "", fmt.Sprint(ts), 401, ""},
		{"no timestamp", "POST", "", body, false, webhooktest.Sign(rKey, body, ts), "", 401, ""},
		{"garbage signature", "POST", "", body, false, "%%%", fmt.Sprint(ts), 401, ""},
		{"get tampered query", "GET", strings.Replace(getQuery, "ev-get", "ev-x", 1), nil, false, webhooktest.Sign(rKey, []byte(getQuery), ts), fmt.Sprint(ts), 401, ""},
		{"stale", "POST", "", body, false, webhooktest.Sign(rKey, body, ts-301), fmt.Sprint(ts - 301), 400, ""},
		{"too far in the future", "POST", "", body, false, webhooktest.Sign(rKey, body, ts+301), fmt.Sprint(ts + 301), 400, ""},
		{"edge of window", "POST", "", body, false, webhooktest.Sign(rKey, body, ts-300), fmt.Sprint(ts - 300), 200, "ev-1"},
		{"signed non-numeric timestamp", "POST", "", body, false, signStr(rKey, body, "soon"), "soon", 400, ""},
		{"not json", "POST", "", []byte("not json"), false, webhooktest.Sign(rKey, []byte("not json"), ts), fmt.Sprint(ts), 400, ""},
		{"no id", "POST", "", []byte(`{"type":"x"}`), false, webhooktest.Sign(rKey, []byte(`{"type":"x"}`), ts), fmt.Sprint(ts), 400, ""},
		{"get data not json", "GET", "type=x&id=i&data=%7B", nil, false, webhooktest.Sign(rKey, []byte("type=x&id=i&data=%7B"), ts), fmt.Sprint(ts), 400, ""},
		{"oversized", "POST", "", bytes.Repeat([]byte("x"), 1025), false, webhooktest.Sign(rKey, bytes.Repeat([]byte("x"), 1025), ts), fmt.Sprint(ts), 413, ""},
		{"oversized chunked", "POST", "", bytes.Repeat([]byte("x"), 1025), true, webhooktest.Sign(rKey, bytes.Repeat([]byte("x"), 1025), ts), fmt.Sprint(ts), 413, ""},
		{"oversized get", "GET", "id=" + strings.Repeat("x", 1025), nil, false, webhooktest.Sign(rKey, []byte("id="+strings.Repeat("x", 1025)), ts), fmt.Sprint(ts), 413, ""},
		{"put", "PUT", "", body, false, webhooktest.Sign(rKey, body, ts), fmt.Sprint(ts), 405, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := newMemSink()
			obs := &recordingObserver{}
			rc, err := webhooks.NewReceiver(sink, []string{rKey, " " + rOldKey + " "}, webhooks.WithMaxBody(1024),
				webhooks.WithReceiverClock(func() time.Time { return rNow }), webhooks.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			var rd io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				rd = io.MultiReader(rd) // hides the length
			}
			req := httptest.NewRequest(tc.method, "/hook?"+tc.query, rd)
			if tc.chunked {
				req.ContentLength = -1
			}
			if tc.sig != "" {
				req.Header.Set(webhooks.SignatureHeader, tc.sig)
			}
			if tc.ts != "" {
				req.Header.Set(webhooks.SignatureTimestampHeader, tc.ts)
			}
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			// The metrics' outcome or reason of the answer.
			want := map[int]string{200: webhooks.OutcomeAccepted, 401: webhooks.RefusedSignature, 405: webhooks.RefusedMethod,
				413: webhooks.RefusedTooLarge, 400: webhooks.RefusedMalformed}[tc.status]
			if tc.status == 400 && (tc.name == "stale" || strings.Contains(tc.name, "future") || strings.Contains(tc.name, "timestamp")) {
				want = webhooks.RefusedStale
			}
			if got := obs.seen(); len(got) != 1 || got[0] != want {
				t.Errorf("observer told %q, want [%s]", got, want)
			}
			if tc.stored == "" {
				if sink.len() != 0 {
					t.Fatalf("stored %d events from a refused delivery", sink.len())
				}
				return
			}
			ev, ok := sink.get(tc.stored)
			if !ok || sink.len() != 1 {
				t.Fatalf("event %s not stored (%d stored)", tc.stored, sink.len())
			}
			if ev.ReceivedAt != rNow || ev.Time != time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC) || ev.SpecVersion != 1 {
				t.Errorf("event %+v", ev)
			}
			if strings.Contains(tc.query, "subscription=lms") != (ev.Subscription == "lms") {
				t.Errorf("subscription %q", ev.Subscription)
			}
			var m map[string]any
			if err := json.Unmarshal(ev.Raw, &m); err != nil || m["id"] != tc.stored || m["data"] == nil || m["type"] != ev.Type {
				t.Errorf("raw %s: %v", ev.Raw, err)
			}
			if tc.method == "POST" && !bytes.Equal(ev.Raw, tc.body) {
				t.Errorf("POST raw is not the body as received: %s", ev.Raw)
			}
		})
	}
}

// recordingObserver records what a receiver tells its observer.
type recordingObserver struct {
	webhooks.NoObserver
	mu  sync.Mutex
	got []string
}

func (o *recordingObserver) Delivered(outcome string) { o.add(outcome) }
func (o *recordingObserver) Refused(reason string)    { o.add(reason) }
func (o *recordingObserver) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, s)
}
func (o *recordingObserver) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

func signStr(key string, raw []byte, ts string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(raw)
	m.Write([]byte("." + ts))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestReceiverDuplicateAndSinkFailure(t *testing.T) {
	sink := newMemSink()
	rc, _ := webhooks.NewReceiver(sink, []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
	body := eventBody("ev-dup")
	send := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, rNow.Unix()))
		req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(rNow.Unix()))
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w
	}
	if w := send(); w.Code != 200 || !strings.Contains(w.Body.String(), "accepted") {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if w := send(); w.Code != 200 || !strings.Contains(w.Body.String(), "duplicate") || sink.len() != 1 {
		t.Fatalf("replay: %d %s, %d stored", w.Code, w.Body, sink.len())
	}
	sink.fail = errors.New("disk full")
	body = eventBody("ev-other")
	if w := send(); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("sink failure: %d, want 503 (the service retries 5xx)", w.Code)
	}
}

func TestReceiverOptionsValidated(t *testing.T) {
	if _, err := webhooks.NewReceiver(newMemSink(), []string{" ", ""}); err == nil {
		t.Error("no secret accepted")
	}
	if _, err := webhooks.NewReceiver(nil, []string{"k"}); err == nil {
		t.Error("nil sink accepted")
	}
	if _, err := webhooks.NewReceiver(newMemSink(), []string{"k"}, webhooks.WithMaxBody(0)); err == nil {
		t.Error("max body 0 accepted")
	}
}

func TestReceiverConcurrent(t *testing.T) {
	sink := newMemSink()
	rc, _ := webhooks.NewReceiver(sink, []string{rKey})
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				body := eventBody(fmt.Sprintf("ev-%d-%d", i, j%2)) // every event twice
				req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
				ts := time.Now().Unix()
				req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, ts))
				req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	if sink.len() != 100 {
		t.Errorf("%d events, want 100", sink.len())
	}
}

// TestReceiverAgainstFake subscribes a receiver to the fake service by POST
// and by GET, advances the fake's clock, and requires every event to be
// delivered (2xx in the fake's log) and received once per subscription.
func TestReceiverAgainstFake(t *testing.T) {
	fake := servicetest.NewServer(servicetest.WithUsers(30), servicetest.WithDeliveryRetryDelays(10*time.Millisecond))
	defer fake.Close()
	c, err := extract.New(fake.URL, extract.WithAPIToken(fake.Service.APIToken()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sinks := map[string]*memSink{}
	var subs []*extract.Subscription
	for _, method := range []string{"POST", "GET"} {
		sinks[method] = newMemSink()
		var rc atomic.Pointer[webhooks.Receiver] // known once the subscription's secret is
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rc.Load().ServeHTTP(w, r) }))
		defer srv.Close()
		s, err := c.CreateSubscription(ctx, extract.SubscriptionRequest{Name: "rx-" + method, URL: srv.URL + "/in?subscription=rx-" + method,
			Method: method, Types: []string{servicetest.EventCourseCompleted}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := webhooks.NewReceiver(sinks[method], []string{"previous-key", s.SignatureKey.Reveal()})
		if err != nil {
			t.Fatal(err)
		}
		rc.Store(r)
		subs = append(subs, s)
	}
	n := fake.Service.Advance(45 * 24 * time.Hour)
	if n == 0 {
		t.Fatal("advance produced no events")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fake.Service.WaitDeliveries(wctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		sink := sinks[s.Method]
		if sink.len() != n {
			t.Errorf("%s: received %d events, want %d", s.Method, sink.len(), n)
		}
		logs, err := c.SubscriptionLogs(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			if l.Outcome != "delivered" || l.Response.Status != 200 {
				t.Errorf("%s: delivery of %s: %s %d %s", s.Method, l.EventID, l.Outcome, l.Response.Status, l.Response.Body)
			}
			ev, ok := sink.get(l.EventID)
			if !ok || ev.Type != servicetest.EventCourseCompleted || ev.Subscription != "rx-"+s.Method || ev.Time.IsZero() {
				t.Errorf("%s: event %s: %+v", s.Method, l.EventID, ev)
			}
		}
	}
}

// TestOversizedDeliveryGets413NotAReset: a sender that writes its whole
// 8 MiB body before reading the answer reads a 413, not a connection reset
// (which senders retry for ever), over a real connection. The delivery is
// signed as the service signs (a delivery without a signature or with a
// stale timestamp is refused before its body is read).
func TestOversizedDeliveryGets413NotAReset(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			rc, err := webhooks.NewReceiver(newMemSink(), []string{rKey})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := bytes.Repeat([]byte("x"), 8<<20)
			var req bytes.Buffer
			fmt.Fprintf(&req, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
			ts := time.Now().Unix()
			fmt.Fprintf(&req, "%s: %s\r\n%s: %d\r\n", webhooks.SignatureHeader, webhooktest.Sign(rKey, body, ts), webhooks.SignatureTimestampHeader, ts)
			if chunked {
				fmt.Fprintf(&req, "Transfer-Encoding: chunked\r\n\r\n%x\r\n", len(body))
			} else {
				fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n", len(body))
			}
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := conn.Write(req.Bytes()); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(body); err != nil {
				t.Fatalf("writing the body: %v (the receiver closed the connection before the sender finished)", err)
			}
			if chunked {
				if _, err := conn.Write([]byte("\r\n0\r\n\r\n")); err != nil {
					t.Fatalf("writing the last chunk: %v", err)
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v (want a 413)", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413", resp.StatusCode)
			}
		})
	}
}

// TestUnstorableEventsAreRefusedBeforeTheyAreAcknowledged: an event the
// warehouse could not store (invalid UTF-8, a lone surrogate escape, NUL)
// gets a 400, never a 200 that would block the events after it.
func TestUnstorableEventsAreRefusedBeforeTheyAreAcknowledged(t *testing.T) {
	ts := rNow.Unix()
	for name, body := range map[string][]byte{
		"invalid utf8":   []byte("{\"type\":\"COURSE_COMPLETED\",\"specversion\":1,\"id\":\"ev-x\",\"data\":{\"name\":\"\xff\"}}"),
		"lone surrogate": []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev-y","data":{"name":"\ud800"}}`),
		"lone low":       []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev-z","data":{"name":"a\udc00"}}`),
		"nul in id":      []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev\u0000w","data":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			w, sink := postSigned(body, ts)
			if w.Code != 400 || sink.len() != 0 {
				t.Fatalf("status %d, stored %d: %s", w.Code, sink.len(), w.Body)
			}
		})
	}
	// A proper pair, an escaped backslash before a u, and plain text pass.
	w, sink := postSigned([]byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev-ok","data":{"e":"\ud83d\ude00","p":"C:\\users"}}`), ts)
	if w.Code != 200 || sink.len() != 1 {
		t.Fatalf("a storable event: status %d, stored %d: %s", w.Code, sink.len(), w.Body)
	}
}

// postSigned delivers body, signed with rKey at ts, to a new receiver.
func postSigned(body []byte, ts int64) (*httptest.ResponseRecorder, *memSink) {
	sink := newMemSink()
	rc, _ := webhooks.NewReceiver(sink, []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
	req := httptest.NewRequest("POST", "/hook", bytes.NewReader(body))
	req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, ts))
	req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	return w, sink
}

// field-notes.md, Webhooks: the delivery body's "time" is "<ISO 8601>",
// and a 4xx is "failed, not retried". ISO 8601 date-times with a basic
// offset (+0000) or without a zone were answered 400 ("is not ISO 8601"):
// the event was lost. They are read as the decoder reads a date.
func TestReceiverReadsTimesInOtherISO8601Forms(t *testing.T) {
	ts := rNow.Unix()
	for _, c := range []struct{ time, want string }{
		{"2026-11-23T04:00:00.123+0000", "2026-11-23T04:00:00.123Z"},
		{"2026-11-23T06:00:00+0200", "2026-11-23T04:00:00Z"},
		{"2026-11-23T04:00:00", "2026-11-23T04:00:00Z"},
		{"2026-11-23 04:00:00.5Z", "2026-11-23T04:00:00.5Z"},
	} {
		body := []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev-` + c.time + `","time":"` + c.time + `","data":{"userId":10042}}`)
		w, sink := postSigned(body, ts)
		if w.Code != 200 || sink.len() != 1 {
			t.Errorf("time %q: status %d, stored %d: %s (a 4xx is not retried: the event is lost)", c.time, w.Code, sink.len(), w.Body)
			continue
		}
		ev, _ := sink.get("ev-" + c.time)
		if want, _ := time.Parse(time.RFC3339Nano, c.want); !ev.Time.Equal(want) {
			t.Errorf("time %q: stored %v, want %v", c.time, ev.Time, want)
		}
	}
}

// An event whose time cannot be read (not ISO 8601, or outside what the
// spool holds) was answered 400, which the service does not retry: the
// event was lost. It is stored with a null time and its body as sent, and
// the reason is logged, naming the event and the value, and given in the
// answer (which the service's delivery log shows).
func TestReceiverKeepsAnEventWhoseTimeItCannotRead(t *testing.T) {
	ts := rNow.Unix()
	for _, c := range []struct{ name, method, query, time string }{
		{"post, not a date", "POST", "", `"yesterday"`},
		{"post, a time the spool cannot hold", "POST", "", `"1000-01-01T00:00:00Z"`},
		{"post, a number", "POST", "", `1795406400`},
		{"post, an object", "POST", "", `{"at":"2026-11-23T04:00:00Z"}`},
		{"get, not a date", "GET", "subscription=lms&type=x&id=ev-x&time=next+week", `"next week"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			sink := newMemSink()
			rc, err := webhooks.NewReceiver(sink, []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }),
				webhooks.WithReceiverLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			var req *http.Request
			if c.method == "POST" {
				body := []byte(`{"type":"x","id":"ev-x","time":` + c.time + `}`)
				req = httptest.NewRequest("POST", "/hook", bytes.NewReader(body))
				req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, ts))
			} else {
				req = httptest.NewRequest("GET", "/hook?"+c.query, nil)
				req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, []byte(c.query), ts))
			}
			req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			ev, ok := sink.get("ev-x")
			if w.Code != 200 || !ok {
				t.Fatalf("status %d, stored %v: %s (a 4xx is not retried: the event is lost)", w.Code, ok, w.Body)
			}
			var raw struct{ Time json.RawMessage }
			if err := json.Unmarshal(ev.Raw, &raw); err != nil || !ev.Time.IsZero() || string(raw.Time) != c.time {
				t.Errorf("stored time %v, raw %s (%v): want a zero time and the value as sent", ev.Time, ev.Raw, err)
			}
			shown := strings.Trim(c.time, `"`)
			var answer struct{ Status, Warning string }
			if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Status != "accepted" || !strings.Contains(answer.Warning, shown) {
				t.Errorf("answer %s: want accepted, with a warning naming the time", w.Body)
			}
			var line struct{ Level, ID, Reason string }
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Level != "WARN" || line.ID != "ev-x" || !strings.Contains(line.Reason, shown) {
				t.Errorf("log %s (%v): want a warning naming the event and its time", logs.Bytes(), err)
			}
		})
	}
}

// TestReceiverKeepsTheSubscriptionBesideABadQueryParameter: a POST
// delivery's URL names its subscription (?subscription=lms); one other
// parameter with a bad %-escape (a proxy's, a tracking tag's) dropped the
// whole query, so the event was stored without its subscription; a GET
// delivery with one was refused and lost.
func TestReceiverKeepsTheSubscriptionBesideABadQueryParameter(t *testing.T) {
	ts := rNow.Unix()
	sink := newMemSink()
	rc, err := webhooks.NewReceiver(sink, []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"COURSE_COMPLETED","specversion":1,"id":"ev-q","time":"2026-11-23T04:00:00Z","data":{}}`)
	req := httptest.NewRequest("POST", "/hook?utm=100%zz&subscription=lms", bytes.NewReader(body))
	req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, ts))
	req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	ev, ok := sink.get("ev-q")
	if w.Code != 200 || !ok {
		t.Fatalf("status %d, stored %v: %s", w.Code, ok, w.Body)
	}
	if ev.Subscription != "lms" {
		t.Errorf("subscription %q, want lms (the other parameter's bad escape dropped it)", ev.Subscription)
	}
	// A GET delivery (the event in the query) alike: it was refused, 400,
	// which the service does not retry.
	query := "utm=100%zz&subscription=lms&type=COURSE_COMPLETED&id=ev-g&time=2026-11-23T04%3A00%3A00Z"
	req = httptest.NewRequest("GET", "/hook?"+query, nil)
	req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, []byte(query), ts))
	req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
	w = httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if ev, ok := sink.get("ev-g"); w.Code != 200 || !ok || ev.Subscription != "lms" || ev.Type != "COURSE_COMPLETED" {
		t.Errorf("GET delivery: status %d, stored %v (%+v): %s", w.Code, ok, ev, w.Body)
	}
}

// TestReceiverGetEventParameterWithABadEscape: a GET delivery whose own
// event parameter (id, type, time, data) has a bad %-escape. The query is
// read leniently so that another parameter's bad escape loses nothing
// (TestReceiverKeepsTheSubscriptionBesideABadQueryParameter), but the
// parameters it skipped were the event's too: data was stored as none, a
// time as null with no warning and without the value in raw, and an id or
// type the URL also carries (the receiver's own ?id=, ?type=) was taken
// from the URL: the event stored with another event's id. An event
// parameter that cannot be read is never replaced by an earlier one or
// by none: id, type and data refuse the delivery (400, naming the
// parameter, as before the lenient read); a time is kept as sent, in raw,
// with the warning of a time not read.
func TestReceiverGetEventParameterWithABadEscape(t *testing.T) {
	ts := rNow.Unix()
	for _, c := range []struct {
		name, query string
		status      int
		id, time    string // stored event; time: raw's time as JSON
	}{
		{"data", "subscription=lms&type=x&id=ev-d&data=%7B%22a%22%3A1%zz%7D", 400, "", ""},
		{"id beside the url's own", "id=url-id&subscription=lms&type=x&id=ev-i%zz", 400, "", ""},
		{"type beside the url's own", "type=url-type&subscription=lms&type=x%zz&id=ev-y", 400, "", ""},
		{"time", "subscription=lms&type=x&id=ev-t&time=2026-11-23T04%3A00%3A00Z%zz", 200, "ev-t", `"2026-11-23T04%3A00%3A00Z%zz"`},
		{"time beside the url's own", "time=2020-01-01T00%3A00%3A00Z&subscription=lms&type=x&id=ev-u&time=2026-11-23T04%3A00%zz", 200, "ev-u", `"2026-11-23T04%3A00%zz"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := newMemSink()
			rc, err := webhooks.NewReceiver(sink, []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/hook?"+c.query, nil)
			req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, []byte(c.query), ts))
			req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s (stored %d events)", w.Code, c.status, w.Body, sink.len())
			}
			if c.status != 200 {
				if sink.len() != 0 || !strings.Contains(w.Body.String(), c.name[:strings.IndexByte(c.name+" ", ' ')]) {
					t.Errorf("stored %d events, answer %q: want none stored and the parameter named", sink.len(), w.Body)
				}
				return
			}
			ev, ok := sink.get(c.id)
			if !ok {
				t.Fatalf("event %s not stored (stored %d)", c.id, sink.len())
			}
			var raw struct{ Time json.RawMessage }
			if err := json.Unmarshal(ev.Raw, &raw); err != nil || !ev.Time.IsZero() || string(raw.Time) != c.time {
				t.Errorf("stored time %v, raw %s (%v): want a zero time and the value as sent", ev.Time, ev.Raw, err)
			}
			if !strings.Contains(w.Body.String(), "warning") {
				t.Errorf("answer %s: want a warning that the time was not read", w.Body)
			}
		})
	}
}

// bodySpy is a request body that counts its reads and can fail them.
type bodySpy struct {
	r     io.Reader
	reads int
	err   error
}

func (b *bodySpy) Read(p []byte) (int, error) {
	b.reads++
	if b.err != nil {
		return 0, b.err
	}
	return b.r.Read(p)
}

// TestHeadersAreCheckedBeforeTheBody: a delivery without a well-formed
// signature, without a timestamp, or signed outside the window is refused
// before a byte of its body is read (issue 40: every body was read whole
// first, so strangers made the receiver hold what they sent).
func TestHeadersAreCheckedBeforeTheBody(t *testing.T) {
	body := eventBody("ev-1")
	ts := rNow.Unix()
	for _, tc := range []struct {
		name, sig, ts string
		status        int
	}{
		{"no signature", "", fmt.Sprint(ts), 401},
		{"garbage signature", "%%%", fmt.Sprint(ts), 401},
		{"signature of 16 bytes", "AAAAAAAAAAAAAAAAAAAAAA==", fmt.Sprint(ts), 401},
		{"no timestamp", webhooktest.Sign(rKey, body, ts), "", 401},
		{"stale", webhooktest.Sign(rKey, body, ts-301), fmt.Sprint(ts - 301), 400},
		{"not Unix seconds", webhooktest.Sign(rKey, body, ts), "soon", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := webhooks.NewReceiver(newMemSink(), []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
			if err != nil {
				t.Fatal(err)
			}
			spy := &bodySpy{r: bytes.NewReader(body)}
			req := httptest.NewRequest("POST", "/hook", spy)
			if tc.sig != "" {
				req.Header.Set(webhooks.SignatureHeader, tc.sig)
			}
			if tc.ts != "" {
				req.Header.Set(webhooks.SignatureTimestampHeader, tc.ts)
			}
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != tc.status || spy.reads != 0 {
				t.Errorf("status %d after %d reads of the body, want %d before any: %s", w.Code, spy.reads, tc.status, w.Body)
			}
		})
	}
}

// TestCutDeliveryGetsAStatusTheServiceRetries: a delivery whose body
// stops arriving (the receiver's read deadline, a dropped connection) was
// answered 400, which the service never retries, so a slow delivery was
// lost for good (issue 40). It is answered 503 with Retry-After.
func TestCutDeliveryGetsAStatusTheServiceRetries(t *testing.T) {
	rc, err := webhooks.NewReceiver(newMemSink(), []string{rKey}, webhooks.WithReceiverClock(func() time.Time { return rNow }))
	if err != nil {
		t.Fatal(err)
	}
	body := eventBody("ev-1")
	req := httptest.NewRequest("POST", "/hook", &bodySpy{err: os.ErrDeadlineExceeded})
	req.ContentLength = int64(len(body))
	req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(rKey, body, rNow.Unix()))
	req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(rNow.Unix()))
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q, want 503 with one: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}

// TestBodyBudgetSettings: a budget or a share that one delivery or one
// source could take whole is refused, naming the setting's values.
func TestBodyBudgetSettings(t *testing.T) {
	for _, tc := range []struct {
		budget, share int64
		ok            bool
	}{
		{64 << 20, 16 << 20, true},
		{2 << 20, 1 << 20, true},
		{1 << 20, 1 << 20, false},    // one delivery takes it all
		{64 << 20, 512 << 10, false}, // no 1 MiB delivery is ever read
		{64 << 20, 65 << 20, false},
	} {
		_, err := webhooks.NewReceiver(newMemSink(), []string{rKey}, webhooks.WithBodyBudget(tc.budget), webhooks.WithSourceShare(tc.share))
		if (err == nil) != tc.ok {
			t.Errorf("budget %d, share %d: %v", tc.budget, tc.share, err)
		}
	}
}
