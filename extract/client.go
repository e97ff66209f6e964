package extract

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sepipe/sepipe/service"
)

// version is reported in the User-Agent; set it at build time with
// -ldflags "-X github.com/sepipe/sepipe/extract.version=1.2.3".
var version = "dev"

// reportingPath is the reporting base below the tenant URL.
const reportingPath = "/api/learn/reporting/v3/json"

// Defaults.
const (
	// DefaultRateLimit is the default ceiling on the request rate
	// (WithRateLimit): none. The rate adapts to the service's 429s,
	// starting at DefaultStartRate (budget.go).
	DefaultRateLimit = 0
	// DefaultBurst is the default burst of the rate limiter: automatic,
	// 25 ms of the current rate and at least 1.
	DefaultBurst       = 0
	DefaultConcurrency = 4
	DefaultPageSize    = 1000
	DefaultMaxAttempts = 6
	DefaultMaxWait     = 2 * time.Minute
	DefaultHealing     = 2
	defaultRecoverRun  = 10
	defaultBackoffBase = 250 * time.Millisecond
	defaultBackoffCap  = 30 * time.Second
	// DefaultTimeout bounds connecting, waiting for response headers and
	// a stall between body bytes of one attempt (WithTimeout).
	DefaultTimeout = 60 * time.Second
	// DefaultMaxResponseBytes bounds one response body
	// (WithMaxResponseBytes); a larger body is an error, not a truncation.
	DefaultMaxResponseBytes = 64 << 20
	// maxPooledBytes: larger buffers are dropped instead of pooled.
	maxPooledBytes = 16 << 20
)

// Source is what the rest of the pipeline needs from this stage. *Client
// implements it; tests of later stages can fake it. ReadObject blocks until
// every page has been handed to fn, or the read failed or was cancelled.
type Source interface {
	Objects(ctx context.Context) ([]Object, error)
	Describe(ctx context.Context, objectID string) ([]service.Field, error)
	ReadObject(ctx context.Context, objectID string, q Query, fn PageFunc) (ReadStats, error)
	ReadList(ctx context.Context, l List, q CollectionQuery, fn PageFunc) (ReadStats, error)
	// CanRead reports whether the source holds the credential the
	// interface (IfaceReporting, IfaceV3, ...) needs.
	CanRead(iface string) bool
}

var _ Source = (*Client)(nil)

// Client reads the Coach reporting interface of one tenant. It is safe for
// concurrent use; all its requests share one rate limiter.
type Client struct {
	base      *url.URL // tenant URL
	reporting *url.URL // base + reportingPath
	legacy    *url.URL // legacy host (default: the tenant URL)
	v4        *url.URL // v4 base (default: tenant + /v4)
	webhooks  *url.URL // webhook base (default: tenant + /webhooks/v1)
	token     secret   // reporting, v3 and v4 access token (see tokenMu)
	apiToken  secret   // developer API token (webhooks)
	hc        *http.Client
	observer  RequestObserver // told of every request sent; nil: none
	rate      rateConfig      // WithRateLimit, WithoutRateLimit
	budget    *budget
	log       *slog.Logger

	// tokens, when set, gives the access token of each request (WithOAuth,
	// WithTokenSource); token is then unused. tokenMu guards seen.
	tokens  AccessTokenSource
	tokenMu sync.Mutex
	seen    []secret // every credential value the client ever held, scrubbed from errors

	baseOpts [3]string // legacy, v4, webhooks URLs given by options

	timeout     time.Duration // WithTimeout
	maxBody     int64         // WithMaxResponseBytes
	maxPages    int           // WithMaxPages
	inFlight    int64         // WithMaxBytesInFlight
	bodies      *semaphore.Weighted
	heldMu      sync.Mutex
	held        map[*bytes.Buffer]int64 // bytes of the budget each buffer holds
	concurrency int
	maxInFlight int                      // 0: concurrency
	recoverRun  int                      // successes before the adaptive limit grows by one
	heal        int                      // re-reads of an object after an integrity failure
	spillFile   func() (*os.File, error) // WithSpillFiles
	keyMem      int                      // keys a read keeps in memory before they spill (keySet)
	pageSize    int
	pageCap     atomic.Int64 // the page size the service took after refusing a larger one (0: none refused)
	maxAttempts int
	maxWait     time.Duration
	backoffBase time.Duration
	backoffCap  time.Duration

	// Test seams: the clock used for Retry-After dates and the sleep between
	// attempts.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	bufs sync.Pool // *bytes.Buffer

	optErrs []error
}

