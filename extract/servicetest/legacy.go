package servicetest

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The legacy session interface (section A): session.ashx, userticket.ashx
// and token.ashx under LegacyPath.

// LegacyPath is the path prefix of the legacy session interface.
const LegacyPath = "/service/webservices_mobile"

// Known identities of the fake tenant.
const (
	DefaultLoginDir  = "demo"           // company site name (login_dir)
	DefaultPassword  = "secret"         // password of AdminUsername and UserUsername
	DefaultAPIToken  = "demo-api-token" // developer API token (webhooks, admin)
	CompanyID        = 4242             // CompanyId of the tenant's company
	AdminUsername    = "admin"          // Company Administrator, UId 1
	UserUsername     = "user1"          // plain user, UId 2
	TicketLifetime   = 5 * time.Minute  // validity of a user ticket
	maxLegacyBodyLen = 64 << 10
)

// WithLoginDir sets the company site name, login_dir (default "demo").
func WithLoginDir(dir string) Option { return func(c *config) { c.loginDir = dir } }

// WithPassword sets the password of both known users (default "secret").
func WithPassword(pw string) Option { return func(c *config) { c.password = pw } }

// WithSSOOnly makes the company use SSO exclusively: only Company
// Administrators may create sessions with a password, public sessions are
// refused, and ticket and token sessions (the SSO path) still work.
func WithSSOOnly(on bool) Option { return func(c *config) { c.ssoOnly = on } }

// LoginDir returns the company site name (login_dir).
func (s *Service) LoginDir() string { return s.cfg.loginDir }

// Password returns the password of the known users.
func (s *Service) Password() string { return s.cfg.password }

// legacyUser is a user who can sign in to the legacy interface.
type legacyUser struct {
	uid         int64
	username    string
	first, last string
	email       string
	admin       bool
}

var legacyUsers = []*legacyUser{
	{uid: 1, username: AdminUsername, first: "Ada", last: "Admin", email: "admin@demo.example", admin: true},
	{uid: 2, username: UserUsername, first: "Uma", last: "User", email: "user1@demo.example"},
}

func legacyUserByName(name string) *legacyUser {
	for _, u := range legacyUsers {
		if strings.EqualFold(u.username, name) {
			return u
		}
	}
	return nil
}

func legacyUserByEmail(email string) *legacyUser {
	for _, u := range legacyUsers {
		if strings.EqualFold(u.email, email) {
			return u
		}
	}
	return nil
}

func legacyUserByID(uid int64) *legacyUser {
	for _, u := range legacyUsers {
		if u.uid == uid {
			return u
		}
	}
	return nil
}

// session is a legacy session; user is nil for a public session.
type session struct {
	id      int64
	key     string
	user    *legacyUser
	created time.Time // wall clock
}

// oneTime is an auto-login token or a user ticket: it signs user in once.
type oneTime struct {
	user    *legacyUser
	expires time.Time // zero: never
	used    bool
	url     string // token.ashx url parameter (kept, not used)
}

type sessionBody struct {
	ID        int64  `json:"Id"`
	Key       string `json:"Key"`
	UID       int64  `json:"UId"`
	FirstName string `json:"FirstName"`
	LastName  string `json:"LastName"`
	Token     string `json:"Token"`
	IsAdmin   bool   `json:"isAdmin"`
	IsAuthor  bool   `json:"isAuthor"`
}

