package servicetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Faults on demand: the ways a real service misbehaves, switched on by
// options. Every fault is off by default; with all of them off the fault
// layer passes requests straight to the interfaces, so answers are
// byte-identical to a fake built without fault options.
//
// Transport faults (rate limit, 5xx answers, latency, dropped connections,
// truncated bodies) are applied by a wrapper around the whole handler, to
// GET and HEAD requests whose path lies under a data prefix (the reporting
// base, /api/v3/, /v4/, /webhooks/v1/), never to other methods, the legacy
// session interface or /_admin/. The expiring access token applies to every
// method under the reporting, /api/v3/ and /v4/ prefixes. Page drift and
// schema drift change what the reporting interface answers.
//
// Random decisions are a pure function of (fault seed, fault kind, n),
// where n numbers the data requests in the order the fault layer sees them.
// A client that sends its requests one at a time therefore meets the same
// faults on every run, and switching one fault on does not move the
// others. docs/service-shapes.md ("Faults") records the exact shapes.

// Defaults of the fault options.
const (
	DefaultRateWindow      = time.Second // WithRateWindow
	DefaultPageDriftEvery  = 2           // WithPageDriftEvery: K
	DefaultPageDriftEvents = 4           // WithPageDriftEvents: M
)

// Codes of the v3 error bodies of injected faults (the fake's choice).
const (
	rateLimitCode   = 1429 // 429 RateLimitError
	serverErrorCode = 1500 // 500 InternalServerError
)

// Salts of the random streams of the faults, per kind.
const (
	saltFaultFail     = 0xfa11
	saltFaultDrop     = 0xd809
	saltFaultTruncate = 0x7c07
	saltCertificate   = 0xce47
)

// faultConfig is the part of config the fault options set.
type faultConfig struct {
	seed         int64
	seedSet      bool
	rateLimit    int
	rateWindow   time.Duration
	noRetryAfter bool
	failRate     float64
	latency      time.Duration
	dropRate     float64
	truncateRate float64
	pageDrift    bool
	driftEvery   int
	driftEvents  int
	driftSet     bool // driftEvents given
	schemaDrift  bool
	tokenTTL     time.Duration
	quota        int           // WithQuota (quota.go)
	quotaWindow  time.Duration // WithQuota
}

func clampRate(f float64) float64 {
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	return min(f, 1)
}

// WithFaultSeed sets the seed of every random fault decision (default: the
// tenant seed of WithSeed).
func WithFaultSeed(seed int64) Option {
	return func(c *config) { c.faults.seed, c.faults.seedSet = seed, true }
}

// WithRateLimit answers 429 to data requests beyond n in one rate window
// (WithRateWindow, default 1 s). The window is fixed: it opens with the
// first request after the previous one closed. The 429 carries
// Retry-After (whole seconds until the window closes, at least 1) unless
// WithNoRetryAfter is given. n ≤ 0 switches the limit off.
func WithRateLimit(n int) Option { return func(c *config) { c.faults.rateLimit = max(n, 0) } }

// WithRateWindow sets the length of the rate limit window (default 1 s).
// Values ≤ 0 mean the default.
func WithRateWindow(d time.Duration) Option { return func(c *config) { c.faults.rateWindow = d } }

// WithNoRetryAfter makes rate limit answers omit the Retry-After header, as
// services that document no header do. The body still carries meta.rateLimit.
func WithNoRetryAfter() Option { return func(c *config) { c.faults.noRetryAfter = true } }

// WithFailRate answers the fraction f (0..1) of data requests with a server
// error: 500 with a v3 error body, 502 with a proxy's HTML page, or 503 with
// a proxy's plain text, half of the 503s with Retry-After: 1.
func WithFailRate(f float64) Option { return func(c *config) { c.faults.failRate = clampRate(f) } }

// WithLatency delays every data request by d before it is handled. A request
// cancelled by its client while waiting is abandoned without an answer.
func WithLatency(d time.Duration) Option { return func(c *config) { c.faults.latency = max(d, 0) } }

