package extract

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// version is reported in the User-Agent; set it at build time with
// -ldflags "-X github.com/sepipe/sepipe/extract.version=1.2.3".
var version = "dev"

// reportingPath is the reporting base below the tenant URL.
const reportingPath = "/api/learn/reporting/v3/json"

// Defaults.
const (
	DefaultRateLimit   = 20 // requests per second
	DefaultBurst       = 20
	DefaultConcurrency = 4
	DefaultPageSize    = 1000
	DefaultMaxAttempts = 6
	DefaultMaxWait     = 2 * time.Minute
	defaultBackoffBase = 250 * time.Millisecond
	defaultBackoffCap  = 30 * time.Second
	defaultHTTPTimeout = 5 * time.Minute
	// maxBodyBytes bounds one response body; a larger body is an error, not
	// a truncation.
	maxBodyBytes = 512 << 20
	// maxPooledBytes: larger buffers are dropped instead of pooled.
	maxPooledBytes = 16 << 20
)

// Source is what the rest of the pipeline needs from this stage. *Client
// implements it; tests of later stages can fake it. ReadObject blocks until
// every page has been handed to fn, or the read failed or was cancelled.
type Source interface {
	Objects(ctx context.Context) ([]Object, error)
	Describe(ctx context.Context, objectID string) ([]Field, error)
	ReadObject(ctx context.Context, objectID string, q Query, fn PageFunc) (ReadStats, error)
}

var _ Source = (*Client)(nil)

// Client reads the Coach reporting interface of one tenant. It is safe for
// concurrent use; all its requests share one rate limiter.
type Client struct {
	base      *url.URL // tenant URL
	reporting *url.URL // base + reportingPath
	token     secret
	hc        *http.Client
	limiter   *rate.Limiter
	log       *slog.Logger

	concurrency int
	pageSize    int
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

// WithAccessToken sets the OAuth 2.0 bearer token sent on every reporting
// request.
func WithAccessToken(tok string) Option {
	return func(c *Client) { c.token = secret(tok) }
}

// WithHTTPClient sets the HTTP client (transport, per-attempt timeout).
// The default has a 5 minute timeout per attempt.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc == nil {
			c.optErrs = append(c.optErrs, errors.New("WithHTTPClient: nil client"))
			return
		}
		c.hc = hc
	}
}

// WithRateLimit sets the one limiter shared by every request of the client,
// retries included: rps requests per second with bursts of burst. rps <= 0
// means unlimited. Default 20 rps, burst 20.
func WithRateLimit(rps float64, burst int) Option {
	return func(c *Client) {
		if burst < 1 {
			burst = 1
		}
		limit := rate.Limit(rps)
		if rps <= 0 {
			limit = rate.Inf
		}
		c.limiter = rate.NewLimiter(limit, burst)
	}
}

// WithConcurrency sets the number of page-fetch workers per ReadObject.
// Default 4.
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

// WithLogger sets the logger; requests are logged at debug level and
// retries at warn level. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// withBackoff sets the exponential backoff base and cap (tests use
// milliseconds).
func withBackoff(base, cap time.Duration) Option {
	return func(c *Client) { c.backoffBase, c.backoffCap = base, cap }
}

// New returns a client of the tenant at baseURL (e.g.
// https://acme.example.com); requests go to baseURL +
// /api/learn/reporting/v3/json.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("extract: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("extract: base URL %q: want an absolute http or https URL", RedactURL(u))
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	rep := *u
	rep.Path = u.Path + reportingPath

	c := &Client{
		base:        u,
		reporting:   &rep,
		hc:          &http.Client{Timeout: defaultHTTPTimeout},
		limiter:     rate.NewLimiter(DefaultRateLimit, DefaultBurst),
		log:         slog.New(slog.DiscardHandler),
		concurrency: DefaultConcurrency,
		pageSize:    DefaultPageSize,
		maxAttempts: DefaultMaxAttempts,
		maxWait:     DefaultMaxWait,
		backoffBase: defaultBackoffBase,
		backoffCap:  defaultBackoffCap,
		now:         time.Now,
		sleep:       sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	if len(c.optErrs) > 0 {
		return nil, fmt.Errorf("extract: options: %w", errors.Join(c.optErrs...))
	}
	return c, nil
}

// endpoint returns the reporting base followed by path segments, each
// escaped as one segment (an object id cannot add or climb path levels).
func (c *Client) endpoint(segments ...string) *url.URL {
	u := *c.reporting
	raw := c.reporting.EscapedPath()
	for _, s := range segments {
		u.Path += "/" + s
		raw += "/" + url.PathEscape(s)
	}
	u.RawPath = raw
	return &u
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
	if b.Cap() > maxPooledBytes {
		return
	}
	b.Reset()
	c.bufs.Put(b)
}

// reqInfo says what a request is about, for errors and logs.
type reqInfo struct {
	op     string // objects, describe, query
	object string
	page   int
	params string // decoded `parameters` document, logged as is
}

// response of one attempt.
type response struct {
	status int
	header http.Header
}

// errBodyTooLarge is not retried.
var errBodyTooLarge = fmt.Errorf("response body larger than %d bytes", maxBodyBytes)

// transportError is a failure to get a complete response; retryable unless
// the context ended.
type transportError struct {
	err error
}

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// attempt sends one GET and reads the whole body into buf.
func (c *Client) attempt(ctx context.Context, u *url.URL, buf *bytes.Buffer) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return response{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+string(c.token))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sepipe/"+version)
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error carries the raw URL; rebuild it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = &url.Error{Op: ue.Op, URL: RedactURL(u), Err: ue.Err}
		}
		return response{}, &transportError{err: err}
	}
	defer resp.Body.Close()
	buf.Reset()
	if resp.ContentLength > 0 && resp.ContentLength <= maxBodyBytes {
		buf.Grow(int(resp.ContentLength))
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxBodyBytes+1))
	r := response{status: resp.StatusCode, header: resp.Header}
	if err != nil {
		return r, &transportError{err: fmt.Errorf("reading body after %d bytes: %w", buf.Len(), err)}
	}
	if buf.Len() > maxBodyBytes {
		return r, errBodyTooLarge
	}
	return r, nil
}

// retryableTransport reports whether a transport failure may succeed when
// tried again.
func retryableTransport(err error) bool {
	var cv *tls.CertificateVerificationError
	return !errors.As(err, &cv)
}

// Format prints the client without its credentials, for every verb, so a
// client printed in a log line or a panic cannot leak the token.
func (c *Client) Format(f fmt.State, _ rune) {
	if c == nil {
		_, _ = io.WriteString(f, "extract.Client(nil)")
		return
	}
	_, _ = fmt.Fprintf(f, "extract.Client{base: %s, token: %s, concurrency: %d, pageSize: %d}",
		RedactURL(c.base), c.token, c.concurrency, c.pageSize)
}

// LogValue logs the client without its credentials.
func (c *Client) LogValue() slog.Value {
	if c == nil {
		return slog.StringValue("extract.Client(nil)")
	}
	return slog.GroupValue(slog.String("base", RedactURL(c.base)), slog.String("token", redacted))
}
