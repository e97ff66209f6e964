package extract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// OAuthTokenPath is the service's OAuth 2.0 token endpoint below the
// tenant URL (field notes: POST {base_url}/api/v3/oauth2/token).
const OAuthTokenPath = "/api/v3/oauth2/token"

// DefaultExpiryMargin: an access token is refreshed this long before it
// expires, so that no request leaves with a token about to lapse.
const DefaultExpiryMargin = 2 * time.Minute

// ErrRefreshFailed: the token endpoint refused to refresh the access
// token (the refresh token was used, revoked or expired, or the client id
// or secret is wrong: a person must authorize again, sepipe auth login),
// or kept failing in a way that may pass (5xx, 429, a dropped connection),
// after refreshAttempts tries.
var ErrRefreshFailed = errors.New("extract: refreshing the access token failed")

// RefreshOutage reports whether err is a refresh that kept failing in a
// way that may pass (the token endpoint's 5xx, 429 or 408, a timeout, a
// refused or dropped connection) rather than a refusal: a later run may
// succeed with the same tokens.
func RefreshOutage(err error) bool {
	var fe *refreshFailure
	return errors.As(err, &fe) && fe.transient
}

// RefreshRefused reports whether err is a refresh the token endpoint
// answered with a refusal (a 4xx: invalid_grant for a used, revoked or
// expired refresh token, invalid_client for a wrong client id or secret).
func RefreshRefused(err error) bool {
	var fe *refreshFailure
	return errors.As(err, &fe) && !fe.transient && fe.status != 0
}

// OAuthConfig is the OAuth 2.0 client sepipe refreshes access tokens with.
type OAuthConfig struct {
	ClientID     string
	ClientSecret string
	// RefreshToken is the refresh token to start from. The store's token
	// wins once it holds one derived from this one (refresh tokens rotate:
	// every refresh returns a new one and the old one stops working).
	RefreshToken string
	// TokenURL is the token endpoint; default the tenant URL +
	// OAuthTokenPath.
	TokenURL string
}

// TokenOrigin is how an OAuth source chose its refresh token, as
// `sepipe auth status` reports it.
type TokenOrigin string

const (
	OriginStore TokenOrigin = "token store"                 // the store's token, derived from an earlier refresh token
	OriginSeed  TokenOrigin = "refresh token (environment)" // the configured refresh token, not yet used
	OriginNone  TokenOrigin = "none"
)

// OAuth is an access token source that refreshes with a rotating refresh
// token and keeps the newest tokens in a TokenStore. It refreshes before the
// access token expires (DefaultExpiryMargin) and when the service refuses
// it; concurrent callers share one refresh, and processes sharing the store
// take its lock around a refresh, so a refresh token is never used twice.
// Every new refresh token is saved before the access token that came with
// it is used. It is safe for concurrent use.
type OAuth struct {
	conf   oauth2.Config
	seed   string // OAuthConfig.RefreshToken
	store  TokenStore
	hc     *http.Client
	margin time.Duration
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	log    *slog.Logger

	mu  sync.Mutex
	cur StoredToken // the token in use; empty before the first Token
}

// OAuthOption configures an OAuth source.
type OAuthOption func(*OAuth)

// WithOAuthHTTPClient sets the HTTP client of the token endpoint (default:
// connect and response headers bounded by DefaultTimeout, same-origin
// redirects only; see WithOAuthTimeout).
func WithOAuthHTTPClient(hc *http.Client) OAuthOption {
	return func(o *OAuth) {
		if hc != nil {
			o.hc = hc
		}
	}
}

// oauthHTTPClient bounds a whole token request by twice the timeout.
func oauthHTTPClient(timeout time.Duration) *http.Client {
	hc := NewHTTPClient(timeout)
	hc.Timeout = 2 * timeout
	return hc
}

// WithOAuthTimeout bounds the token endpoint's requests like the Client's
// WithTimeout (connect, TLS; the whole request within twice d).
func WithOAuthTimeout(d time.Duration) OAuthOption {
	return func(o *OAuth) {
		if d > 0 {
			o.hc = oauthHTTPClient(d)
		}
	}
}

// WithOAuthLogger sets the logger (refreshes at debug level, never a
// token).
func WithOAuthLogger(l *slog.Logger) OAuthOption {
	return func(o *OAuth) {
		if l != nil {
			o.log = l
		}
	}
}