// WithDropRate cuts the fraction f (0..1) of GET answers with a body
// mid-body: the status and headers (with the full Content-Length) and about
// half the body are sent, then the connection is closed.
func WithDropRate(f float64) Option { return func(c *config) { c.faults.dropRate = clampRate(f) } }

// WithTruncateRate truncates the body of the fraction f (0..1) of 200 GET
// answers at a random point, with a Content-Length that matches the
// truncated body: a clean response whose JSON is cut short.
func WithTruncateRate(f float64) Option {
	return func(c *config) { c.faults.truncateRate = clampRate(f) }
}

// WithPageDrift makes the reporting results drift between page requests:
// rows near the start of each result set are removed or appear while a
// client pages, on the schedule set by WithPageDriftEvery and
// WithPageDriftEvents (see docs/service-shapes.md, "Page drift").
func WithPageDrift(on bool) Option { return func(c *config) { c.faults.pageDrift = on } }

// WithPageDriftEvery sets K, the number of query requests per object
// between two drift events (default 2). Values < 1 mean the default.
func WithPageDriftEvery(k int) Option { return func(c *config) { c.faults.driftEvery = k } }

// WithPageDriftEvents sets M, the number of drift events per object
// (default 4); after the M-th the object's data stays put. 0 means no event
// ever happens (the result set is then the clean one).
func WithPageDriftEvents(n int) Option {
	return func(c *config) { c.faults.driftEvents, c.faults.driftSet = max(n, 0), true }
}

// WithSchemaDrift serves a drifted reporting schema: userCourseProgress
// gains the string field certificateId (last in describe order, set on
// completed rows) and course.durationMinutes changes type from int to float
// (values such as 45.5). Describe, results, projection, filters and sort all
// use the drifted schema. Service.SetSchemaDrift flips it at run time.
func WithSchemaDrift(on bool) Option { return func(c *config) { c.faults.schemaDrift = on } }

// WithTokenTTL makes the access token (WithAccessToken) expire d after the
// Service was created (New or NewServer). From then on every request under
// the reporting, /api/v3/ and /v4/ prefixes that carries it is answered 401
// with a body saying the token expired. d ≤ 0 means it never expires.
// It also sets the life of the access tokens the OAuth token endpoint
// issues (default one hour; see oauth.go), counted in real time plus the
// tenant clock's advances since each was issued.
func WithTokenTTL(d time.Duration) Option { return func(c *config) { c.faults.tokenTTL = max(d, 0) } }

// FaultStats counts the faults a Service has injected so far.
type FaultStats struct {
	Requests      int64 // data requests seen by the fault layer (GET and HEAD under a data prefix)
	Delayed       int64 // requests delayed by WithLatency
	RateLimited   int64 // 429 answers
	Failed500     int64 // 500 answers of WithFailRate
	Failed502     int64 // 502 answers of WithFailRate
	Failed503     int64 // 503 answers of WithFailRate
	Dropped       int64 // answers cut mid-body by closing the connection
	Truncated     int64 // 200 answers sent with a truncated body
	TokenExpired  int64 // 401 answers for the expired access token
	PageDrifts    int64 // page drift events that took effect, over all objects
	SchemaDrifted int64 // describe and results requests answered with the drifted schema
}

// Failed returns the number of 5xx answers injected by WithFailRate.
func (f FaultStats) Failed() int64 { return f.Failed500 + f.Failed502 + f.Failed503 }

// Total returns the number of faults injected, of every kind (delays and
// drift included).
func (f FaultStats) Total() int64 {
	return f.Delayed + f.RateLimited + f.Failed() + f.Dropped + f.Truncated + f.TokenExpired +
		f.PageDrifts + f.SchemaDrifted
}