func (s *Service) serveLegacy(w http.ResponseWriter, r *http.Request) {
	var allow string
	var serve func(url.Values) (any, *apiError)
	switch strings.ToLower(strings.TrimPrefix(r.URL.Path, LegacyPath)) {
	case "/session.ashx":
		allow, serve = "POST", s.createSession
	case "/userticket.ashx":
		allow, serve = "POST", s.createTicket
	case "/token.ashx":
		allow, serve = "GET, HEAD", s.createToken
	default:
		writeError(w, r, errNotFound("no resource at path %q", r.URL.Path))
		return
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		writeError(w, r, errMethodAllow(r.Method, allow))
		return
	}
	p, err := legacyParams(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	body, err := serve(p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, r, body)
}

// legacyBodyParams are the parameters of session.ashx and userticket.ashx
// (A1 to A3) a JSON body may carry, each true when the document types it
// integer (a JSON number then), false for a string.
var legacyBodyParams = map[string]bool{
	"login_dir": false, "username": false, "password": false, "token": false, "ticket": false,
	"userid": true,
}

// legacyParams gathers a request's parameters as the document has them
// travel: the query string, and for a POST an application/json body (the
// document: "for the endpoints below, JSON bodies are used"), whose values
// come first when a name is in both. The body is an object; the names of
// legacyBodyParams in it must be strings, or integral numbers where the
// document types them integer; null is absent and other names are ignored.
// The session credentials sid, sky and uid are read from the query only
// (the document: they "travel as URL query parameters"), so a body's are
// ignored. Other body types, a form body among them, are not read.
func legacyParams(r *http.Request) (url.Values, *apiError) {
	p := url.Values{}
	if r.Body != nil && r.Method == http.MethodPost {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt == "application/json" {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxLegacyBodyLen+1))
			if err != nil || len(b) > maxLegacyBodyLen {
				return nil, errMalformed("cannot read the JSON body")
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil || m == nil {
				return nil, errMalformed("the body is not a JSON object")
			}
			for k, raw := range m {
				integer, ok := legacyBodyParams[k]
				if !ok || string(raw) == "null" {
					continue
				}
				if integer {
					n, ok := parseInteger(raw)
					if !ok {
						return nil, errInvalid("%s must be an integer (a JSON number), got %.40s", k, raw)
					}
					p.Set(k, strconv.FormatInt(n, 10))
					continue
				}
				var v string
				if err := json.Unmarshal(raw, &v); err != nil {
					return nil, errInvalid("%s must be a string, got %s", k, jsonValueKind(raw))
				}
				p.Set(k, v)
			}
		}
	}
	for k, vs := range r.URL.Query() {
		p[k] = append(p[k], vs...)
	}
	return p, nil
}

// createSession answers session.ashx (A1, A2).
func (s *Service) createSession(p url.Values) (any, *apiError) {
	l := s.live
	dir := p.Get("login_dir")
	if dir == "" {
		return nil, errInvalid("login_dir is required")
	}
	if !strings.EqualFold(dir, s.cfg.loginDir) {
		return nil, errNotFound("unknown company site %q", dir)
	}
	username, password := p.Get("username"), p.Get("password")
	token, ticket := p.Get("token"), p.Get("ticket")
	modes := 0
	for _, set := range []bool{username != "" || password != "", token != "", ticket != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return nil, errInvalid("give one of username and password, token or ticket")
	}
	var user *legacyUser
	switch {
	case ticket != "":
		u, err := l.redeem(l.tickets, ticket, "ticket")
		if err != nil {
			return nil, err
		}
		user = u
	case token != "":
		u, err := l.redeem(l.tokens, token, "token")
		if err != nil {
			return nil, err
		}
		user = u
	case username != "" || password != "":
		if username == "" {
			return nil, errInvalid("username is required with password")
		}
		if password == "" {
			return nil, errInvalid("password is required with username")
		}
		user = legacyUserByName(username)
		if user == nil || password != s.cfg.password {
			return nil, errUnauthorized("unknown user or wrong password")
		}
		if s.cfg.ssoOnly && !user.admin {
			return nil, errForbidden("the company uses SSO exclusively: only Company Administrators can sign in with a password")
		}
	default:
		if s.cfg.ssoOnly {
			return nil, errForbidden("the company uses SSO exclusively: public sessions are not available")
		}
	}
	sess := &session{key: l.hex32(), user: user, created: time.Now()}
	body := sessionBody{Key: sess.key}
	if user != nil {
		body.UID, body.FirstName, body.LastName = user.uid, user.first, user.last
		body.Token = l.hex32()
		body.IsAdmin, body.IsAuthor = user.admin, user.admin
	}
	l.mu.Lock()
	sess.id = l.nextSession
	l.nextSession++
	l.sessions[sess.id] = sess
	l.mu.Unlock()
	body.ID = sess.id
	return body, nil
}

// redeem uses the one-time credential key of m (tokens or tickets).
func (l *live) redeem(m map[string]*oneTime, key, what string) (*legacyUser, *apiError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ot, ok := m[key]
	switch {
	case !ok:
		return nil, errUnauthorized("unknown %s", what)
	case ot.used:
		return nil, errUnauthorized("the %s has already been used", what)
	case !ot.expires.IsZero() && time.Now().After(ot.expires):
		return nil, errUnauthorized("the %s has expired", what)
	}
	ot.used = true
	return ot.user, nil
}

