package servicetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The webhook subscription interface (section D), event emission and
// signed delivery.

// WebhooksPath is the path prefix of the webhook interface.
const WebhooksPath = "/webhooks/v1"

// Event types a subscription may select.
const (
	EventCourseCompleted      = "COURSE_COMPLETED"
	EventSharedSpaceCreated   = "shared-space-created"
	EventSharedSpaceUserAdded = "shared-space-user-added"
	EventContentShared        = "content-shared"
	EventContentViewed        = "content-viewed"
	EventContentReshared      = "content-reshared"
)

// EventTypes lists every event type the fake knows.
var EventTypes = []string{EventCourseCompleted, EventSharedSpaceCreated, EventSharedSpaceUserAdded,
	EventContentShared, EventContentViewed, EventContentReshared}

// Headers of a delivery.
const (
	SignatureHeader = "X-Service-Signature-V1"        // base64(HMAC-SHA256(signatureKey, raw + "." + timestamp))
	TimestampHeader = "X-Service-Signature-Timestamp" // Unix seconds
	EventIDHeader   = "X-Service-Event-Id"
	EventTypeHeader = "X-Service-Event-Type"
)

// DefaultRetryDelays are the waits before the retries of a delivery
// answered 5xx or not answered at all.
var DefaultRetryDelays = []time.Duration{3 * time.Second, 7500 * time.Millisecond, 14250 * time.Millisecond}

// Limits of the webhook interface.
const (
	MaxSubscriptionName = 100
	DeliveryTimeout     = 10 * time.Second
	maxLogEntries       = 10_000 // per subscription; the oldest go first
	maxLoggedBody       = 1 << 10
)

// WithAPIToken sets the developer API token of the webhook interface and
// the admin endpoint (default "demo-api-token").
func WithAPIToken(token string) Option { return func(c *config) { c.apiToken = token } }

// WithDeliveryRetryDelays sets the waits before each retry of a delivery;
// their number is the number of retries (default DefaultRetryDelays: 3 s,
// 7.5 s, 14.25 s). Tests shorten them.
func WithDeliveryRetryDelays(delays ...time.Duration) Option {
	return func(c *config) { c.retryDelays = slices.Clone(delays) }
}

// APIToken returns the developer API token.
func (s *Service) APIToken() string { return s.cfg.apiToken }

type header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// subscription is a webhook subscription as it is sent.
type subscription struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	URL          string   `json:"url"`
	Method       string   `json:"method"`
	Headers      []header `json:"headers"`
	Types        []string `json:"types"`
	CreatedAt    string   `json:"createdAt"`
	UpdatedAt    string   `json:"updatedAt"`
	RequestCount int      `json:"requestCount"`
	SignatureKey string   `json:"signatureKey,omitempty"` // in the create answer only

	key string
}

// logEntry is one delivery attempt.
type logEntry struct {
	ID             string      `json:"id"`
	SubscriptionID string      `json:"subscriptionId"`
	EventID        string      `json:"eventId"`
	EventType      string      `json:"eventType"`
	Attempt        int         `json:"attempt"`
	Request        logRequest  `json:"request"`
	Response       logResponse `json:"response"`
	Error          string      `json:"error"`
	DeliveredAt    string      `json:"deliveredAt"`
	DurationMs     int64       `json:"durationMs"`
	Outcome        string      `json:"outcome"`
}

type logRequest struct {
	Method  string   `json:"method"`
	URL     string   `json:"url"`
	Headers []header `json:"headers"`
	Body    string   `json:"body"`
}

type logResponse struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// Outcomes of a delivery attempt.
const (
	outcomeDelivered = "delivered"
	outcomeFailed    = "failed"
	outcomeRetrying  = "retrying"
)

// event is the body of a delivery.
type event struct {
	Type        string `json:"type"`
	SpecVersion int    `json:"specversion"`
	ID          string `json:"id"`
	Time        string `json:"time"`
	Data        any    `json:"data"`
}