// withOAuthClock is a test seam for expiry.
func withOAuthClock(now func() time.Time) OAuthOption { return func(o *OAuth) { o.now = now } }

// withOAuthSleep is a test seam for the waits between a refresh's attempts.
func withOAuthSleep(sleep func(context.Context, time.Duration) error) OAuthOption {
	return func(o *OAuth) { o.sleep = sleep }
}

// NewOAuth returns a source refreshing at cfg's token endpoint for the
// tenant at tenantURL, keeping its tokens in store (required).
func NewOAuth(tenantURL string, cfg OAuthConfig, store TokenStore, opts ...OAuthOption) (*OAuth, error) {
	if store == nil {
		return nil, errors.New("extract: OAuth needs a token store")
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("extract: OAuth needs a client id and a client secret")
	}
	tokenURL := cfg.TokenURL
	if tokenURL == "" {
		base, err := parseBase("tenant", tenantURL)
		if err != nil {
			return nil, err
		}
		tokenURL = base.String() + OAuthTokenPath
	}
	if _, err := parseBase("OAuth token", tokenURL); err != nil {
		return nil, err
	}
	o := &OAuth{
		conf: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			// The field notes: form-encoded, client id and secret in the form.
			Endpoint: oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams},
		},
		seed:   cfg.RefreshToken,
		store:  store,
		hc:     oauthHTTPClient(DefaultTimeout),
		margin: DefaultExpiryMargin,
		now:    time.Now,
		sleep:  sleepCtx,
		log:    slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(o)
	}
	return o, nil
}

// Token returns an access token that is valid for at least the expiry
// margin, refreshing it first when needed.
func (o *OAuth) Token(ctx context.Context) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fresh(o.cur) {
		return o.cur.AccessToken, nil
	}
	return o.refreshLocked(ctx, "")
}

// Refresh is called when the service refused the access token rejected: it
// returns a new one, or the current one when another caller has already
// replaced rejected.
func (o *OAuth) Refresh(ctx context.Context, rejected string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur.AccessToken != "" && o.cur.AccessToken != rejected && o.fresh(o.cur) {
		return o.cur.AccessToken, nil
	}
	return o.refreshLocked(ctx, rejected)
}

// fresh reports whether t's access token is set and lives past the margin.
// The margin is at most a tenth of the token's life, so that short-lived
// tokens are not refreshed before every request.
func (o *OAuth) fresh(t StoredToken) bool {
	if t.AccessToken == "" {
		return false
	}
	if t.Expiry.IsZero() {
		return true
	}
	m := o.margin
	if life := t.Expiry.Sub(t.Updated); !t.Updated.IsZero() && life > 0 {
		m = min(m, life/10)
	}
	return o.now().Add(m).Before(t.Expiry)
}

// seedHash identifies a seed refresh token without keeping it.
func seedHash(tok string) string {
	if tok == "" {
		return ""
	}
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:8])
}

// How a chain of tokens started (StoredToken.Source).
const (
	sourceEnv   = "environment"
	sourceLogin = "login"
)

// pick chooses the token to start from: the store's when it holds one that
// was seeded by sepipe auth login, or from the configured refresh token;
// a changed configured token (a person authorized again) starts a new
// chain.
func (o *OAuth) pick(st StoredToken, ok bool) (StoredToken, TokenOrigin) {
	if ok && st.RefreshToken != "" && (o.seed == "" || st.Source == sourceLogin || st.Seed == "" || st.Seed == seedHash(o.seed)) {
		return st, OriginStore
	}
	if o.seed != "" {
		return StoredToken{RefreshToken: o.seed, Seed: seedHash(o.seed), Source: sourceEnv}, OriginSeed
	}
	return StoredToken{}, OriginNone
}

