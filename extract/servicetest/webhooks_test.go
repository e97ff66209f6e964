package servicetest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const subsPath = WebhooksPath + "/subscriptions"

// delivery is one request a receiver got.
type delivery struct {
	method   string
	header   http.Header
	rawQuery string
	body     []byte
	at       time.Time
}

// receiver is an httptest server that records deliveries and answers
// with the statuses of answer, one per request (the last one repeats).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer []int
}

func newReceiver(t *testing.T, answer ...int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{r.Method, r.Header.Clone(), r.URL.RawQuery, b, time.Now()})
		status := http.StatusOK
		if n := len(rc.got); len(rc.answer) > 0 {
			status = rc.answer[min(n, len(rc.answer))-1]
		}
		rc.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, "status "+strconv.Itoa(status))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// verify checks the signature of d as docs/service-interface.md describes (Webhook deliveries):
// base64(HMAC-SHA256(secret, rawBody + "." + timestamp)), one of possibly
// several comma-separated signatures, and a timestamp at most 5 minutes old.
func verify(t *testing.T, d delivery, secret string) {
	t.Helper()
	ts := d.header.Get("X-Service-Signature-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)) > 5*time.Minute || time.Until(time.Unix(sec, 0)) > time.Minute {
		t.Fatalf("timestamp %q", ts)
	}
	raw := d.body
	if d.method == http.MethodGet {
		raw = []byte(d.rawQuery)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(string(raw) + "." + ts))
	want := m.Sum(nil)
	for _, sig := range strings.Split(d.header.Get("X-Service-Signature-V1"), ",") {
		got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig))
		if err == nil && hmac.Equal(got, want) {
			return
		}
	}
	t.Fatalf("no valid signature in %q", d.header.Get("X-Service-Signature-V1"))
}

func apiTok(srv *Server) reqOpt { return withBearer(srv.Service.APIToken()) }

// subscribe creates a subscription and returns it with its signature key.
func subscribe(t *testing.T, srv *Server, body map[string]any) subscription {
	t.Helper()
	var sub subscription
	callAPI(t, srv, http.MethodPost, subsPath, apiTok(srv), withJSON(body)).want(t, 201).json(t, &sub)
	return sub
}

func logsOf(t *testing.T, srv *Server, id string) (int, []logEntry) {
	t.Helper()
	var b struct {
		Count int        `json:"count"`
		Items []logEntry `json:"items"`
	}
	callAPI(t, srv, http.MethodGet, subsPath+"/"+id+"/logs?limit=1000", apiTok(srv)).want(t, 200).json(t, &b)
	return b.Count, b.Items
}