// Option configures a Client.
type Option func(*Client)

// WithAccessToken sets the OAuth 2.0 bearer token sent on every
// reporting, v3 and v4 request.
func WithAccessToken(tok string) Option {
	return func(c *Client) { c.token = secret(tok) }
}

// WithTokenSource sets where a fresh OAuth 2.0 access token comes from
// (access tokens live about an hour). It is asked for the first token when
// WithAccessToken is not given, and again when the service answers 401 to
// a request that carried the access token: the client then retries that
// request once with the new token. Concurrent 401s for the same token ask
// the source once. The source is called with the request's context and
// must be safe for concurrent use. WithOAuth is the source that refreshes
// before the token expires, too.
func WithTokenSource(src func(ctx context.Context) (string, error)) Option {
	return func(c *Client) {
		if src == nil {
			c.optErrs = append(c.optErrs, errors.New("WithTokenSource: nil source"))
			return
		}
		fs := &funcSource{fn: src, cur: string(c.token)}
		c.tokens = fs
	}
}

// WithOAuth sets the source of the access token of every reporting, v3
// and v4 request: the client asks it before each request (it refreshes
// before the token expires) and, on a 401, asks it once for a replacement
// and retries. *OAuth refreshes with the tenant's rotating refresh token.
func WithOAuth(src AccessTokenSource) Option {
	return func(c *Client) {
		if src == nil {
			c.optErrs = append(c.optErrs, errors.New("WithOAuth: nil source"))
			return
		}
		c.tokens = src
	}
}

// WithAPIToken sets the developer API token sent as a bearer token on
// every webhook subscription request.
func WithAPIToken(tok string) Option {
	return func(c *Client) { c.apiToken = secret(tok) }
}

// WithLegacyURL sets the host of the legacy session interface (requests go
// to it + /service/webservices_mobile). Default: the tenant URL.
func WithLegacyURL(u string) Option { return func(c *Client) { c.baseOpts[0] = u } }

// WithV4URL sets the v4 base of shares and themes. Default: the tenant URL
// + /v4.
func WithV4URL(u string) Option { return func(c *Client) { c.baseOpts[1] = u } }

// WithWebhookURL sets the webhook base. Default: the tenant URL +
// /webhooks/v1.
func WithWebhookURL(u string) Option { return func(c *Client) { c.baseOpts[2] = u } }

// WithMaxInFlight sets the most requests of the client, of every kind, in
// flight at once. The client starts there, halves the limit on every 429
// (once per round of requests) and grows it by one after recoverAfter
// successes in a row, never above n nor below 1. Default: the
// WithConcurrency value, recovering after 10 successes.
func WithMaxInFlight(n, recoverAfter int) Option {
	return func(c *Client) {
		if n < 1 || recoverAfter < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithMaxInFlight(%d, %d): want at least 1", n, recoverAfter))
			return
		}
		c.maxInFlight, c.recoverRun = n, recoverAfter
	}
}

// WithHealing sets how many times a read (ReadObject, ReadList and
// the list calls) starts over from the beginning after its pages did not
// add up (the data changed while paging) before it gives up with an
// *IntegrityError. 0 turns healing off. Default 2.
func WithHealing(n int) Option {
	return func(c *Client) {
		if n < 0 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithHealing(%d): want at least 0", n))
			return
		}
		c.heal = n
	}
}

// WithHTTPClient sets the HTTP client (its transport). The client keeps
// its own rules on top: the stall timeout (WithTimeout) and no redirect to
// another origin.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc == nil {
			c.optErrs = append(c.optErrs, errors.New("WithHTTPClient: nil client"))
			return
		}
		c.hc = hc
	}
}