// refreshLocked refreshes under the store's lock: another process may have
// refreshed meanwhile, in which case its token is used.
func (o *OAuth) refreshLocked(ctx context.Context, rejected string) (string, error) {
	unlock, err := o.store.Lock(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: token store: %w", ErrRefreshFailed, err)
	}
	defer unlock()
	st, ok, err := o.store.Load()
	if err != nil {
		return "", fmt.Errorf("%w: token store: %w", ErrRefreshFailed, err)
	}
	base, origin := o.pick(st, ok)
	if origin == OriginNone {
		return "", fmt.Errorf("%w: no refresh token (set SEPIPE_REFRESH_TOKEN or run sepipe auth login)", ErrRefreshFailed)
	}
	if base.AccessToken != "" && base.AccessToken != rejected && o.fresh(base) {
		o.cur = base // refreshed by another process, or left by an earlier run
		return base.AccessToken, nil
	}
	return o.exchange(ctx, base)
}

// exchange trades base's refresh token for new tokens and saves them
// before returning the access token. The caller holds o.mu and the store's
// lock.
func (o *OAuth) exchange(ctx context.Context, base StoredToken) (string, error) {
	// A request sent is answered and saved even when ctx ends meanwhile
	// (a SIGTERM, a pod evicted): the endpoint may already have rotated
	// the refresh token, and dropping its answer left the store with the
	// spent one, the tenant locked out until sepipe auth login (found by
	// review). The HTTP client's timeout bounds the wait; ctx still stops
	// the retries.
	hctx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, o.hc)
	var tok *oauth2.Token
	for attempt := 1; ; attempt++ {
		var err error
		tok, err = o.conf.TokenSource(hctx, &oauth2.Token{RefreshToken: base.RefreshToken}).Token()
		if err == nil {
			break
		}
		err = o.refreshError(err, base.RefreshToken)
		wait, again := refreshRetry(err, attempt)
		if !again || ctx.Err() != nil {
			return "", err
		}
		o.log.WarnContext(ctx, "the token endpoint failed; asking again", "attempt", attempt, "wait", wait, "cause", err.Error())
		if serr := o.sleep(ctx, wait); serr != nil {
			return "", fmt.Errorf("%w (stopped waiting to ask again: %w)", err, context.Cause(ctx))
		}
	}
	next := StoredToken{
		AccessToken:  tok.AccessToken,
		RefreshToken: tok.RefreshToken,
		Expiry:       tok.Expiry,
		Seed:         base.Seed,
		Source:       base.Source,
		Updated:      o.now().UTC(),
	}
	if next.RefreshToken == "" {
		next.RefreshToken = base.RefreshToken // the endpoint did not rotate it
	}
	// The old refresh token is spent: save the new one before using it.
	if err := o.store.Save(next); err != nil {
		return "", fmt.Errorf("%w: the token endpoint rotated the refresh token but saving it failed (authorize again with sepipe auth login): %w", ErrRefreshFailed, err)
	}
	o.cur = next
	o.log.DebugContext(ctx, "access token refreshed", "expires", next.Expiry.Format(time.RFC3339))
	return next.AccessToken, nil
}