// faultState is the fault layer of one Service.
type faultState struct {
	cfg   faultConfig
	seed  uint64
	start time.Time // the access token is issued then (WithTokenTTL)
	wrap  bool      // some transport fault is on

	seq atomic.Int64 // data requests numbered by the fault layer

	quota   quotaState   // WithQuota (quota.go)
	latency atomic.Int64 // WithLatency / SetLatency, nanoseconds

	rateMu    sync.Mutex
	winStart  time.Time
	winCount  int
	schema    atomic.Bool
	driftMu   sync.Mutex
	driftSeen map[string]int // query requests per object id, under page drift

	delayed, rateLimited, failed500, failed502, failed503       atomic.Int64
	dropped, truncated, tokenExpired, pageDrifts, schemaDrifted atomic.Int64
}

func newFaultState(cfg *config) *faultState {
	fc := cfg.faults
	if !fc.seedSet {
		fc.seed = cfg.seed
	}
	if fc.rateWindow <= 0 {
		fc.rateWindow = DefaultRateWindow
	}
	if fc.driftEvery < 1 {
		fc.driftEvery = DefaultPageDriftEvery
	}
	if !fc.driftSet {
		fc.driftEvents = DefaultPageDriftEvents
	}
	f := &faultState{cfg: fc, seed: uint64(fc.seed), start: time.Now(), driftSeen: map[string]int{}}
	f.wrap = fc.rateLimit > 0 || fc.failRate > 0 || fc.latency > 0 || fc.dropRate > 0 ||
		fc.truncateRate > 0 || fc.tokenTTL > 0 || fc.quota > 0
	f.schema.Store(fc.schemaDrift)
	f.latency.Store(int64(fc.latency))
	return f
}

// Faults returns the number of faults injected so far, per kind.
func (s *Service) Faults() FaultStats {
	f := s.faults
	return FaultStats{
		Requests:      f.seq.Load(),
		Delayed:       f.delayed.Load(),
		RateLimited:   f.rateLimited.Load(),
		Failed500:     f.failed500.Load(),
		Failed502:     f.failed502.Load(),
		Failed503:     f.failed503.Load(),
		Dropped:       f.dropped.Load(),
		Truncated:     f.truncated.Load(),
		TokenExpired:  f.tokenExpired.Load(),
		PageDrifts:    f.pageDrifts.Load(),
		SchemaDrifted: f.schemaDrifted.Load(),
	}
}

// Faults returns the number of faults the server's Service injected so far.
func (s *Server) Faults() FaultStats { return s.Service.Faults() }

// SetLatency changes the latency added to each data request (WithLatency)
// while the Service runs. It takes effect only when some fault option was
// given at construction (the fault layer is off otherwise).
func (s *Service) SetLatency(d time.Duration) { s.faults.latency.Store(int64(max(d, 0))) }

// SetSchemaDrift switches the drifted reporting schema (WithSchemaDrift) on
// or off while the Service runs, as a tenant whose schema changes between
// two syncs.
func (s *Service) SetSchemaDrift(on bool) { s.faults.schema.Store(on) }

// --- request classes ----------------------------------------------------------

// Data prefixes the transport faults apply to.
var faultPrefixes = []string{BasePath + "/", AssetsPath + "/", V4Path + "/", WebhooksPath + "/"}

// Prefixes whose requests carry the OAuth access token (WithTokenTTL).
var tokenPrefixes = []string{BasePath + "/", AssetsPath + "/", V4Path + "/"}

