package servicetest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// live is the mutable part of a Service: legacy sessions, one-time tokens
// and tickets, shares, webhook subscriptions and their logs, deliveries in
// flight and the deterministic id stream. Everything else is a pure
// function of the configuration and the clock.
type live struct {
	s *Service

	idMu sync.Mutex
	seq  uint64 // draws from the id stream so far

	mu          sync.Mutex
	nextSession int64
	sessions    map[int64]*session
	tokens      map[string]*oneTime // auto-login tokens, by token
	tickets     map[string]*oneTime // user tickets, by ticket key
	shares      map[string]*share
	shareCount  int
	subs        map[string]*subscription
	subOrder    []string               // subscription ids, oldest first
	logs        map[string][]*logEntry // per subscription, oldest first
	assets      assetStore

	advMu sync.Mutex // serialises Advance

	// Deliveries (webhooks.go).
	ctx     context.Context
	cancel  context.CancelFunc
	dmu     sync.Mutex
	closed  bool
	pending int                      // deliveries queued, running or waiting for a retry
	idle    chan struct{}            // closed when pending drops to 0
	jobs    []*job                   // attempts due now, oldest first
	workers int                      // goroutines running jobs, at most maxWorkers
	timers  map[*time.Timer]struct{} // retries waiting for their delay
	wg      sync.WaitGroup           // workers and the automatic clock
	client  *http.Client
}

func newLive(s *Service) *live {
	ctx, cancel := context.WithCancel(context.Background())
	return &live{
		s:           s,
		nextSession: 100001,
		sessions:    map[int64]*session{},
		tokens:      map[string]*oneTime{},
		tickets:     map[string]*oneTime{},
		shares:      map[string]*share{},
		subs:        map[string]*subscription{},
		logs:        map[string][]*logEntry{},
		ctx:         ctx,
		cancel:      cancel,
		timers:      map[*time.Timer]struct{}{},
		client:      newDeliveryClient(),
	}
}

// start starts the background work the configuration asks for.
func (l *live) start() {
	if l.s.cfg.autoEvery > 0 && l.s.cfg.autoBy > 0 {
		l.wg.Go(l.autoAdvance)
	}
}

// Close stops the background work of the Service: deliveries in flight and
// waiting for a retry are abandoned and the automatic clock stops. It
// blocks until every background goroutine has returned. A closed Service
// still answers requests but delivers no more webhooks. Server.Close calls
// it.
func (s *Service) Close() {
	l := s.live
	l.dmu.Lock()
	l.closed = true
	l.dmu.Unlock()
	l.cancel()
	l.stopDeliveries()
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// --- deterministic identifiers ---------------------------------------------

// next returns the next 64 bits of the Service's id stream: a splitmix64
// sequence seeded from the seed, so that the same requests in the same
// order give the same ids.
func (l *live) next() uint64 {
	l.idMu.Lock()
	l.seq++
	n := l.seq
	l.idMu.Unlock()
	return mix(uint64(l.s.cfg.seed) ^ mix(0x1d5e9^mix(n)))
}

// randomBytes fills b from the id stream.
func (l *live) randomBytes(b []byte) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.BigEndian.PutUint64(w[:], l.next())
		copy(b[i:], w[:])
	}
}

// hexID is a 32-hex-digit resource id derived from (seed, kind, index).
func hexID(seed int64, kind string, i int) string {
	a := mix(uint64(seed) ^ mix(fnv(kind)^mix(uint64(i))))
	b := mix(a ^ 0x5bd1e995)
	return fmt.Sprintf("%016x%016x", a, b)
}

// fnv is the 64-bit FNV-1a hash of s.
func fnv(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for j := 0; j < len(s); j++ {
		h ^= uint64(s[j])
		h *= 0x100000001b3
	}
	return h
}

// hex32 is a fresh 32-hex-digit string from the id stream (session keys,
// tokens, tickets, share ids).
func (l *live) hex32() string { return fmt.Sprintf("%016x%016x", l.next(), l.next()) }

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulid returns a ULID whose time part is t (milliseconds) and whose 80
// random bits come from the id stream.
func (l *live) ulid(t time.Time) string {
	var r [10]byte
	l.randomBytes(r[:])
	return makeULID(t, r)
}

// ulidOf returns a ULID whose time part is t and whose random bits are a
// hash of (seed, parts): deterministic whatever the order of the calls.
func (l *live) ulidOf(t time.Time, parts ...string) string {
	h := fnv(strings.Join(parts, "\x00"))
	a := mix(uint64(l.s.cfg.seed) ^ mix(h))
	b := mix(a ^ h)
	var r [10]byte
	binary.BigEndian.PutUint64(r[:8], a)
	binary.BigEndian.PutUint16(r[8:], uint16(b))
	return makeULID(t, r)
}