// WithTimeout bounds one attempt's waits: connecting, the response
// headers, and any stall between body bytes (a large body that keeps
// arriving is not cut). With WithRetry's attempts and total wait it bounds
// how long a stream waits on a server that never answers. Default 60 s.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d <= 0 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithTimeout(%s): want more than 0", d))
			return
		}
		c.timeout = d
	}
}

// WithMaxPages bounds one read (of a report object or a list) to n pages
// (default DefaultMaxPages): a first page announcing more, or pages that
// announce no totals and are still full after n, end the read with
// ErrEndlessPages.
func WithMaxPages(n int) Option {
	return func(c *Client) {
		if n < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithMaxPages(%d): want at least 1", n))
			return
		}
		c.maxPages = n
	}
}

// WithMaxResponseBytes bounds one response body: a larger one fails its
// request (ErrResponseTooLarge, not retried) instead of being held in
// memory. Default 64 MiB.
func WithMaxResponseBytes(n int64) Option {
	return func(c *Client) {
		if n < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithMaxResponseBytes(%d): want at least 1", n))
			return
		}
		c.maxBody = n
	}
}

// DefaultBytesInFlightFactor: by default the bytes of response bodies the
// client holds at once are at most this many times the response limit
// (WithMaxBytesInFlight).
const DefaultBytesInFlightFactor = 4

// WithMaxBytesInFlight bounds the bytes of response bodies the client
// holds at once, over all workers and streams: a request whose body would
// pass it waits until others are processed (a body counts from its
// headers, by its Content-Length or, when unknown, the response limit,
// until its page has been handed on). So peak memory has a ceiling
// whatever the service sends. Default 4 × WithMaxResponseBytes.
func WithMaxBytesInFlight(n int64) Option {
	return func(c *Client) {
		if n < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithMaxBytesInFlight(%d): want at least 1", n))
			return
		}
		c.inFlight = n
	}
}

// holdBody takes n bytes of the in-flight budget for buf (what buf held
// before is given back first), waiting while other bodies hold it.
func (c *Client) holdBody(ctx context.Context, buf *bytes.Buffer, n int64) error {
	c.releaseBody(buf)
	n = min(max(n, 1), c.inFlight)
	if err := c.bodies.Acquire(ctx, n); err != nil {
		return err
	}
	c.heldMu.Lock()
	c.held[buf] = n
	c.heldMu.Unlock()
	return nil
}

// releaseBody gives back what buf holds of the in-flight budget.
func (c *Client) releaseBody(buf *bytes.Buffer) {
	c.heldMu.Lock()
	n, ok := c.held[buf]
	delete(c.held, buf)
	c.heldMu.Unlock()
	if ok {
		c.bodies.Release(n)
	}
}

// ErrCrossOriginRedirect: the service redirected a request to another
// origin (scheme, host or port). The client does not follow it, so no
// credential leaves for a server that was not configured.
var ErrCrossOriginRedirect = errors.New("extract: redirect to another origin refused")

// sameOriginOnly is the clients' redirect rule: follow a redirect (at most
// 10) only within the origin of the first request, credentials included.
func sameOriginOnly(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errTooManyRedirects
	}
	first := via[0].URL
	if !strings.EqualFold(req.URL.Scheme, first.Scheme) || !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("%w: %s to %s", ErrCrossOriginRedirect, service.RedactURL(first), service.RedactURL(req.URL))
	}
	return nil
}

// NewHTTPClient is the clients' HTTP client: connect and TLS bounded by
// the timeout, same-origin redirects only. The Client bounds the rest of
// an attempt with its stall timer; other users (the OAuth token endpoint)
// should set a Timeout too.
func NewHTTPClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = timeout
	return &http.Client{Transport: tr, CheckRedirect: sameOriginOnly}
}