func underAny(path string, prefixes []string) bool {
	if path == BasePath {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// faultable reports whether transport faults apply to r.
func faultable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && underAny(r.URL.Path, faultPrefixes)
}

// bearerToken returns the token of a "Bearer <token>" Authorization header.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// draw returns the randomness of data request n for one fault kind.
func (f *faultState) draw(salt uint64, n int64) rnd { return newRnd(f.seed, salt, int(n)) }

// --- the wrapper ----------------------------------------------------------------

// serveFaults serves r with next, injecting the configured transport faults.
// The order is: latency, rate limit, expired token, server error, then the
// answer itself, possibly dropped or truncated.
func (s *Service) serveFaults(w http.ResponseWriter, r *http.Request, next http.Handler) {
	f := s.faults
	if !f.wrap {
		next.ServeHTTP(w, r)
		return
	}
	data := faultable(r)
	tokenScoped := f.cfg.tokenTTL > 0 && underAny(r.URL.Path, tokenPrefixes)
	if !data && !tokenScoped {
		next.ServeHTTP(w, r)
		return
	}
	var n int64
	if data {
		n = f.seq.Add(1)
		if d := time.Duration(f.latency.Load()); d > 0 {
			f.delayed.Add(1)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client is gone: nobody to answer
			}
		}
		if f.cfg.quota > 0 {
			if _, answered := f.takeQuota(w, r); answered {
				f.rateLimited.Add(1)
				return
			}
		}
		if f.cfg.rateLimit > 0 && f.rateLimited429(w, r) {
			return
		}
	}
	if tokenScoped && time.Since(f.start) >= f.cfg.tokenTTL && bearerToken(r) == s.cfg.accessToken {
		f.tokenExpired.Add(1)
		writeFaultError(w, r, http.StatusUnauthorized, codeUnauthorized, "AuthenticationError",
			"the access token has expired; obtain a new access token", nil)
		return
	}
	if !data {
		next.ServeHTTP(w, r)
		return
	}
	if f.cfg.failRate > 0 {
		if rd := f.draw(saltFaultFail, n); rd.float() < f.cfg.failRate {
			f.serverError(w, r, &rd)
			return
		}
	}
	if r.Method != http.MethodGet {
		next.ServeHTTP(w, r)
		return
	}
	dr, tr := f.draw(saltFaultDrop, n), f.draw(saltFaultTruncate, n)
	drop := f.cfg.dropRate > 0 && dr.float() < f.cfg.dropRate
	trunc := f.cfg.truncateRate > 0 && tr.float() < f.cfg.truncateRate
	if !drop && !trunc {
		next.ServeHTTP(w, r)
		return
	}
	rec := &recorder{h: http.Header{}}
	next.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	body := rec.body.Bytes()
	switch {
	case drop && len(body) > 0:
		f.dropped.Add(1)
		dropMidBody(w, rec, body)
	case trunc && rec.status == http.StatusOK && len(bytes.TrimRight(body, " \t\r\n")) >= 2:
		// Cut inside the value, never in trailing white space only, so the
		// JSON is always incomplete.
		f.truncated.Add(1)
		trimmed := bytes.TrimRight(body, " \t\r\n")
		rec.replay(w, body[:1+tr.intn(len(trimmed)-1)])
	default:
		rec.replay(w, body)
	}
}

// rateLimited429 counts r in the current window and answers 429 when the
// window is full. It reports whether it answered.
func (f *faultState) rateLimited429(w http.ResponseWriter, r *http.Request) bool {
	now := time.Now()
	f.rateMu.Lock()
	if f.winStart.IsZero() || now.Sub(f.winStart) >= f.cfg.rateWindow {
		f.winStart, f.winCount = now, 0
	}
	f.winCount++
	over := f.winCount > f.cfg.rateLimit
	reset := f.winStart.Add(f.cfg.rateWindow)
	f.rateMu.Unlock()
	if !over {
		return false
	}
	f.rateLimited.Add(1)
	wait := int64(math.Ceil(reset.Sub(now).Seconds()))
	wait = max(wait, 1)
	if !f.cfg.noRetryAfter {
		w.Header().Set("Retry-After", strconv.FormatInt(wait, 10))
	}
	resetUnix := reset.Unix()
	if reset.Nanosecond() > 0 {
		resetUnix++
	}
	meta := map[string]any{"rateLimit": map[string]any{"limit": f.cfg.rateLimit, "remaining": 0, "reset": resetUnix}}
	writeFaultError(w, r, http.StatusTooManyRequests, rateLimitCode, "RateLimitError",
		fmt.Sprintf("rate limit of %d requests per %s exceeded; retry after the window resets", f.cfg.rateLimit, f.cfg.rateWindow),
		meta)
	return true
}

// Bodies of the 502 and 503 answers, as the proxies in front of a service
// send them.
const (
	badGatewayBody = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
		"<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"
	unavailableBody = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
)