// --- routing -----------------------------------------------------------------

func (s *Service) serveWebhooks(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, WebhooksPath)
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	var allow, id string
	logs := false
	switch {
	case len(parts) == 1 && parts[0] == "subscriptions":
		allow = "GET, HEAD, POST"
	case len(parts) == 2 && parts[0] == "subscriptions" && parts[1] != "":
		allow, id = "GET, HEAD, POST, DELETE", parts[1]
	case len(parts) == 3 && parts[0] == "subscriptions" && parts[1] != "" && parts[2] == "logs":
		allow, id, logs = "GET, HEAD", parts[1], true
	default:
		writeProblem(w, r, newProblem(http.StatusNotFound, "no resource at path %q", r.URL.Path))
		return
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		writeProblem(w, r, methodProblem(r.Method, allow))
		return
	}
	if p := s.authorizeAPI(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	switch {
	case id == "" && r.Method == http.MethodPost:
		s.createSubscription(w, r)
	case id == "":
		s.listSubscriptions(w, r)
	case logs:
		s.listLogs(w, r, id)
	case r.Method == http.MethodPost:
		s.updateSubscription(w, r, id)
	case r.Method == http.MethodDelete:
		s.deleteSubscription(w, r, id)
	default:
		s.getSubscription(w, r, id)
	}
}

// authorizeAPI checks the developer API token of a webhook or admin
// request. Any other token, the OAuth access token included, is a 401.
func (s *Service) authorizeAPI(r *http.Request) *problem {
	tok, ok := bearer(r)
	var p *problem
	switch {
	case !ok:
		p = newProblem(http.StatusUnauthorized, "missing or malformed Authorization header; expected \"Bearer <API token>\"")
	case tok != s.cfg.apiToken:
		p = newProblem(http.StatusUnauthorized, "the developer API token is invalid")
	default:
		return nil
	}
	p.realm = "webhooks"
	return p
}

// --- subscriptions ---------------------------------------------------------

// subscriptionFields holds the fields of a create or update body; nil
// members were not given.
type subscriptionFields struct {
	name, url, method *string
	headers           []header
	hasHeaders        bool
	types             []string
}

