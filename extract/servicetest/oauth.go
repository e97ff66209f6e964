package servicetest

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OAuthTokenPath is the OAuth 2.0 token endpoint, on the tenant host
// (docs/service-interface.md: POST {base_url}/api/v3/oauth2/token).
const OAuthTokenPath = AssetsPath + "/oauth2/token"

// Defaults of the OAuth client and the first refresh token.
const (
	DefaultClientID     = "demo-client-id"
	DefaultClientSecret = "demo-client-secret"
	DefaultRefreshToken = "demo-refresh-token"
)

// RefreshTokenTTL is how long a refresh token lives (docs/service-interface.md: about
// 14 days), measured like access tokens: real time since issue plus every
// advance of the tenant's clock since issue.
const RefreshTokenTTL = 14 * 24 * time.Hour

// defaultIssuedTTL is the life of an access token the token endpoint issues
// when WithTokenTTL is not given (docs/service-interface.md: about an hour).
const defaultIssuedTTL = time.Hour

// WithOAuthClient sets the OAuth client the token endpoint accepts
// (default DefaultClientID, DefaultClientSecret).
func WithOAuthClient(id, secret string) Option {
	return func(c *config) { c.clientID, c.clientSecret = id, secret }
}

// WithRefreshToken sets the refresh token the tenant starts with (default
// DefaultRefreshToken). It is valid once: the token endpoint answers it
// with an access token and a new refresh token, and refuses it from then
// on, as it refuses every refresh token it has replaced.
func WithRefreshToken(token string) Option { return func(c *config) { c.refreshToken = token } }

// ClientID returns the OAuth client id the token endpoint accepts.
func (s *Service) ClientID() string { return s.cfg.clientID }

// ClientSecret returns the OAuth client secret the token endpoint accepts.
func (s *Service) ClientSecret() string { return s.cfg.clientSecret }

// RefreshToken returns the tenant's first refresh token (WithRefreshToken).
func (s *Service) RefreshToken() string { return s.cfg.refreshToken }

// OAuthStats counts what the token endpoint did.
type OAuthStats struct {
	Refreshes int64 // access tokens issued
	Refused   int64 // refresh requests refused (unknown, used or expired refresh token, wrong client)
	Replays   int64 // refused because the refresh token had already been used
}

// issued is a token the endpoint handed out, with when it did so in real
// time and on the tenant's clock.
type issued struct {
	real   time.Time
	tenant int64 // tenant clock, Unix seconds
}

// oauthState is the token endpoint's memory: live refresh and access
// tokens, and the refresh tokens already used.
type oauthState struct {
	mu      sync.Mutex
	refresh map[string]issued // live refresh tokens
	used    map[string]bool   // refresh tokens already exchanged
	access  map[string]issued // access tokens issued
	stats   OAuthStats
	ttl     time.Duration // SetTokenTTL; 0: WithTokenTTL or the default
}

func newOAuthState(s *Service) *oauthState {
	o := &oauthState{refresh: map[string]issued{}, used: map[string]bool{}, access: map[string]issued{}}
	if s.cfg.refreshToken != "" {
		o.refresh[s.cfg.refreshToken] = issued{real: time.Now(), tenant: s.snap.Load().now}
	}
	return o
}

// OAuth returns what the token endpoint did so far.
func (s *Service) OAuth() OAuthStats {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	return s.oauth.stats
}

// age is how old a token issued at i is: real time since then plus the
// tenant clock's advances since then, so that a token expires both while a
// slow run goes on and when the tenant's clock is moved a day.
func (s *Service) age(i issued) time.Duration {
	real := time.Since(i.real)
	advanced := time.Duration(s.snap.Load().now-i.tenant) * time.Second
	return real + max(advanced, 0)
}

// issuedTTL is how long an access token from the endpoint lives.
func (s *Service) issuedTTL() time.Duration {
	s.oauth.mu.Lock()
	d := s.oauth.ttl
	s.oauth.mu.Unlock()
	if d > 0 {
		return d
	}
	if d := s.cfg.faults.tokenTTL; d > 0 {
		return d
	}
	return defaultIssuedTTL
}