// Login starts a new chain from a refresh token a person gives (sepipe
// auth login): it is exchanged at once, which proves it works, and the
// new tokens replace whatever the store held. From then on the store wins
// over the configured refresh token.
func (o *OAuth) Login(ctx context.Context, refreshToken string) error {
	refreshToken = strings.TrimSpace(refreshToken)
	if refreshToken == "" {
		return errors.New("extract: empty refresh token")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	unlock, err := o.store.Lock(ctx)
	if err != nil {
		return fmt.Errorf("%w: token store: %w", ErrRefreshFailed, err)
	}
	defer unlock()
	_, err = o.exchange(ctx, StoredToken{RefreshToken: refreshToken, Seed: seedHash(refreshToken), Source: sourceLogin})
	return err
}

// refreshAttempts is how many times exchange asks the token endpoint when
// it fails in a way that may pass (refreshRetry): without it, one 502 or
// one dropped connection at the hourly refresh failed every request that
// needed the new token, and with them their streams.
const refreshAttempts = 4

// maxRefreshWait bounds a wait between two of exchange's attempts,
// Retry-After included.
const maxRefreshWait = 30 * time.Second

// refreshRetry says whether exchange asks again after its attempt'th
// failure, err (from refreshError), and after what wait: when the
// endpoint answered 429, 408 or a transient 5xx (its Retry-After, at
// most maxRefreshWait, else 1 s doubled each time), or the request failed
// in transport (a timeout, a refused or dropped connection). A refusal
// (400 invalid_grant, 401) is final.
func refreshRetry(err error, attempt int) (time.Duration, bool) {
	var fe *refreshFailure
	if attempt >= refreshAttempts || !errors.As(err, &fe) || !fe.transient {
		return 0, false
	}
	wait := time.Second << min(attempt-1, 5)
	if fe.hinted {
		wait = fe.retryAfter
	}
	return min(wait, maxRefreshWait), true
}

// refreshFailure is refreshError's error: a message without credentials,
// whether asking again may succeed, and the wait the endpoint asked for.
type refreshFailure struct {
	msg        string
	status     int // the token endpoint's answer; 0: none (a transport failure)
	transient  bool
	retryAfter time.Duration
	hinted     bool
}

func (e *refreshFailure) Error() string { return e.msg }
func (e *refreshFailure) Unwrap() error { return ErrRefreshFailed }

// refreshError describes a failed refresh without any credential: the
// endpoint's error code and description, or the transport failure.
func (o *OAuth) refreshError(err error, refresh string) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		var retryAfter time.Duration
		var hinted bool
		if re.Response != nil {
			status = re.Response.StatusCode
			retryAfter, hinted = parseRetryAfter(re.Response.Header.Get("Retry-After"), o.now())
		}
		msg := re.ErrorDescription
		if msg == "" {
			msg = strings.TrimSpace(string(re.Body))
		}
		msg = truncate(scrubValues(msg, refresh, o.conf.ClientSecret), 300) // scrubbed whole: a cut value would not match
		code := re.ErrorCode
		if code == "" {
			code = http.StatusText(status)
		}
		return &refreshFailure{
			msg:       fmt.Sprintf("%v: token endpoint %s answered %d %s: %s", ErrRefreshFailed, o.conf.Endpoint.TokenURL, status, code, msg),
			status:    status,
			transient: retryableStatus(status) || status == http.StatusRequestTimeout,
			// A wait only where it is asked for, with the 429 or 503.
			retryAfter: retryAfter, hinted: hinted,
		}
	}
	var ue *url.Error // the request's transport failure (oauth2 returns it as it is)
	return &refreshFailure{
		msg: fmt.Sprintf("%v: token endpoint %s: %s", ErrRefreshFailed, o.conf.Endpoint.TokenURL,
			scrubValues(err.Error(), refresh, o.conf.ClientSecret)),
		transient: errors.As(err, &ue) && retryableTransport(err) && !errors.Is(err, context.Canceled),
	}
}

// Status describes the source for `sepipe auth status`: where its token
// comes from and when the access token expires. It never returns a token.
type Status struct {
	Origin        TokenOrigin
	Source        string    // how the store was seeded: environment, login
	AccessExpiry  time.Time // zero when no access token is held
	Updated       time.Time // when the store was last written
	StorePath     string
	HasAccess     bool
	AccessExpired bool
}

// Status reads the store and reports, without refreshing.
func (o *OAuth) Status() (Status, error) {
	st, ok, err := o.store.Load()
	if err != nil {
		return Status{}, err
	}
	base, origin := o.pick(st, ok)
	s := Status{Origin: origin, Source: base.Source, StorePath: o.store.String()}
	if origin == OriginStore {
		s.Updated = st.Updated
		s.HasAccess = st.AccessToken != ""
		s.AccessExpiry = st.Expiry
		s.AccessExpired = s.HasAccess && !st.Expiry.IsZero() && !o.now().Before(st.Expiry)
	}
	return s, nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// scrubValues replaces each value (of 8 bytes or more) in text by
// REDACTED: a last guard, since credentials are never put in messages.
// jsonEscaped is v as encoding/json writes it inside a string, without
// the quotes (HTML characters escaped too, as json.Marshal does).
func jsonEscaped(v string) string {
	b, _ := json.Marshal(v)
	return string(b[1 : len(b)-1])
}

func scrubValues(text string, values ...string) string {
	for _, v := range values {
		if len(v) >= minScrubLen {
			text = strings.ReplaceAll(text, v, redacted)
			// As a form or a query carries it (the token request is a
			// form), and as a JSON body does (the legacy session requests:
			// a service that echoes the body echoes & as \u0026).
			for _, e := range []string{url.QueryEscape(v), url.PathEscape(v), jsonEscaped(v)} {
				if e != v {
					text = strings.ReplaceAll(text, e, redacted)
				}
			}
		}
	}
	return text
}