func reservedHeader(name string) bool {
	n := strings.ToLower(name)
	return n == "content-type" || n == "content-length" || n == "host" || n == "user-agent" ||
		n == "transfer-encoding" || n == "connection" || strings.HasPrefix(n, "x-service-")
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// decodeSubscription validates a body; on update (partial) no field is
// required.
func decodeSubscription(body []byte, partial bool) (*subscriptionFields, *problem) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, newProblem(http.StatusBadRequest, "the body must be a JSON object")
	}
	var meta []problemMeta
	fail := func(name, category, format string, args ...any) {
		meta = append(meta, problemMeta{Name: name, Reason: fmt.Sprintf(format, args...), Category: category})
	}
	present := func(k string) bool { v, ok := raw[k]; return ok && string(v) != "null" }
	text := func(k string) *string {
		if !present(k) {
			if !partial {
				fail(k, catRequired, "%s is required", k)
			}
			return nil
		}
		var v string
		if json.Unmarshal(raw[k], &v) != nil {
			fail(k, catType, "%s must be a string", k)
			return nil
		}
		if strings.TrimSpace(v) == "" {
			fail(k, catRequired, "%s is required and must not be blank", k)
			return nil
		}
		return &v
	}
	f := &subscriptionFields{}
	if f.name = text("name"); f.name != nil && utf8.RuneCountInString(*f.name) > MaxSubscriptionName {
		fail("name", catLength, "name is longer than %d characters", MaxSubscriptionName)
	}
	if f.url = text("url"); f.url != nil {
		u, err := url.Parse(*f.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			fail("url", catFormat, "url must be an absolute http or https URL without credentials, got %q", *f.url)
		}
	}
	if f.method = text("method"); f.method != nil {
		m := strings.ToUpper(*f.method)
		if m != http.MethodGet && m != http.MethodPost {
			fail("method", catValue, "method must be GET or POST, got %q", *f.method)
		}
		f.method = &m
	}
	if present("headers") {
		f.hasHeaders = true
		if json.Unmarshal(raw["headers"], &f.headers) != nil {
			fail("headers", catType, "headers must be a list of {\"name\": string, \"value\": string}")
		}
		for i, h := range f.headers {
			n := "headers[" + strconv.Itoa(i) + "].name"
			switch {
			case !validHeaderName(h.Name):
				fail(n, catFormat, "%q is not a valid header name", h.Name)
			case reservedHeader(h.Name):
				fail(n, catValue, "header %q is set by the service and cannot be overridden", h.Name)
			case strings.ContainsAny(h.Value, "\r\n"):
				fail("headers["+strconv.Itoa(i)+"].value", catFormat, "header values cannot contain line breaks")
			}
		}
	} else if !partial {
		f.hasHeaders = true
	}
	if f.headers == nil && f.hasHeaders {
		f.headers = []header{}
	}
	switch {
	case !present("types"):
		if !partial {
			fail("types", catRequired, "types is required")
		}
	case json.Unmarshal(raw["types"], &f.types) != nil:
		fail("types", catType, "types must be a list of strings")
	case len(f.types) == 0:
		fail("types", catLength, "types must name at least one event type")
	default:
		for i, t := range f.types {
			n := "types[" + strconv.Itoa(i) + "]"
			if !slices.Contains(EventTypes, t) {
				fail(n, catValue, "unknown event type %q (known: %s)", t, strings.Join(EventTypes, ", "))
			} else if slices.Index(f.types, t) != i {
				fail(n, catDuplicate, "event type %q is listed twice", t)
			}
		}
	}
	if meta != nil {
		return nil, validationProblem(meta)
	}
	return f, nil
}

func readBody(r *http.Request) ([]byte, *problem) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyLen+1))
	if err != nil || len(b) > maxBodyLen {
		return nil, newProblem(http.StatusBadRequest, "cannot read the body (at most %d bytes)", maxBodyLen)
	}
	return b, nil
}

// nameTaken reports whether another subscription than id has name; l.mu
// is held.
func (l *live) nameTaken(name, id string) bool {
	for _, sub := range l.subs {
		if sub.Name == name && sub.ID != id {
			return true
		}
	}
	return false
}

func (s *Service) createSubscription(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(r)
	if p == nil {
		var f *subscriptionFields
		if f, p = decodeSubscription(body, false); p == nil {
			l := s.live
			now := s.Now()
			key := make([]byte, 32)
			l.randomBytes(key)
			sub := &subscription{
				ID: l.ulid(now), Name: *f.name, URL: *f.url, Method: *f.method, Headers: f.headers,
				Types: f.types, CreatedAt: isoSeconds(now), UpdatedAt: isoSeconds(now),
				key: base64.StdEncoding.EncodeToString(key),
			}
			l.mu.Lock()
			if l.nameTaken(sub.Name, "") {
				l.mu.Unlock()
				writeProblem(w, r, newProblem(http.StatusConflict, "a subscription named %q already exists", sub.Name))
				return
			}
			l.subs[sub.ID] = sub
			l.subOrder = append(l.subOrder, sub.ID)
			view := *sub
			l.mu.Unlock()
			view.SignatureKey = sub.key
			w.Header().Set("Location", WebhooksPath+"/subscriptions/"+sub.ID)
			writeJSONStatus(w, r, http.StatusCreated, view)
			return
		}
	}
	writeProblem(w, r, p)
}