// serverError answers a 500 (40 %), 502 (30 %) or 503 (30 %, half of them
// with Retry-After: 1).
func (f *faultState) serverError(w http.ResponseWriter, r *http.Request, rd *rnd) {
	switch k := rd.intn(10); {
	case k < 4:
		f.failed500.Add(1)
		writeFaultError(w, r, http.StatusInternalServerError, serverErrorCode, "InternalServerError",
			"an unexpected error occurred; try again later", nil)
	case k < 7:
		f.failed502.Add(1)
		writePlain(w, r, http.StatusBadGateway, "text/html", badGatewayBody)
	default:
		f.failed503.Add(1)
		if rd.intn(2) == 0 {
			w.Header().Set("Retry-After", "1")
		}
		writePlain(w, r, http.StatusServiceUnavailable, "text/plain", unavailableBody)
	}
}

func writePlain(w http.ResponseWriter, r *http.Request, status int, contentType, body string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write([]byte(body))
	}
}

// writeFaultError answers an injected error in the shape of the interface
// the path belongs to: application/problem+json under /v4/ and
// /webhooks/v1/, the v3 error body elsewhere (with meta when given).
func writeFaultError(w http.ResponseWriter, r *http.Request, status, code int, name, message string, meta any) {
	var b []byte
	h := w.Header()
	if strings.HasPrefix(r.URL.Path, V4Path+"/") || strings.HasPrefix(r.URL.Path, WebhooksPath+"/") {
		slug := strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "-"))
		b, _ = json.Marshal(struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
			Status int    `json:"status"`
		}{"/errors/" + slug, http.StatusText(status), message, status})
		h.Set("Content-Type", "application/problem+json")
	} else {
		var body struct {
			Response struct {
				Code    int    `json:"code"`
				Name    string `json:"name"`
				Message string `json:"message"`
			} `json:"response"`
			Meta any `json:"meta,omitempty"`
		}
		body.Response.Code, body.Response.Name, body.Response.Message = code, name, message
		body.Meta = meta
		b, _ = json.Marshal(body) // cannot fail: strings, ints and maps of them
		h.Set("Content-Type", "application/json")
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="service", error="invalid_token", error_description="The access token expired"`)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// recorder buffers an answer so that it can be cut before it is sent.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.h }

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.body.Write(p)
}

func (rec *recorder) Flush() {}

// replay sends the recorded answer with body, and a Content-Length that
// matches it.
func (rec *recorder) replay(w http.ResponseWriter, body []byte) {
	h := w.Header()
	for k, v := range rec.h {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	w.Write(body)
}

// dropMidBody sends the recorded status and headers with the full
// Content-Length, about half of body, and closes the connection.
func dropMidBody(w http.ResponseWriter, rec *recorder, body []byte) {
	h := w.Header()
	for k, v := range rec.h {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	w.Write(body[:len(body)/2])
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err == nil {
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	// No hijacking (HTTP/2, or a wrapped writer): abort the answer, which
	// resets the stream or closes the connection.
	panic(http.ErrAbortHandler)
}

// --- page drift -------------------------------------------------------------------

// pageDrift counts a query request for obj and returns the positions of the
// clean result list (of total rows) that the request does not see, in
// ascending order, or nil when the request sees the clean list.
//
// Query request q (1-based, per object) sees the data after
// s = min((q-1)/K, M) events. Event e (1..M) concerns position e-1 of the
// result list: odd events delete that row, even events insert it (the row
// is hidden before its event). So before any event the rows at positions
// 1, 3, … (< M) are missing; after event e the row at position e-1 is
// missing when e is odd and present when e is even.
func (s *Service) pageDrift(obj *object, total int) []int {
	f := s.faults
	if !f.cfg.pageDrift {
		return nil
	}
	every, events := f.cfg.driftEvery, f.cfg.driftEvents
	f.driftMu.Lock()
	f.driftSeen[obj.id]++
	q := f.driftSeen[obj.id]
	f.driftMu.Unlock()
	state := min((q-1)/every, events)
	if q > 1 && (q-1)%every == 0 && (q-1)/every <= events {
		f.pageDrifts.Add(1) // this request is the first to see event (q-1)/K
	}
	var ex []int
	for e := 1; e <= events && e-1 < total; e++ {
		deleted := e%2 == 1 && e <= state
		hidden := e%2 == 0 && e > state
		if deleted || hidden {
			ex = append(ex, e-1)
		}
	}
	return ex
}

// appendDriftPage is appendPage over the clean result list (rows, total)
// with the positions ex left out.
func appendDriftPage(dst []byte, sn *snapshot, obj *object, q *query, rows []int32, total int, ex []int) []byte {
	vtotal := total - len(ex)
	pages := 0
	if vtotal > 0 {
		pages = (vtotal-1)/q.perPage + 1
	}
	dst = append(dst, `{"page":`...)
	dst = strconv.AppendInt(dst, q.page, 10)
	dst = append(dst, `,"resultsPerPage":`...)
	dst = strconv.AppendInt(dst, int64(q.perPage), 10)
	dst = append(dst, `,"totalResults":`...)
	dst = strconv.AppendInt(dst, int64(vtotal), 10)
	dst = append(dst, `,"totalPages":`...)
	dst = strconv.AppendInt(dst, int64(pages), 10)
	dst = append(dst, `,"results":[`...)
	if q.page <= int64(pages) {
		from := int(q.page-1) * q.perPage
		to := min(from+q.perPage, vtotal)
		vals := make([]value, len(obj.fields))
		for n := from; n < to; n++ {
			if n > from {
				dst = append(dst, ',')
			}
			i := n
			for _, x := range ex { // ex is ascending: skip the left-out positions
				if x <= i {
					i++
				}
			}
			if rows != nil {
				i = int(rows[i])
			}
			dst = appendRow(dst, sn, obj, q.fields, i, vals)
		}
	}
	return append(dst, ']', '}')
}

// --- schema drift -----------------------------------------------------------------

// driftedObjects are the report objects whose schema WithSchemaDrift changes.
var driftedObjects = map[string]*object{
	courseObject.id:   driftedCourseObject,
	progressObject.id: driftedProgressObject,
}

// driftedCourseObject is course with durationMinutes a float: odd courses
// last half a minute longer (45.5), even ones keep an integral value.
var driftedCourseObject = func() *object {
	o := courseObject
	j := o.index["durationMinutes"]
	fields := slices.Clone(o.fields)
	fields[j].typ = typeFloat
	return newObject(o.id, o.displayName, fields, o.count, func(sn *snapshot, i int, dst []value) {
		o.fill(sn, i, dst)
		dst[j] = vFloat(float64(dst[j].i) + 0.5*float64(i%2))
	})
}()

// driftedProgressObject is userCourseProgress with certificateId (string,
// last): "CERT-" and 10 hex digits on completed rows, null on the others.
var driftedProgressObject = func() *object {
	o := progressObject
	done := o.index["completedDate"]
	fields := append(slices.Clone(o.fields),
		field{id: "certificateId", displayName: "Certificate ID", typ: typeString})
	n := len(o.fields)
	return newObject(o.id, o.displayName, fields, o.count, func(sn *snapshot, i int, dst []value) {
		o.fill(sn, i, dst[:n])
		dst[n] = vNull
		if !dst[done].null {
			r := newRnd(sn.t.seed, saltCertificate, i)
			dst[n] = vStr(fmt.Sprintf("CERT-%010X", r.u64()>>24))
		}
	})
}()

// object returns the report object id as the tenant currently describes
// it: drifted under schema drift.
func (s *Service) object(id string) (*object, bool) {
	if s.faults.schema.Load() {
		if o, ok := driftedObjects[id]; ok {
			s.faults.schemaDrifted.Add(1)
			return o, true
		}
	}
	o, ok := objectsByID[id]
	if !ok && s.cfg.hostile {
		o, ok = hostileByID[id]
	}
	if !ok && s.cfg.wide && id == WideObjectID {
		o, ok = wideObject, true
	}
	return o, ok
}