// checkSession authenticates the sid, sky and uid parameters.
func (s *Service) checkSession(p url.Values) (*session, *apiError) {
	sid, sky, uid := p.Get("sid"), p.Get("sky"), p.Get("uid")
	if sid == "" || sky == "" || uid == "" {
		return nil, errUnauthorized("sid, sky and uid are required")
	}
	id, err1 := strconv.ParseInt(sid, 10, 64)
	u, err2 := strconv.ParseInt(uid, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, errUnauthorized("invalid session credentials")
	}
	l := s.live
	l.mu.Lock()
	sess := l.sessions[id]
	l.mu.Unlock()
	if sess == nil || sess.key != sky {
		return nil, errUnauthorized("invalid session credentials")
	}
	if (sess.user == nil && u != 0) || (sess.user != nil && sess.user.uid != u) {
		return nil, errUnauthorized("uid does not belong to the session")
	}
	if ttl := s.sessionTTL(); ttl > 0 && time.Since(sess.created) > ttl {
		return nil, errUnauthorized("the session has expired")
	}
	return sess, nil
}

func requireAdmin(sess *session, what string) *apiError {
	if sess.user == nil || !sess.user.admin {
		return errForbidden("only Company Administrators can generate %s", what)
	}
	return nil
}

func (s *Service) checkLoginDir(p url.Values) *apiError {
	dir := p.Get("login_dir")
	if dir == "" {
		return errInvalid("login_dir is required")
	}
	if !strings.EqualFold(dir, s.cfg.loginDir) {
		return errNotFound("unknown company site %q", dir)
	}
	return nil
}

// createTicket answers userticket.ashx (A3).
func (s *Service) createTicket(p url.Values) (any, *apiError) {
	sess, err := s.checkSession(p)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(sess, "user tickets"); err != nil {
		return nil, err
	}
	if err := s.checkLoginDir(p); err != nil {
		return nil, err
	}
	v := p.Get("userid")
	if v == "" {
		return nil, errInvalid("userid is required")
	}
	id, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		return nil, errInvalid("userid must be an integer, got %q", v)
	}
	user := legacyUserByID(id)
	if user == nil {
		return nil, errNotFound("unknown user %d", id)
	}
	l := s.live
	key := l.hex32()
	l.mu.Lock()
	l.tickets[key] = &oneTime{user: user, expires: time.Now().Add(TicketLifetime)}
	l.mu.Unlock()
	return struct {
		TicketKey string `json:"TicketKey"`
		CompanyID int    `json:"CompanyId"`
	}{key, CompanyID}, nil
}

// createToken answers token.ashx (A4).
func (s *Service) createToken(p url.Values) (any, *apiError) {
	sess, err := s.checkSession(p)
	if err != nil {
		return nil, err
	}
	if sess.user == nil {
		return nil, errForbidden("a public session cannot generate auto-login tokens")
	}
	if v := p.Get("email_token"); v != "" {
		if _, perr := strconv.ParseBool(v); perr != nil {
			return nil, errInvalid("email_token must be true or false, got %q", v)
		}
	}
	target := sess.user
	name, email := p.Get("username"), p.Get("email")
	if name != "" || email != "" {
		var u *legacyUser
		if name != "" {
			u = legacyUserByName(name)
		} else {
			u = legacyUserByEmail(email)
		}
		if u != sess.user {
			if err := requireAdmin(sess, "auto-login tokens for other users"); err != nil {
				return nil, err
			}
			if err := s.checkLoginDir(p); err != nil {
				return nil, err
			}
			if u == nil {
				if name != "" {
					return nil, errNotFound("unknown user %q", name)
				}
				return nil, errNotFound("no user with e-mail %q", email)
			}
		}
		target = u
	}
	l := s.live
	tok := l.hex32()
	l.mu.Lock()
	l.tokens[tok] = &oneTime{user: target, url: p.Get("url")}
	l.mu.Unlock()
	return struct {
		Token string `json:"Token"`
	}{tok}, nil
}