func (s *Service) updateSubscription(w http.ResponseWriter, r *http.Request, id string) {
	l := s.live
	l.mu.Lock()
	_, ok := l.subs[id]
	l.mu.Unlock()
	if !ok {
		writeProblem(w, r, newProblem(http.StatusNotFound, "unknown subscription %q", id))
		return
	}
	body, p := readBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	f, p := decodeSubscription(body, true)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	l.mu.Lock()
	sub, ok := l.subs[id]
	switch {
	case !ok:
		p = newProblem(http.StatusNotFound, "unknown subscription %q", id)
	case f.name != nil && l.nameTaken(*f.name, id):
		p = newProblem(http.StatusConflict, "a subscription named %q already exists", *f.name)
	default:
		next := *sub // subscriptions are replaced, never mutated: deliveries hold copies
		if f.name != nil {
			next.Name = *f.name
		}
		if f.url != nil {
			next.URL = *f.url
		}
		if f.method != nil {
			next.Method = *f.method
		}
		if f.hasHeaders {
			next.Headers = f.headers
		}
		if f.types != nil {
			next.Types = f.types
		}
		next.UpdatedAt = isoSeconds(s.Now())
		l.subs[id] = &next
		sub = &next
	}
	var view subscription
	if p == nil {
		view = *sub
	}
	l.mu.Unlock()
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	writeJSONStatus(w, r, http.StatusOK, view)
}