// WithRateLimit sets a ceiling on the client's one request rate, shared
// by every request of the client, retries included: rps requests per
// second, with bursts of burst. The rate itself adapts below the ceiling:
// it starts at DefaultStartRate, grows while the service answers, and
// drops on a 429 to just under the rate the service allowed (budget.go).
// rps <= 0 means no ceiling (the default); +Inf is WithoutRateLimit.
// burst < 1 means automatic: 25 ms of the current rate, at least 1.
func WithRateLimit(rps float64, burst int) Option {
	return func(c *Client) {
		if math.IsNaN(rps) {
			c.optErrs = append(c.optErrs, errors.New("WithRateLimit(NaN): want a number of requests per second"))
			return
		}
		if math.IsInf(rps, 1) {
			c.rate = rateConfig{off: true}
			return
		}
		c.rate = rateConfig{ceiling: max(rps, 0), burst: max(burst, 0)}
	}
}

// WithoutRateLimit switches the rate limiter off: no rate and no
// adaptation, only the limit of requests in flight. For a service that
// never throttles, such as a fake on loopback in tests and benchmarks.
func WithoutRateLimit() Option {
	return func(c *Client) { c.rate = rateConfig{off: true} }
}

// WithConcurrency sets the number of page-fetch workers per ReadObject,
// and, unless WithMaxInFlight says otherwise, the most requests of the
// client in flight at once. Default 4.
func WithConcurrency(n int) Option {
	return func(c *Client) {
		if n < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithConcurrency(%d): want at least 1", n))
			return
		}
		c.concurrency = n
	}
}

// WithPageSize sets the resultsPerPage ReadObject uses when the Query leaves
// it 0. Default 1000.
func WithPageSize(n int) Option {
	return func(c *Client) {
		if n < 1 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithPageSize(%d): want at least 1", n))
			return
		}
		c.pageSize = n
	}
}

// WithRetry bounds the attempts per request (1 means no retry) and the
// total time waited between them. Default 6 attempts, 2 minutes.
func WithRetry(maxAttempts int, maxWait time.Duration) Option {
	return func(c *Client) {
		if maxAttempts < 1 || maxWait < 0 {
			c.optErrs = append(c.optErrs, fmt.Errorf("WithRetry(%d, %s): want at least 1 attempt and a non-negative wait", maxAttempts, maxWait))
			return
		}
		c.maxAttempts, c.maxWait = maxAttempts, maxWait
	}
}

// RequestObserver is told of every request the client sends: its
// interface (IfaceReporting, IfaceV3, ...), the HTTP status of its answer
// (0 when none came: a connection cut, a timeout), whether it was a retry
// (another attempt of one request) and how long it took. Its method is
// called from many goroutines at once and must not block: sepipe's metrics
// count requests by it.
type RequestObserver interface {
	ObserveRequest(iface string, status int, retry bool, took time.Duration)
}

// WithRequestObserver has o told of every request the client sends.
func WithRequestObserver(o RequestObserver) Option { return func(c *Client) { c.observer = o } }

// WithLogger sets the logger; requests are logged at debug level and
// retries at warn level. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// WithSpillFiles sets how a long read creates the file where it keeps
// the row keys it checks for duplicates (see ReadObject) past the first
// few hundred thousand, about 12 bytes a key. create returns a new file,
// open for reading and writing, that nothing else uses and that goes
// away when closed (unlinked already, where the system allows); the read
// closes it when it ends. When no file can be made, the keys stay in
// memory and the read logs a warning. Default: a file in os.TempDir(),
// which may be memory on systems that mount /tmp as tmpfs; sepipe passes
// load.Lake.CreateScratch, a file in its output folder.
func WithSpillFiles(create func() (*os.File, error)) Option {
	return func(c *Client) {
		if create != nil {
			c.spillFile = create
		}
	}
}

// withKeyMemory sets how many keys a read keeps in memory before they
// spill (tests spill a few).
func withKeyMemory(n int) Option {
	return func(c *Client) { c.keyMem = n }
}

// withBackoff sets the exponential backoff base and cap (tests use
// milliseconds).
func withBackoff(base, cap time.Duration) Option {
	return func(c *Client) { c.backoffBase, c.backoffCap = base, cap }
}

