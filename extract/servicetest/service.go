package servicetest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BasePath is the path prefix of the Coach reporting interface.
const BasePath = "/api/learn/reporting/v3/json"

// Defaults of the options.
const (
	DefaultSeed         int64 = 1
	DefaultUsers              = 200
	DefaultAccessToken        = "demo-access-token"
	DefaultLimitedToken       = "demo-limited-token"
)

// MaxUsers is the largest tenant the fake generates; WithUsers clamps to it.
const MaxUsers = 10_000_000

// DefaultNow is the tenant's clock unless WithNow is given.
var DefaultNow = time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)

// An Option configures a Service (and so a Server).
type Option func(*config)

type config struct {
	seed         int64
	users        int
	accessToken  string
	limitedToken string
	now          time.Time

	noV4    bool         // WithoutV4
	hostile bool         // WithHostile (hostile.go)
	wide    bool         // WithWideObject (wide.go)
	wire    *hostileWire // WithHostileWire (hostile_wire.go)

	shapeVariants bool // WithShapeVariants (assets.go)

	// OAuth (oauth.go).
	clientID     string
	clientSecret string
	refreshToken string

	// Identities, legacy rules, webhooks and the clock (legacy.go,
	// webhooks.go, clock.go).
	loginDir    string
	password    string
	apiToken    string
	ssoOnly     bool
	retryDelays []time.Duration
	autoEvery   time.Duration // WithAutoAdvance: real interval
	autoBy      time.Duration // WithAutoAdvance: tenant time per tick

	faults faultConfig // fault options (faults.go)
}

// WithSeed sets the seed from which all tenant data is derived (default 1).
func WithSeed(seed int64) Option { return func(c *config) { c.seed = seed } }

// WithUsers sets the number of users of the tenant (default 200). Each user
// is assigned 8 to 16 courses, so userCourseProgress has about 12 rows per
// user. Negative values count as 0; values above MaxUsers are clamped.
func WithUsers(n int) Option {
	return func(c *config) { c.users = min(max(n, 0), MaxUsers) }
}

// WithAccessToken sets the bearer token that has the reporting role.
func WithAccessToken(token string) Option { return func(c *config) { c.accessToken = token } }

// WithLimitedToken sets a bearer token that is valid but lacks the reporting
// role: requests carrying it are answered 403.
func WithLimitedToken(token string) Option { return func(c *config) { c.limitedToken = token } }

// WithoutV4 makes the tenant's plan lack the sharing interface: every
// request under the v4 base (themes, shares) is answered 403 with a
// problem body naming the plans that include it, whatever the token.
func WithoutV4() Option { return func(c *config) { c.noV4 = true } }

// WithNow sets the tenant's clock (default DefaultNow). Progress, statuses
// and last-activity dates are derived from it; it is truncated to seconds.
func WithNow(now time.Time) Option { return func(c *config) { c.now = now } }

// Service is the fake service as an http.Handler. It is safe for concurrent
// use. Build it with New.
type Service struct {
	cfg    config
	tenant *tenant
	snap   atomic.Pointer[snapshot]
	cache  *indexCache
	mux    *http.ServeMux

	requests atomic.Int64
	mu       sync.Mutex
	queries  map[string]int64 // query requests per object id

	live *live // sessions, shares, subscriptions, deliveries, clock (live.go)

	faults *faultState // fault injection (faults.go)
	oauth  *oauthState // token endpoint (oauth.go)
}

var _ http.Handler = (*Service)(nil)