func waitDeliveries(t *testing.T, srv *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Service.WaitDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSubscriptionsCRUD(t *testing.T) {
	srv := newTestServer(t)
	tok := apiTok(srv)
	body := map[string]any{"name": "lms sync", "url": "https://hooks.example.com/in?x=1", "method": "post",
		"headers": []any{map[string]any{"name": "X-Token", "value": "abc"}}, "types": []any{"COURSE_COMPLETED"}}
	r := callAPI(t, srv, http.MethodPost, subsPath, tok, withJSON(body)).want(t, 201)
	var sub subscription
	r.json(t, &sub)
	key, err := base64.StdEncoding.DecodeString(sub.SignatureKey)
	if !ulidRE.MatchString(sub.ID) || err != nil || len(key) != 32 || sub.Method != "POST" ||
		sub.Name != "lms sync" || len(sub.Headers) != 1 || sub.CreatedAt == "" || sub.RequestCount != 0 {
		t.Fatalf("created %+v", sub)
	}
	if r.h.Get("Location") != subsPath+"/"+sub.ID {
		t.Errorf("Location %q", r.h.Get("Location"))
	}
	// The key is returned once.
	r = callAPI(t, srv, http.MethodGet, subsPath+"/"+sub.ID, tok).want(t, 200)
	if strings.Contains(string(r.body), "signatureKey") {
		t.Fatalf("signatureKey returned again: %s", r.body)
	}
	checkHead(t, srv, subsPath+"/"+sub.ID, tok)

	// 409 for a second subscription of the same name.
	wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath, tok, withJSON(body)), 409)
	body["name"] = "other"
	other := subscribe(t, srv, body)

	// List.
	var list struct {
		Count int            `json:"count"`
		Items []subscription `json:"items"`
	}
	callAPI(t, srv, http.MethodGet, subsPath, tok).want(t, 200).json(t, &list)
	if list.Count != 2 || len(list.Items) != 2 || list.Items[0].ID != sub.ID || list.Items[1].SignatureKey != "" {
		t.Fatalf("list %+v", list)
	}
	callAPI(t, srv, http.MethodGet, subsPath+"?limit=1&offset=1", tok).want(t, 200).json(t, &list)
	if list.Count != 2 || len(list.Items) != 1 || list.Items[0].ID != other.ID {
		t.Fatalf("page %+v", list)
	}
	checkHead(t, srv, subsPath, tok)
	wantProblem(t, callAPI(t, srv, http.MethodGet, subsPath+"?limit=5000", tok), 400)
	wantProblem(t, callAPI(t, srv, http.MethodGet, subsPath+"?name=x", tok), 400)

	// Update replaces the given fields only.
	var up subscription
	callAPI(t, srv, http.MethodPost, subsPath+"/"+sub.ID, tok, withJSON(map[string]any{
		"method": "GET", "types": []any{"shared-space-created", "COURSE_COMPLETED"}})).want(t, 200).json(t, &up)
	if up.Method != "GET" || len(up.Types) != 2 || up.Name != "lms sync" || len(up.Headers) != 1 || up.SignatureKey != "" {
		t.Fatalf("updated %+v", up)
	}
	wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath+"/"+sub.ID, tok, withJSON(map[string]any{"name": "other"})), 409)
	wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath+"/"+sub.ID, tok, withJSON(map[string]any{"method": "PUT"})), 400)

	// 404 for unknown ids, on every operation.
	unknown := subsPath + "/01ARZ3NDEKTSV4RRFFQ69G5FAV"
	wantProblem(t, callAPI(t, srv, http.MethodGet, unknown, tok), 404)
	wantProblem(t, callAPI(t, srv, http.MethodPost, unknown, tok, withJSON(body)), 404)
	wantProblem(t, callAPI(t, srv, http.MethodDelete, unknown, tok), 404)
	wantProblem(t, callAPI(t, srv, http.MethodGet, unknown+"/logs", tok), 404)
	wantProblem(t, callAPI(t, srv, http.MethodGet, WebhooksPath+"/events", tok), 404)

	// Delete.
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+other.ID, tok).want(t, 204)
	wantProblem(t, callAPI(t, srv, http.MethodGet, subsPath+"/"+other.ID, tok), 404)
	subscribe(t, srv, body) // the name is free again

	// 405 with Allow.
	for path, allow := range map[string]string{
		subsPath: "GET, HEAD, POST", subsPath + "/" + sub.ID: "GET, HEAD, POST, DELETE",
		subsPath + "/" + sub.ID + "/logs": "GET, HEAD",
	} {
		r := callAPI(t, srv, http.MethodPut, path, tok)
		if wantProblem(t, r, 405); r.h.Get("Allow") != allow {
			t.Errorf("%s: Allow %q, want %q", path, r.h.Get("Allow"), allow)
		}
	}
	checkHead(t, srv, subsPath+"/"+sub.ID+"/logs", tok)
}

func TestSubscriptionValidation(t *testing.T) {
	srv := newTestServer(t)
	base := func(k string, v any) map[string]any {
		m := map[string]any{"name": "n", "url": "http://127.0.0.1:9/x", "method": "POST", "headers": []any{},
			"types": []any{"COURSE_COMPLETED"}}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	subscribe(t, srv, base("headers", nil)) // headers are optional
	for _, c := range []struct {
		name string
		body map[string]any
		meta string
	}{
		{"no name", base("name", nil), "name:propertyRequired"},
		{"long name", base("name", strings.Repeat("n", MaxSubscriptionName+1)), "name:propertyLength"},
		{"no url", base("url", nil), "url:propertyRequired"},
		{"relative url", base("url", "/hook"), "url:propertyFormat"},
		{"ftp url", base("url", "ftp://example.com/x"), "url:propertyFormat"},
		{"no method", base("method", nil), "method:propertyRequired"},
		{"bad method", base("method", "PUT"), "method:propertyValue"},
		{"headers type", base("headers", "X: y"), "headers:propertyType"},
		{"bad header name", base("headers", []any{map[string]any{"name": "X Y", "value": "1"}}), "headers[0].name:propertyFormat"},
		{"reserved header", base("headers", []any{map[string]any{"name": "X-Service-Signature-V1", "value": "1"}}), "headers[0].name:propertyValue"},
		{"no types", base("types", nil), "types:propertyRequired"},
		{"empty types", base("types", []any{}), "types:propertyLength"},
		{"unknown type", base("types", []any{"COURSE_STARTED"}), "types[0]:propertyValue"},
		{"duplicate type", base("types", []any{"COURSE_COMPLETED", "COURSE_COMPLETED"}), "types[1]:propertyDuplicate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.body["name"] = c.name + "!" // no 409
			if c.meta == "name:propertyRequired" {
				delete(c.body, "name")
			}
			if c.meta == "name:propertyLength" {
				c.body["name"] = strings.Repeat("n", MaxSubscriptionName+1)
			}
			p := wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath, apiTok(srv), withJSON(c.body)), 400)
			if p.Type != "/errors/validation" || !slices.Contains(metaNames(p), c.meta) {
				t.Fatalf("problem %+v, want %s", p, c.meta)
			}
		})
	}
	wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath, apiTok(srv), withJSON(`not json`)), 400)
}