// parseBase checks and normalises a base URL.
func parseBase(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("extract: %s URL: %w", what, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("extract: %s URL %q: want an absolute http or https URL", what, service.RedactURL(u))
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// New returns a client of the tenant at baseURL (e.g.
// https://acme.example.com): reporting requests go to baseURL +
// /api/learn/reporting/v3/json, v3 requests to baseURL + /api/v3, and,
// unless WithLegacyURL, WithV4URL or WithWebhookURL say otherwise, legacy
// requests to baseURL + /service/webservices_mobile, v4 requests to
// baseURL + /v4 and webhook requests to baseURL + /webhooks/v1.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := parseBase("base", baseURL)
	if err != nil {
		return nil, err
	}
	rep := *u
	rep.Path = u.Path + reportingPath

	c := &Client{
		base:        u,
		reporting:   &rep,
		timeout:     DefaultTimeout,
		maxBody:     DefaultMaxResponseBytes,
		maxPages:    DefaultMaxPages,
		held:        map[*bytes.Buffer]int64{},
		rate:        rateConfig{ceiling: DefaultRateLimit, burst: DefaultBurst},
		log:         slog.New(slog.DiscardHandler),
		concurrency: DefaultConcurrency,
		pageSize:    DefaultPageSize,
		maxAttempts: DefaultMaxAttempts,
		maxWait:     DefaultMaxWait,
		backoffBase: defaultBackoffBase,
		backoffCap:  defaultBackoffCap,
		heal:        DefaultHealing,
		recoverRun:  defaultRecoverRun,
		now:         time.Now,
		sleep:       sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	if c.inFlight == 0 {
		c.inFlight = DefaultBytesInFlightFactor * c.maxBody
	}
	c.bodies = semaphore.NewWeighted(c.inFlight)
	if c.hc == nil {
		c.hc = NewHTTPClient(c.timeout)
	} else {
		hc := *c.hc // a copy: the caller's client is not changed
		hc.CheckRedirect = sameOriginOnly
		c.hc = &hc
	}
	defaults := [3]string{u.String(), u.String() + "/v4", u.String() + "/webhooks/v1"}
	names := [3]string{"legacy", "v4", "webhook"}
	var bases [3]*url.URL
	for i := range bases {
		raw := c.baseOpts[i]
		if raw == "" {
			raw = defaults[i]
		}
		b, err := parseBase(names[i], raw)
		if err != nil {
			c.optErrs = append(c.optErrs, err)
		}
		bases[i] = b
	}
	c.legacy, c.v4, c.webhooks = bases[0], bases[1], bases[2]
	if len(c.optErrs) > 0 {
		return nil, fmt.Errorf("extract: options: %w", errors.Join(c.optErrs...))
	}
	if c.maxInFlight == 0 {
		c.maxInFlight = c.concurrency
	}
	c.budget = newRateBudget(c.maxInFlight, c.recoverRun, c.rate, c.now, func(ctx context.Context, d time.Duration) error {
		return c.sleep(ctx, d)
	})
	if fs, ok := c.tokens.(*funcSource); ok && fs.cur == "" {
		fs.cur = string(c.token) // WithAccessToken given after WithTokenSource
	}
	for _, s := range []secret{c.token, c.apiToken} {
		c.remember(string(s))
	}
	return c, nil
}

// under returns base followed by path segments, each escaped as one
// segment (an id cannot add path levels; "." and ".." are left as they
// are, so callers passing an id refuse those first with checkSegment). A
// segment may end in a literal suffix after a NUL byte (used for ".json").
func under(base *url.URL, segments ...string) *url.URL {
	u := *base
	raw := base.EscapedPath()
	for _, s := range segments {
		seg, suffix, _ := strings.Cut(s, "\x00")
		u.Path += "/" + seg + suffix
		raw += "/" + url.PathEscape(seg) + suffix
	}
	u.RawPath = raw
	return &u
}

// checkSegment refuses an id that cannot be one path segment of a request
// URL: empty, "." or "..". Escaping leaves those as they are, and a server
// or a proxy resolves them, so the request would address another level
// (and the id, later a file name, another folder). Ids come from the
// service and the user; every other character is escaped by under and
// endpoint. It is the one owner of that rule.
func checkSegment(seg string) error {
	if seg == "" || seg == "." || seg == ".." {
		return fmt.Errorf("bad path segment %q", seg)
	}
	return nil
}

// endpoint returns the reporting base followed by path segments, each
// escaped as one segment (an object id cannot add or climb path levels:
// "." and ".." are refused, checkSegment).
func (c *Client) endpoint(segments ...string) (*url.URL, error) {
	u := *c.reporting
	raw := c.reporting.EscapedPath()
	for _, s := range segments {
		if err := checkSegment(s); err != nil {
			return nil, err
		}
		u.Path += "/" + s
		raw += "/" + url.PathEscape(s)
	}
	u.RawPath = raw
	return &u, nil
}

// resolve turns a urls.describe/urls.object value into an absolute URL:
// absolute URLs stay, absolute paths are taken on the tenant host, other
// relative references are relative to the reporting base.
func (c *Client) resolve(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	if r.IsAbs() || strings.HasPrefix(ref, "/") {
		return c.base.ResolveReference(r).String(), nil
	}
	dir := *c.reporting
	dir.Path += "/"
	return dir.ResolveReference(r).String(), nil
}

func (c *Client) getBuf() *bytes.Buffer {
	if b, ok := c.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (c *Client) putBuf(b *bytes.Buffer) {
	c.releaseBody(b)
	if b.Cap() > maxPooledBytes {
		return
	}
	b.Reset()
	c.bufs.Put(b)
}

// Interfaces, as named in errors and logs.
const (
	IfaceReporting = "reporting"
	IfaceV3        = "v3"
	IfaceV4        = "v4"
	IfaceWebhooks  = "webhooks"
	IfaceLegacy    = "legacy"
)

// credKind says which credential a request carries.
type credKind int

const (
	credAccess credKind = iota // bearer OAuth access token (reporting, v3, v4)
	credAPI                    // bearer developer API token (webhooks)
	credNone                   // none in a header (legacy: in the query or body)
)

// reqInfo says what a request is about, for errors and logs, and how to
// send it.
type reqInfo struct {
	iface  string // IfaceXxx; "" means reporting
	op     string // objects, describe, query, create share, ...
	object string
	page   int
	params string // decoded `parameters` document, logged as is
	// decoderChecks: the body goes to a PageFunc that parses it in full
	// and reports a malformed one (service.ErrMalformedPage), so the transport
	// does not validate the JSON a second time.
	decoderChecks bool

	method      string // "" means GET
	body        []byte // request body, never logged
	contentType string
	cred        credKind
	credName    string   // the credential named in 401/403 errors; "" derives it from cred
	secrets     []string // per-call credential values scrubbed from errors
	// noRetry: a GET that must not be repeated blindly (it creates
	// something, e.g. an e-mailed auto-login token).
	noRetry bool
	// quota: the read's reservation of the request quota, if any.
	quota *quotaReservation
}

func (r reqInfo) withDefaults() reqInfo {
	if r.iface == "" {
		r.iface = IfaceReporting
	}
	if r.method == "" {
		r.method = http.MethodGet
	}
	if r.credName == "" {
		switch r.cred {
		case credAccess:
			if r.iface == IfaceReporting {
				r.credName = "reporting access token"
			} else {
				r.credName = "access token (" + r.iface + ")"
			}
		case credAPI:
			r.credName = "developer API token"
		}
	}
	return r
}

// response of one attempt.
type response struct {
	status int
	header http.Header
}

// ErrResponseTooLarge: a response body is larger than the client's limit
// (WithMaxResponseBytes). Not retried.
var ErrResponseTooLarge = errors.New("extract: response body too large")

// transportError is a failure to get a complete response; retryable unless
// the context ended.
type transportError struct {
	err error
}

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// attempt sends one request and reads the whole body into buf. sent
// reports whether the request may have reached the service: false only
// when the connection could not be made and no header was written.
func (c *Client) attempt(ctx context.Context, info reqInfo, u *url.URL, bearer string, buf *bytes.Buffer) (r response, sent bool, err error) {
	var wrote atomic.Bool
	// One timer bounds connecting, the wait for headers and every stall
	// between body bytes; each read of the body re-arms it.
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(c.timeout, func() {
		cancel(fmt.Errorf("%w: no answer for %s (requests.timeout)", errStalled, c.timeout))
	})
	defer stall.Stop()
	tctx := httptrace.WithClientTrace(actx, &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Store(true) },
	})
	var body io.Reader
	if info.body != nil {
		body = bytes.NewReader(info.body)
	}
	req, err := http.NewRequestWithContext(tctx, info.method, u.String(), body)
	if err != nil {
		return response{}, false, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if info.contentType != "" {
		req.Header.Set("Content-Type", info.contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sepipe/"+version)
	resp, err := c.hc.Do(req)
	if err != nil {
		if cause := context.Cause(actx); errors.Is(cause, errStalled) && ctx.Err() == nil {
			err = cause
		}
		sent = wrote.Load() || !isDialError(err)
		// url.Error carries the raw URL; rebuild it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = &url.Error{Op: ue.Op, URL: service.RedactURL(u), Err: ue.Err}
		}
		return response{}, sent, &transportError{err: err}
	}
	defer resp.Body.Close()
	buf.Reset()
	if resp.ContentLength > c.maxBody {
		return response{status: resp.StatusCode, header: resp.Header}, true, c.tooLarge(resp.ContentLength)
	}
	want := c.maxBody
	if resp.ContentLength >= 0 {
		want = resp.ContentLength
	}
	stall.Stop() // waiting for room is not the server's stall
	if err := c.holdBody(ctx, buf, want); err != nil {
		return response{status: resp.StatusCode, header: resp.Header}, true, &transportError{err: fmt.Errorf("waiting for room for the body: %w", err)}
	}
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	stall.Reset(c.timeout)
	_, err = buf.ReadFrom(io.LimitReader(stallReader{resp.Body, stall, c.timeout}, c.maxBody+1))
	r = response{status: resp.StatusCode, header: resp.Header}
	if err != nil {
		if cause := context.Cause(actx); errors.Is(cause, errStalled) && ctx.Err() == nil {
			err = cause
		}
		return r, true, &transportError{err: fmt.Errorf("reading body after %d bytes: %w", buf.Len(), err)}
	}
	if int64(buf.Len()) > c.maxBody {
		return r, true, c.tooLarge(-1)
	}
	return r, true, nil
}

func (c *Client) tooLarge(length int64) error {
	if length > 0 {
		return fmt.Errorf("%w: %d bytes announced, more than the limit of %d (requests.max_response_bytes)", ErrResponseTooLarge, length, c.maxBody)
	}
	return fmt.Errorf("%w: more than the limit of %d bytes (requests.max_response_bytes)", ErrResponseTooLarge, c.maxBody)
}

// errStalled: an attempt got no byte for the timeout.
var errStalled = errors.New("stalled")

// stallReader re-arms the stall timer on every read that brings bytes.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (s stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.d)
	}
	return n, err
}

// isDialError reports a failure to connect (refused, DNS, unreachable),
// after which the request was certainly not sent.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// retryableTransport reports whether a transport failure may succeed when
// tried again.
func retryableTransport(err error) bool {
	var cv *tls.CertificateVerificationError
	return !errors.As(err, &cv) && !errors.Is(err, ErrCrossOriginRedirect) && !errors.Is(err, errTooManyRedirects)
}

// errTooManyRedirects: a chain of redirects that does not end; asking
// again would follow the same chain.
var errTooManyRedirects = errors.New("stopped after 10 redirects")

// Format prints the client without its credentials, for every verb, so a
// client printed in a log line or a panic cannot leak the token.
func (c *Client) Format(f fmt.State, _ rune) {
	if c == nil {
		_, _ = io.WriteString(f, "extract.Client(nil)")
		return
	}
	_, _ = fmt.Fprintf(f, "extract.Client{base: %s, token: %s, apiToken: %s, concurrency: %d, pageSize: %d}",
		service.RedactURL(c.base), secret(""), secret(""), c.concurrency, c.pageSize)
}

// LogValue logs the client without its credentials.
func (c *Client) LogValue() slog.Value {
	if c == nil {
		return slog.StringValue("extract.Client(nil)")
	}
	return slog.GroupValue(slog.String("base", service.RedactURL(c.base)), slog.String("token", redacted), slog.String("apiToken", redacted))
}
