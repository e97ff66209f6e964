package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
)

// legacyPath is the legacy session interface below the legacy host.
var legacyPath = []string{"service", "webservices_mobile"}

// Session is a legacy session. Its ID (sid), Key (sky) and UID (uid) are
// the credentials of later legacy requests: a Session prints and logs
// without ID, Key and Token, and Key and Token are Secrets.
type Session struct {
	ID        int64           `json:"Id"`
	Key       Secret          `json:"Key"`
	UID       int64           `json:"UId"` // 0 for a public session
	FirstName string          `json:"FirstName"`
	LastName  string          `json:"LastName"`
	Token     Secret          `json:"Token"` // empty for a public session
	IsAdmin   bool            `json:"isAdmin"`
	IsAuthor  bool            `json:"isAuthor"`
	Extra     json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
func (s *Session) UnmarshalJSON(b []byte) error {
	type plain Session
	return unmarshalExtra(b, (*plain)(s), &s.Extra)
}

// Format prints the session without its credentials, for every verb.
func (s Session) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "extract.Session{ID: %s, Key: %s, UID: %d, FirstName: %q, LastName: %q, IsAdmin: %t, IsAuthor: %t}",
		redacted, redacted, s.UID, s.FirstName, s.LastName, s.IsAdmin, s.IsAuthor)
}

// LogValue logs the session without its credentials.
func (s Session) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", redacted), slog.String("key", redacted), slog.Int64("uid", s.UID),
		slog.Bool("isAdmin", s.IsAdmin))
}