func makeULID(t time.Time, r [10]byte) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	copy(b[6:], r[:])
	// 128 bits as 26 base-32 digits, the first holding the top 3 bits.
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// uuid4 returns a version 4 UUID from the id stream.
func (l *live) uuid4() string {
	var b [16]byte
	l.randomBytes(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// --- times -----------------------------------------------------------------

func isoSeconds(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
func isoMillis(t time.Time) string  { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// --- problem+json errors (v4, webhooks, admin) ------------------------------

// problem is an error answer in the v4 style, application/problem+json.
type problem struct {
	Type   string        `json:"type"`
	Title  string        `json:"title"`
	Detail string        `json:"detail"`
	Status int           `json:"status"`
	Meta   []problemMeta `json:"meta,omitempty"`

	allow string // Allow header of a 405
	realm string // WWW-Authenticate realm of a 401
}

type problemMeta struct {
	Name     string `json:"name"`
	Reason   string `json:"reason"`
	Category string `json:"category"`
}

// Categories of problemMeta.
const (
	catRequired  = "propertyRequired"
	catType      = "propertyType"
	catLength    = "propertyLength"
	catFormat    = "propertyFormat"
	catValue     = "propertyValue"
	catReference = "propertyReference"
	catDuplicate = "propertyDuplicate"
)

var problemTitles = map[int]struct{ slug, title string }{
	http.StatusBadRequest:       {"bad-request", "Bad Request"},
	http.StatusUnauthorized:     {"unauthorized", "Unauthorized"},
	http.StatusForbidden:        {"forbidden", "Forbidden"},
	http.StatusNotFound:         {"not-found", "Not Found"},
	http.StatusMethodNotAllowed: {"method-not-allowed", "Method Not Allowed"},
	http.StatusConflict:         {"conflict", "Conflict"},
}

func newProblem(status int, format string, args ...any) *problem {
	t := problemTitles[status]
	return &problem{Type: "/errors/" + t.slug, Title: t.title, Status: status, Detail: fmt.Sprintf(format, args...)}
}

// validationProblem is the 400 answer listing every invalid property.
func validationProblem(meta []problemMeta) *problem {
	p := newProblem(http.StatusBadRequest, "the request body is invalid: %s", meta[0].Reason)
	if len(meta) > 1 {
		p.Detail += fmt.Sprintf(" (and %d more)", len(meta)-1)
	}
	p.Type, p.Title, p.Meta = "/errors/validation", "Validation Failed", meta
	return p
}

func methodProblem(method, allow string) *problem {
	p := newProblem(http.StatusMethodNotAllowed, "method %s is not allowed; allowed: %s", method, allow)
	p.allow = allow
	return p
}

// problemFrom converts a v3-style error (from authorize) to a problem.
func problemFrom(e *apiError) *problem {
	p := newProblem(e.status, "%s", e.message)
	if e.status == http.StatusMethodNotAllowed {
		p.allow = e.allow
	}
	return p
}

func writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	b, _ := json.Marshal(p) // strings and ints only
	h := w.Header()
	switch p.Status {
	case http.StatusUnauthorized:
		realm := p.realm
		if realm == "" {
			realm = "service"
		}
		h.Set("WWW-Authenticate", `Bearer realm="`+realm+`", error="invalid_token"`)
	case http.StatusMethodNotAllowed:
		h.Set("Allow", p.allow)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// writeJSONStatus answers v with status (HEAD: headers only).
func writeJSONStatus(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// --- paging (v3, v4 and webhook lists) --------------------------------------

// Paging limits of the collection endpoints.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// pageParams parses limit and offset; bad reports the parameter at fault.
func pageParams(get func(string) (string, bool)) (limit, offset int, bad string, err error) {
	limit = DefaultLimit
	if v, ok := get("limit"); ok {
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 || n > MaxLimit {
			return 0, 0, "limit", fmt.Errorf("limit must be an integer from 0 to %d, got %q", MaxLimit, v)
		}
		limit = n
	}
	if v, ok := get("offset"); ok {
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 {
			return 0, 0, "offset", fmt.Errorf("offset must be a non-negative integer, got %q", v)
		}
		offset = n
	}
	return limit, offset, "", nil
}

// window returns the [lo, hi) bounds of a page over n items.
func window(n, limit, offset int) (lo, hi int) {
	lo = min(offset, n)
	hi = min(lo+limit, n)
	return lo, hi
}

// singleQuery returns the query parameters of r as a lookup that reports a
// repeated parameter as an error, and checks that every parameter is one
// of allowed.
func singleQuery(r *http.Request, allowed ...string) (func(string) (string, bool), error) {
	q := r.URL.Query()
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown query parameter %q (allowed: %v)", k, allowed)
		}
		if len(vs) > 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", k, len(vs))
		}
	}
	return func(k string) (string, bool) {
		vs, ok := q[k]
		if !ok {
			return "", false
		}
		return vs[0], true
	}, nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// requestOrigin is the tenant's own origin as seen by r: the scheme and
// host the client used.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