func (s *Service) deleteSubscription(w http.ResponseWriter, r *http.Request, id string) {
	l := s.live
	l.mu.Lock()
	_, ok := l.subs[id]
	if ok {
		delete(l.subs, id)
		delete(l.logs, id)
		l.subOrder = slices.DeleteFunc(l.subOrder, func(x string) bool { return x == id })
	}
	l.mu.Unlock()
	if !ok {
		writeProblem(w, r, newProblem(http.StatusNotFound, "unknown subscription %q", id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) getSubscription(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := singleQuery(r); err != nil {
		writeProblem(w, r, newProblem(http.StatusBadRequest, "%v", err))
		return
	}
	l := s.live
	l.mu.Lock()
	sub, ok := l.subs[id]
	var view subscription
	if ok {
		view = *sub
	}
	l.mu.Unlock()
	if !ok {
		writeProblem(w, r, newProblem(http.StatusNotFound, "unknown subscription %q", id))
		return
	}
	writeJSONStatus(w, r, http.StatusOK, view)
}

// pageQuery parses limit and offset, the only parameters of the webhook
// lists.
func pageQuery(r *http.Request) (limit, offset int, p *problem) {
	get, err := singleQuery(r, "limit", "offset")
	if err != nil {
		return 0, 0, newProblem(http.StatusBadRequest, "%v", err)
	}
	limit, offset, name, err := pageParams(get)
	if err != nil {
		p = newProblem(http.StatusBadRequest, "%v", err)
		p.Meta = []problemMeta{{Name: name, Reason: err.Error(), Category: catValue}}
	}
	return limit, offset, p
}

func (s *Service) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	limit, offset, p := pageQuery(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	l := s.live
	l.mu.Lock()
	lo, hi := window(len(l.subOrder), limit, offset)
	items := make([]subscription, 0, hi-lo)
	for _, id := range l.subOrder[lo:hi] {
		items = append(items, *l.subs[id])
	}
	n := len(l.subOrder)
	l.mu.Unlock()
	writeJSONStatus(w, r, http.StatusOK, struct {
		Count int            `json:"count"`
		Items []subscription `json:"items"`
	}{n, items})
}

func (s *Service) listLogs(w http.ResponseWriter, r *http.Request, id string) {
	limit, offset, p := pageQuery(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	l := s.live
	l.mu.Lock()
	_, ok := l.subs[id]
	all := l.logs[id]
	lo, hi := window(len(all), limit, offset)
	items := make([]logEntry, 0, hi-lo)
	for i := lo; i < hi; i++ { // newest first
		items = append(items, *all[len(all)-1-i])
	}
	l.mu.Unlock()
	if !ok {
		writeProblem(w, r, newProblem(http.StatusNotFound, "unknown subscription %q", id))
		return
	}
	writeJSONStatus(w, r, http.StatusOK, struct {
		Count int        `json:"count"`
		Items []logEntry `json:"items"`
	}{len(all), items})
}

// --- emission and delivery ------------------------------------------------------

// emit sends an event of type typ that happened at the tenant instant at
// to every subscription selecting typ, in the background. It returns the
// number of deliveries queued.
func (s *Service) emit(typ string, at time.Time, data any) int {
	l := s.live
	l.mu.Lock()
	var subs []subscription
	for _, id := range l.subOrder {
		if sub := l.subs[id]; slices.Contains(sub.Types, typ) {
			subs = append(subs, *sub)
		}
	}
	l.mu.Unlock()
	if len(subs) == 0 {
		return 0
	}
	ev := event{Type: typ, SpecVersion: 1, ID: l.uuid4(), Time: isoSeconds(at), Data: data}
	n := 0
	for _, sub := range subs {
		if l.queue(sub, ev) {
			n++
		}
	}
	return n
}

// job is one delivery: an event for one subscription, at some attempt.
type job struct {
	sub     subscription
	ev      event
	attempt int
	target  string // the URL requested (with the event's query for GET)
	body    []byte // the POST body
	signed  []byte // what the signature covers: the body, or the raw query for GET
}

// maxWorkers bounds the delivery attempts running at once.
const maxWorkers = 8

// queue adds the delivery of ev to sub; it reports false once the Service
// is closed.
func (l *live) queue(sub subscription, ev event) bool {
	target, err := url.Parse(sub.URL)
	if err != nil {
		return false // validated on create; cannot happen
	}
	j := &job{sub: sub, ev: ev, attempt: 1}
	j.body, _ = json.Marshal(ev)
	j.signed = j.body
	if sub.Method == http.MethodGet {
		data, _ := json.Marshal(ev.Data)
		q := url.Values{"type": {ev.Type}, "specversion": {"1"}, "id": {ev.ID}, "time": {ev.Time},
			"data": {string(data)}}.Encode()
		if target.RawQuery != "" {
			q = target.RawQuery + "&" + q
		}
		target.RawQuery = q
		j.signed = []byte(q)
	}
	j.target = target.String()
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.closed {
		return false
	}
	l.pending++
	l.enqueueLocked(j)
	return true
}

// enqueueLocked appends j to the queue and starts a worker if there is
// room for one; l.dmu is held.
func (l *live) enqueueLocked(j *job) {
	l.jobs = append(l.jobs, j)
	if l.workers < maxWorkers {
		l.workers++
		l.wg.Add(1)
		go l.work()
	}
}

// work runs queued attempts until the queue is empty or the Service closed.
func (l *live) work() {
	defer l.wg.Done()
	for {
		l.dmu.Lock()
		if len(l.jobs) == 0 || l.closed {
			l.workers--
			l.dmu.Unlock()
			return
		}
		j := l.jobs[0]
		l.jobs[0] = nil
		l.jobs = l.jobs[1:]
		l.dmu.Unlock()
		l.run(j)
	}
}

// run makes one attempt of j, logs it, and schedules the retry if one is
// due.
func (l *live) run(j *job) {
	entry := l.attempt(j.sub, j.ev, j.attempt, j.target, j.body, j.signed)
	if l.ctx.Err() != nil {
		l.finished() // closed during the attempt
		return
	}
	delays := l.s.cfg.retryDelays
	st := entry.Response.Status
	switch {
	case st >= 200 && st < 300:
		entry.Outcome = outcomeDelivered
	case (st >= 500 || st == 0) && j.attempt <= len(delays):
		entry.Outcome = outcomeRetrying
	default:
		entry.Outcome = outcomeFailed
	}
	entry.Attempt = j.attempt
	if !l.record(j.sub.ID, entry) || entry.Outcome != outcomeRetrying {
		l.finished()
		return
	}
	delay := delays[j.attempt-1]
	j.attempt++
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.closed {
		l.finishedLocked()
		return
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		l.dmu.Lock()
		defer l.dmu.Unlock()
		if _, ok := l.timers[t]; !ok {
			return // stopped by Close, which accounted for it
		}
		delete(l.timers, t)
		if l.closed {
			l.finishedLocked()
			return
		}
		l.enqueueLocked(j)
	})
	l.timers[t] = struct{}{}
}

func (l *live) finished() {
	l.dmu.Lock()
	l.finishedLocked()
	l.dmu.Unlock()
}

func (l *live) finishedLocked() {
	l.pending--
	if l.pending == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
}

// stopDeliveries abandons queued deliveries and pending retries; Close
// calls it with the Service marked closed.
func (l *live) stopDeliveries() {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	for t := range l.timers {
		t.Stop()
		delete(l.timers, t)
		l.finishedLocked()
	}
	for range l.jobs {
		l.finishedLocked()
	}
	l.jobs = nil
}

// WaitDeliveries blocks until no delivery is queued, running or waiting
// for a retry, or until ctx is done (it then returns ctx.Err()).
func (s *Service) WaitDeliveries(ctx context.Context) error {
	l := s.live
	for {
		l.dmu.Lock()
		if l.pending == 0 {
			l.dmu.Unlock()
			return nil
		}
		if l.idle == nil {
			l.idle = make(chan struct{})
		}
		ch := l.idle
		l.dmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func newDeliveryClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // deliveries go straight to the subscription's URL
	return &http.Client{
		Transport: tr,
		Timeout:   DeliveryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer, not a new destination
		},
	}
}

// signDelivery returns base64(HMAC-SHA256(key, raw + "." + ts)).
func signDelivery(key string, raw []byte, ts int64) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(raw)
	m.Write([]byte("." + strconv.FormatInt(ts, 10)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// attempt makes one delivery request.
func (l *live) attempt(sub subscription, ev event, attempt int, target string, body, signed []byte) *logEntry {
	var rd io.Reader
	if sub.Method == http.MethodPost {
		rd = bytes.NewReader(body)
	}
	start := time.Now()
	e := &logEntry{ID: l.ulidOf(start, sub.ID, ev.ID, strconv.Itoa(attempt)), SubscriptionID: sub.ID, EventID: ev.ID, EventType: ev.Type,
		DeliveredAt: isoMillis(start)}
	req, err := http.NewRequestWithContext(l.ctx, sub.Method, target, rd)
	if err != nil {
		e.Error = err.Error()
		return e
	}
	for _, h := range sub.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	ts := start.Unix()
	if sub.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "servicetest-webhooks/1")
	req.Header.Set(SignatureHeader, signDelivery(sub.key, signed, ts))
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(EventIDHeader, ev.ID)
	req.Header.Set(EventTypeHeader, ev.Type)
	e.Request = logRequest{Method: sub.Method, URL: target, Body: string(signed)}
	names := make([]string, 0, len(req.Header))
	for k := range req.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range req.Header[k] {
			e.Request.Headers = append(e.Request.Headers, header{k, v})
		}
	}
	resp, err := l.client.Do(req)
	if err != nil {
		e.Error = err.Error()
		e.DurationMs = time.Since(start).Milliseconds()
		return e
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxLoggedBody))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	resp.Body.Close()
	e.Response = logResponse{Status: resp.StatusCode, Body: string(b)}
	e.DurationMs = time.Since(start).Milliseconds()
	return e
}

// record appends e to the log of subscription id; it reports false when
// the subscription no longer exists (its deliveries then stop).
func (l *live) record(id string, e *logEntry) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	sub, ok := l.subs[id]
	if !ok {
		return false
	}
	log := append(l.logs[id], e)
	if len(log) > maxLogEntries {
		log = slices.Delete(log, 0, len(log)-maxLogEntries)
	}
	l.logs[id] = log
	next := *sub
	next.RequestCount++
	l.subs[id] = &next
	return true
}