// Ticket is a user ticket for single sign-on, passed to TicketSession.
type Ticket struct {
	Key       Secret          `json:"TicketKey"`
	CompanyID int64           `json:"CompanyId"`
	Extra     json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
func (t *Ticket) UnmarshalJSON(b []byte) error {
	type plain Ticket
	return unmarshalExtra(b, (*plain)(t), &t.Extra)
}

// AutoLoginRequest asks for a one-time auto-login token. With neither
// Username nor Email the token is for the admin session's own user; for
// another user LoginDir is required.
type AutoLoginRequest struct {
	LoginDir   string
	Username   string
	Email      string // used when the username is unknown
	EmailToken bool   // the service e-mails the token to the user
	URL        string // where the user lands after auto-login
}

// PublicSession creates a public session of a company site (POST
// session.ashx with login_dir only). Like every POST of the legacy
// interface, its parameters travel as a JSON body.
func (c *Client) PublicSession(ctx context.Context, loginDir string) (*Session, error) {
	if loginDir == "" {
		return nil, errors.New("extract: legacy public session: empty login_dir")
	}
	return c.createSession(ctx, "create public session", "legacy public access (login_dir)", sessionRequest{LoginDir: loginDir})
}

// PasswordSession creates a private session with a user name and password.
func (c *Client) PasswordSession(ctx context.Context, loginDir, username, password string) (*Session, error) {
	if loginDir == "" || username == "" || password == "" {
		return nil, errors.New("extract: legacy password session: login_dir, username and password are required")
	}
	return c.createSession(ctx, "create password session", "legacy username and password",
		sessionRequest{LoginDir: loginDir, Username: username, Password: password}, password)
}

// TokenSession creates a private session with a one-time auto-login token
// (from AutoLoginToken). The token is single use: the call is never
// retried once it may have reached the service.
func (c *Client) TokenSession(ctx context.Context, loginDir string, token Secret) (*Session, error) {
	if loginDir == "" || token == "" {
		return nil, errors.New("extract: legacy token session: login_dir and token are required")
	}
	return c.createSession(ctx, "create token session", "legacy auto-login token",
		sessionRequest{LoginDir: loginDir, Token: token.Reveal()}, token.Reveal())
}

// TicketSession creates a private session with a user ticket (from
// UserTicket; single use, valid minutes).
func (c *Client) TicketSession(ctx context.Context, loginDir string, ticket Secret) (*Session, error) {
	if loginDir == "" || ticket == "" {
		return nil, errors.New("extract: legacy ticket session: login_dir and ticket are required")
	}
	return c.createSession(ctx, "create ticket session", "legacy user ticket",
		sessionRequest{LoginDir: loginDir, Ticket: ticket.Reveal()}, ticket.Reveal())
}

// sessionRequest is the JSON body of session.ashx (A1, A2): the interface
// document says its endpoints take JSON bodies. The credentials are plain
// strings here (a Secret marshals as REDACTED); the body is never logged.
type sessionRequest struct {
	LoginDir string `json:"login_dir"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
	Ticket   string `json:"ticket,omitempty"`
}

// ticketRequest is the JSON body of userticket.ashx (A3) besides the
// session credentials, which travel in the query; userid is a JSON number,
// as the document types it integer.
type ticketRequest struct {
	UserID   int64  `json:"userid"`
	LoginDir string `json:"login_dir"`
}

func (c *Client) createSession(ctx context.Context, op, cred string, r sessionRequest, secrets ...string) (*Session, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("extract: legacy %s: encoding the request: %w", op, err)
	}
	info := reqInfo{iface: IfaceLegacy, op: op, method: http.MethodPost, body: body,
		contentType: "application/json", cred: credNone, credName: cred, secrets: secrets}
	var s Session
	if err := c.getJSON(ctx, info, under(c.legacy, append(legacyPath, "session.ashx")...), &s); err != nil {
		return nil, err
	}
	c.rememberSecrets(s.Key, s.Token)
	return &s, nil
}

// sessionParams are the credentials of a legacy request, and their
// values to scrub.
func sessionParams(s *Session) (url.Values, []string) {
	sid := strconv.FormatInt(s.ID, 10)
	return url.Values{"sid": {sid}, "sky": {string(s.Key)}, "uid": {strconv.FormatInt(s.UID, 10)}},
		[]string{sid, string(s.Key)}
}

// UserTicket issues a ticket for user userID (POST userticket.ashx; the
// session must be a Company Administrator's). The session credentials
// travel in the query string, as the interface wants (the client logs that
// URL only redacted); userid and login_dir in a JSON body. Not retried once it may have reached the service.
func (c *Client) UserTicket(ctx context.Context, admin *Session, loginDir string, userID int64) (*Ticket, error) {
	if admin == nil || loginDir == "" {
		return nil, errors.New("extract: legacy user ticket: a session and login_dir are required")
	}
	q, secrets := sessionParams(admin)
	body, err := json.Marshal(ticketRequest{UserID: userID, LoginDir: loginDir})
	if err != nil {
		return nil, fmt.Errorf("extract: legacy user ticket: encoding the request: %w", err)
	}
	u := under(c.legacy, append(legacyPath, "userticket.ashx")...)
	u.RawQuery = q.Encode()
	info := reqInfo{iface: IfaceLegacy, op: "create user ticket", object: strconv.FormatInt(userID, 10),
		method: http.MethodPost, body: body, contentType: "application/json",
		cred: credNone, credName: "legacy session (sid, sky, uid)", secrets: secrets}
	var t Ticket
	if err := c.getJSON(ctx, info, u, &t); err != nil {
		return nil, err
	}
	c.rememberSecrets(t.Key)
	return &t, nil
}

// AutoLoginToken issues a one-time auto-login token (GET token.ashx; for
// another user, the session must be a Company Administrator's). The
// session credentials travel in the query string, as the interface wants;
// the client logs that URL only redacted. Retried like a read unless
// EmailToken is set (a retry would e-mail the user twice).
func (c *Client) AutoLoginToken(ctx context.Context, admin *Session, r AutoLoginRequest) (Secret, error) {
	if admin == nil {
		return "", errors.New("extract: legacy auto-login token: a session is required")
	}
	q, secrets := sessionParams(admin)
	for k, v := range map[string]string{"login_dir": r.LoginDir, "username": r.Username, "email": r.Email, "url": r.URL} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if r.EmailToken {
		q.Set("email_token", "true")
	}
	u := under(c.legacy, append(legacyPath, "token.ashx")...)
	u.RawQuery = q.Encode()
	info := reqInfo{iface: IfaceLegacy, op: "create auto-login token", cred: credNone,
		credName: "legacy session (sid, sky, uid)", secrets: secrets, noRetry: r.EmailToken}
	var body struct {
		Token Secret `json:"Token"`
	}
	if err := c.getJSON(ctx, info, u, &body); err != nil {
		return "", err
	}
	if body.Token == "" {
		return "", fmt.Errorf("%s: response has no Token", info.withDefaults())
	}
	c.rememberSecrets(body.Token)
	return body.Token, nil
}

// rememberSecrets adds credentials the service handed out to the values
// scrubbed from the client's errors and logs.
func (c *Client) rememberSecrets(ss ...Secret) {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	for _, s := range ss {
		if len(s) >= 4 {
			c.seen = append(c.seen, s)
		}
	}
}