// SetTokenTTL changes the life of the access tokens the token endpoint
// issues, those already issued included (0 restores WithTokenTTL's or the
// default hour): a test makes a run outlive its token with it.
func (s *Service) SetTokenTTL(d time.Duration) {
	s.oauth.mu.Lock()
	s.oauth.ttl = max(d, 0)
	s.oauth.mu.Unlock()
}

// accessTokenState says whether tok is an access token the endpoint issued
// and, if so, whether it has expired.
func (s *Service) accessTokenState(tok string) (known, expired bool) {
	s.oauth.mu.Lock()
	i, ok := s.oauth.access[tok]
	s.oauth.mu.Unlock()
	if !ok {
		return false, false
	}
	return true, s.age(i) >= s.issuedTTL()
}

// writeOAuthError writes the token endpoint's refusal: the service's v3 error body
// with the OAuth 2.0 error code beside it (RFC 6749 section 5.2), so that
// both a client of the service and a generic OAuth client read it.
func writeOAuthError(w http.ResponseWriter, status, code int, name, oauthCode, message string) {
	var body struct {
		Response struct {
			Code    int    `json:"code"`
			Name    string `json:"name"`
			Message string `json:"message"`
		} `json:"response"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	body.Response.Code, body.Response.Name, body.Response.Message = code, name, message
	body.Error, body.ErrorDescription = oauthCode, message
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="oauth2"`)
	}
	w.WriteHeader(status)
	w.Write(b)
}

// serveOAuthToken is POST /api/v3/oauth2/token with
// grant_type=refresh_token. The client authenticates with client_id and
// client_secret in the form or with HTTP Basic authentication.
func (s *Service) serveOAuthToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, r, errMethodAllow(r.Method, "POST"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, codeMalformed, "MalformedParameterError", "invalid_request", "the body is not a form: "+err.Error())
		return
	}
	form := r.PostForm
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		id, secret = u, p
	}
	o := s.oauth
	if subtle.ConstantTimeCompare([]byte(id), []byte(s.cfg.clientID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(s.cfg.clientSecret)) != 1 {
		o.mu.Lock()
		o.stats.Refused++
		o.mu.Unlock()
		writeOAuthError(w, http.StatusUnauthorized, codeUnauthorized, "AuthenticationError", "invalid_client", "unknown client or wrong client secret")
		return
	}
	if gt := form.Get("grant_type"); gt != "refresh_token" {
		writeOAuthError(w, http.StatusBadRequest, codeInvalidParameter, "InvalidParameterError", "unsupported_grant_type",
			"grant_type "+strconvQuote(gt)+" is not supported; use refresh_token")
		return
	}
	rt := form.Get("refresh_token")
	now := issued{real: time.Now(), tenant: s.snap.Load().now}
	ttl := s.issuedTTL()
	o.mu.Lock()
	defer o.mu.Unlock()
	i, live := o.refresh[rt]
	switch {
	case rt == "":
		o.stats.Refused++
		writeOAuthError(w, http.StatusBadRequest, codeInvalidParameter, "InvalidParameterError", "invalid_request", "refresh_token is required")
		return
	case !live && o.used[rt]:
		o.stats.Refused++
		o.stats.Replays++
		writeOAuthError(w, http.StatusBadRequest, codeInvalidParameter, "InvalidGrantError", "invalid_grant",
			"the refresh token has already been used; refresh tokens are valid once")
		return
	case !live:
		o.stats.Refused++
		writeOAuthError(w, http.StatusBadRequest, codeInvalidParameter, "InvalidGrantError", "invalid_grant", "the refresh token is invalid")
		return
	case s.age(i) >= RefreshTokenTTL:
		delete(o.refresh, rt)
		o.stats.Refused++
		writeOAuthError(w, http.StatusBadRequest, codeInvalidParameter, "InvalidGrantError", "invalid_grant",
			"the refresh token has expired; authorize the client again")
		return
	}
	delete(o.refresh, rt)
	o.used[rt] = true
	access, refresh := newToken(), newToken()
	o.access[access] = now
	o.refresh[refresh] = now
	o.stats.Refreshes++
	b, _ := json.Marshal(struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		ExpiresIn    int64  `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
	}{access, "bearer", int64((ttl + time.Second - 1) / time.Second), refresh})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// newToken returns 32 random lowercase hex characters, the shape of the
// service's ids.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func strconvQuote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strconv.Quote(strings.ToValidUTF8(s, "?"))
}