func TestWebhookAuth(t *testing.T) {
	srv := newTestServer(t)
	for _, opt := range []reqOpt{
		withHeader("X-None", "1"), withBearer("nope"), withBearer(srv.Service.AccessToken()),
		withBearer(srv.Service.LimitedToken()), withHeader("Authorization", srv.Service.APIToken()),
	} {
		wantProblem(t, callAPI(t, srv, http.MethodGet, subsPath, opt), 401)
		wantProblem(t, callAPI(t, srv, http.MethodPost, subsPath, opt, withJSON(`{}`)), 401)
	}
	callAPI(t, srv, http.MethodGet, subsPath, withHeader("Authorization", "bearer "+srv.Service.APIToken())).want(t, 200)
	// The API token does not open reporting.
	wantV3Error(t, callAPI(t, srv, http.MethodGet, BasePath+"/objects", apiTok(srv)), 401, 1001)
}

func TestWebhookDeliveryPOST(t *testing.T) {
	srv := newTestServer(t)
	rc := newReceiver(t)
	sub := subscribe(t, srv, map[string]any{"name": "post", "url": rc.URL + "/hook", "method": "POST",
		"headers": []any{map[string]any{"name": "X-Api-Key", "value": "k1"}}, "types": []any{"COURSE_COMPLETED"}})
	before := srv.Service.Now()
	n := srv.Service.Advance(24 * time.Hour)
	if n == 0 {
		t.Fatal("a day of a 200-user tenant completed nothing")
	}
	waitDeliveries(t, srv)
	got := rc.deliveries()
	if len(got) != n {
		t.Fatalf("%d deliveries for %d events", len(got), n)
	}
	ids := map[string]bool{}
	for _, d := range got {
		verify(t, d, sub.SignatureKey)
		if d.method != http.MethodPost || d.header.Get("Content-Type") != "application/json" || d.header.Get("X-Api-Key") != "k1" {
			t.Fatalf("delivery %s %v", d.method, d.header)
		}
		var ev struct {
			Type        string `json:"type"`
			SpecVersion int    `json:"specversion"`
			ID          string `json:"id"`
			Time        string `json:"time"`
			Data        struct {
				UserID        int64    `json:"userId"`
				UserName      string   `json:"userName"`
				CourseID      int64    `json:"courseId"`
				CourseTitle   string   `json:"courseTitle"`
				CompletedDate string   `json:"completedDate"`
				Score         *float64 `json:"score"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, ev.Data.CompletedDate)
		if ev.Type != "COURSE_COMPLETED" || ev.SpecVersion != 1 || !uuid4RE.MatchString(ev.ID) || ids[ev.ID] ||
			err != nil || !at.After(before) || at.After(srv.Service.Now()) || ev.Time != ev.Data.CompletedDate ||
			ev.Data.UserID < 10001 || ev.Data.CourseID < 5001 || ev.Data.UserName == "" || ev.Data.CourseTitle == "" || ev.Data.Score == nil {
			t.Fatalf("event %s", d.body)
		}
		ids[ev.ID] = true
		if d.header.Get("X-Service-Event-Id") != ev.ID || d.header.Get("X-Service-Event-Type") != ev.Type {
			t.Fatalf("event headers %v", d.header)
		}
	}
	// The log has one entry per request, newest first, with request, response and time.
	count, logs := logsOf(t, srv, sub.ID)
	if count != n || len(logs) != n {
		t.Fatalf("%d log entries (%d listed) for %d deliveries", count, len(logs), n)
	}
	for _, e := range logs {
		if !ulidRE.MatchString(e.ID) || e.SubscriptionID != sub.ID || !ids[e.EventID] || e.Attempt != 1 ||
			e.Outcome != "delivered" || e.Response.Status != 200 || e.Response.Body != "status 200" ||
			e.Request.Method != "POST" || e.Request.URL != rc.URL+"/hook" || !strings.HasPrefix(e.Request.Body, `{"type":"COURSE_COMPLETED"`) ||
			e.DeliveredAt == "" || e.Error != "" {
			t.Fatalf("log entry %+v", e)
		}
		if !slices.ContainsFunc(e.Request.Headers, func(h header) bool { return h.Name == "X-Service-Signature-V1" }) {
			t.Fatalf("logged headers %v", e.Request.Headers)
		}
	}
	var s subscription
	callAPI(t, srv, http.MethodGet, subsPath+"/"+sub.ID, apiTok(srv)).want(t, 200).json(t, &s)
	if s.RequestCount != n {
		t.Fatalf("requestCount %d, want %d", s.RequestCount, n)
	}

	// Deleting the subscription removes its log.
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+sub.ID, apiTok(srv)).want(t, 204)
	wantProblem(t, callAPI(t, srv, http.MethodGet, subsPath+"/"+sub.ID+"/logs", apiTok(srv)), 404)
	srv.Service.live.mu.Lock()
	left := len(srv.Service.live.logs)
	srv.Service.live.mu.Unlock()
	if left != 0 {
		t.Fatal("the log outlived its subscription")
	}
}

func TestWebhookDeliveryGET(t *testing.T) {
	srv := newTestServer(t)
	rc := newReceiver(t, http.StatusNoContent)
	sub := subscribe(t, srv, map[string]any{"name": "get", "url": rc.URL + "/hook?src=fake", "method": "GET",
		"types": []any{"shared-space-created"}})
	callAPI(t, srv, http.MethodPost, V4Path+"/shares", withBearer(srv.Service.AccessToken()), withJSON(map[string]any{
		"title": "Deck", "assets": []any{map[string]any{"id": hexID(DefaultSeed, "asset", 4)}}, "origin": "picker"})).want(t, 201)
	waitDeliveries(t, srv)
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	d := got[0]
	verify(t, d, sub.SignatureKey)
	q, err := url.ParseQuery(d.rawQuery)
	if err != nil || d.method != http.MethodGet || len(d.body) != 0 || q.Get("src") != "fake" ||
		q.Get("type") != "shared-space-created" || q.Get("specversion") != "1" || !uuid4RE.MatchString(q.Get("id")) || q.Get("time") == "" {
		t.Fatalf("GET delivery %q", d.rawQuery)
	}
	var data struct {
		Share struct {
			ID     string `json:"id"`
			Title  string `json:"title"`
			Assets []ref  `json:"assets"`
		} `json:"share"`
		User struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(q.Get("data")), &data); err != nil || data.Share.Title != "Deck" ||
		!hex32RE.MatchString(data.Share.ID) || len(data.Share.Assets) != 1 || data.User.Name != "Ada Admin" {
		t.Fatalf("data %q", q.Get("data"))
	}
	_, logs := logsOf(t, srv, sub.ID)
	if len(logs) != 1 || logs[0].Outcome != "delivered" || logs[0].Response.Status != 204 || logs[0].Request.Body != d.rawQuery {
		t.Fatalf("logs %+v", logs)
	}
}

func TestWebhookRetries(t *testing.T) {
	delays := []time.Duration{30 * time.Millisecond, 60 * time.Millisecond, 90 * time.Millisecond}
	srv := newTestServer(t, WithDeliveryRetryDelays(delays...))
	share := func() {
		callAPI(t, srv, http.MethodPost, V4Path+"/shares", withBearer(srv.Service.AccessToken()), withJSON(map[string]any{
			"title": "t", "assets": []any{map[string]any{"id": hexID(DefaultSeed, "asset", 0)}}, "origin": "o"})).want(t, 201)
		waitDeliveries(t, srv)
	}
	hook := func(name string, rc *receiver) subscription {
		return subscribe(t, srv, map[string]any{"name": name, "url": rc.URL, "method": "POST", "types": []any{"shared-space-created"}})
	}
	outcomes := func(id string) []string {
		_, logs := logsOf(t, srv, id)
		var s []string
		for _, e := range slices.Backward(logs) { // oldest first
			s = append(s, strconv.Itoa(e.Attempt)+":"+strconv.Itoa(e.Response.Status)+":"+e.Outcome)
		}
		return s
	}

	// 5xx twice, then 200: three attempts, after the delays.
	flaky := newReceiver(t, 503, 502, 200)
	sub := hook("flaky", flaky)
	share()
	if got, want := outcomes(sub.ID), []string{"1:503:retrying", "2:502:retrying", "3:200:delivered"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	got := flaky.deliveries()
	for i := 1; i < len(got); i++ {
		if gap := got[i].at.Sub(got[i-1].at); gap < delays[i-1] {
			t.Errorf("retry %d after %v, want at least %v", i, gap, delays[i-1])
		}
		if got[i].header.Get("X-Service-Event-Id") != got[0].header.Get("X-Service-Event-Id") {
			t.Error("a retry carries another event id")
		}
	}
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+sub.ID, apiTok(srv)).want(t, 204)

	// Always 500: 1 attempt and 3 retries, the last one failed.
	broken := newReceiver(t, 500)
	sub = hook("broken", broken)
	share()
	if got, want := outcomes(sub.ID), []string{"1:500:retrying", "2:500:retrying", "3:500:retrying", "4:500:failed"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+sub.ID, apiTok(srv)).want(t, 204)

	// 4xx is not retried; nor is a redirect, which is not followed.
	gone := newReceiver(t, 410)
	sub = hook("gone", gone)
	target := newReceiver(t)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer redirect.Close()
	sub2 := subscribe(t, srv, map[string]any{"name": "redirect", "url": redirect.URL, "method": "POST", "types": []any{"shared-space-created"}})
	share()
	if got, want := outcomes(sub.ID), []string{"1:410:failed"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if got, want := outcomes(sub2.ID), []string{"1:302:failed"}; !slices.Equal(got, want) || len(target.deliveries()) != 0 {
		t.Fatalf("redirect outcomes %v, target got %d", got, len(target.deliveries()))
	}
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+sub.ID, apiTok(srv)).want(t, 204)
	callAPI(t, srv, http.MethodDelete, subsPath+"/"+sub2.ID, apiTok(srv)).want(t, 204)

	// A receiver that is not there: connection errors are retried and logged with status 0.
	dead := newReceiver(t)
	dead.Close()
	sub = hook("dead", dead)
	share()
	_, logs := logsOf(t, srv, sub.ID)
	if len(logs) != 4 || logs[0].Response.Status != 0 || logs[0].Error == "" || logs[0].Outcome != "failed" {
		t.Fatalf("logs %+v", logs)
	}
}

func TestWebhookCloseStopsDeliveries(t *testing.T) {
	srv := NewServer(WithDeliveryRetryDelays(time.Hour))
	rc := newReceiver(t, 500)
	subscribe(t, srv, map[string]any{"name": "x", "url": rc.URL, "method": "POST", "types": []any{"COURSE_COMPLETED"}})
	if srv.Service.Advance(48*time.Hour) == 0 {
		t.Fatal("no events")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rc.deliveries()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop deliveries waiting for a retry")
	}
	time.Sleep(50 * time.Millisecond) // requests cancelled by Close may still reach the receiver's handler
	n := len(rc.deliveries())
	if srv.Service.Advance(48*time.Hour) == 0 { // events still count, nothing is delivered
		t.Fatal("no events after Close")
	}
	time.Sleep(50 * time.Millisecond)
	if len(rc.deliveries()) != n {
		t.Fatal("delivered after Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Service.WaitDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
}

// FuzzSubscriptionBody: decoding a subscription body never panics, and a
// body it accepts on create has every required field, valid.
func FuzzSubscriptionBody(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"name":"n","url":"http://h/x","method":"get","types":["COURSE_COMPLETED"]}`,
		`{"name":"n","url":"http://h/x","method":"POST","headers":[{"name":"A","value":"b"}],"types":["content-viewed"]}`,
		`{"headers":[{"name":"X-Service-A"}],"types":[1]}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, partial bool) {
		sf, p := decodeSubscription(body, partial)
		if (sf == nil) == (p == nil) {
			t.Fatalf("fields %v, problem %v", sf, p)
		}
		if p != nil || partial {
			return
		}
		if sf.name == nil || sf.url == nil || sf.method == nil || len(sf.types) == 0 || sf.headers == nil ||
			(*sf.method != "GET" && *sf.method != "POST") {
			t.Fatalf("accepted %s", body)
		}
		for _, h := range sf.headers {
			if !validHeaderName(h.Name) || reservedHeader(h.Name) {
				t.Fatalf("accepted header %q", h.Name)
			}
		}
	})
}