// New returns a Service configured by opts.
func New(opts ...Option) *Service {
	cfg := config{
		seed:         DefaultSeed,
		users:        DefaultUsers,
		accessToken:  DefaultAccessToken,
		limitedToken: DefaultLimitedToken,
		now:          DefaultNow,
		loginDir:     DefaultLoginDir,
		password:     DefaultPassword,
		apiToken:     DefaultAPIToken,
		retryDelays:  slices.Clone(DefaultRetryDelays),
		clientID:     DefaultClientID,
		clientSecret: DefaultClientSecret,
		refreshToken: DefaultRefreshToken,
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Service{
		cfg:     cfg,
		tenant:  newTenant(cfg.seed, cfg.users),
		cache:   newIndexCache(8),
		queries: make(map[string]int64),
	}
	s.snap.Store(s.tenant.at(cfg.now))
	s.faults = newFaultState(&cfg)
	s.oauth = newOAuthState(s)
	s.live = newLive(s)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc(BasePath+"/", s.serveReporting)
	s.mux.HandleFunc(BasePath, s.serveReporting)
	s.mux.HandleFunc(LegacyPath+"/", s.serveLegacy)
	s.mux.HandleFunc(AssetsPath+"/", s.serveAssets)
	s.mux.HandleFunc(OAuthTokenPath, s.serveOAuthToken)
	s.mux.HandleFunc(V4Path+"/", s.serveV4)
	s.mux.HandleFunc(SharePagePath+"/", s.serveSharePage)
	s.mux.HandleFunc(WebhooksPath+"/", s.serveWebhooks)
	s.mux.HandleFunc(AdminPath+"/", s.serveAdmin)
	s.live.start()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errNotFound("no resource at path %q", r.URL.Path))
	})
	return s
}

// ServeHTTP serves the fake's interfaces.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.serveFaults(w, r, s.mux)
}

// AccessToken returns the bearer token with the reporting role.
func (s *Service) AccessToken() string { return s.cfg.accessToken }

// LimitedToken returns the valid bearer token without the reporting role.
func (s *Service) LimitedToken() string { return s.cfg.limitedToken }

// Now returns the tenant's clock.
func (s *Service) Now() time.Time { return time.Unix(s.snap.Load().now, 0).UTC() }

// Requests returns the number of requests served so far, on any path and
// with any status.
func (s *Service) Requests() int64 { return s.requests.Load() }

// RequestsFor returns the number of query requests (GET or HEAD
// /objects/{objectID}, whatever their status) received for objectID.
func (s *Service) RequestsFor(objectID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[objectID]
}

func (s *Service) countQuery(objectID string) {
	s.mu.Lock()
	s.queries[objectID]++
	s.mu.Unlock()
}

// authorize checks the bearer token of a reporting request.
func (s *Service) authorize(r *http.Request) *apiError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return errUnauthorized("missing Authorization header; expected \"Bearer <access token>\"")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errUnauthorized("malformed Authorization header; expected \"Bearer <access token>\"")
	}
	token = strings.TrimSpace(token)
	switch token {
	case s.cfg.accessToken:
		return nil
	case s.cfg.limitedToken:
		return errForbidden("the access token is valid but lacks the Coach reporting role")
	}
	if known, expired := s.accessTokenState(token); known {
		if expired {
			return errUnauthorized("the access token has expired; obtain a new access token")
		}
		return nil
	}
	return errUnauthorized("the access token is invalid or has expired")
}

// Server is a Service listening on a loopback address, like
// httptest.Server.
type Server struct {
	URL     string   // base URL of the form http://ipaddr:port, no trailing slash
	Service *Service // the handler, for accessors and request accounting

	ts *httptest.Server
}

// NewServer starts a Server configured by opts. Call Close when done.
func NewServer(opts ...Option) *Server {
	svc := New(opts...)
	ts := httptest.NewServer(svc)
	return &Server{URL: ts.URL, Service: svc, ts: ts}
}

// Close stops the Service's background work (webhook deliveries and
// retries, WithAutoAdvance), then shuts the server down and blocks until
// all requests have finished.
func (s *Server) Close() { s.Service.Close(); s.ts.Close() }

// Client returns an HTTP client configured for requests to the server.
func (s *Server) Client() *http.Client { return s.ts.Client() }
