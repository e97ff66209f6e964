package extract

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

const redacted = "REDACTED"

// sensitiveParams are query parameters that carry credentials: legacy
// session ids and keys, tickets, one-time tokens and the like.
var sensitiveParams = map[string]bool{
	"sid":          true,
	"sky":          true,
	"uid":          true,
	"token":        true,
	"ticket":       true,
	"password":     true,
	"access_token": true,
	"api_key":      true,
}

// RedactURL renders u for logs and errors: the values of sensitive query
// parameters (sid, sky, uid, token, ticket, password, access_token,
// api_key; names compared case-insensitively) are replaced by REDACTED and
// a user-info password is masked. The order and encoding of the other
// parameters are kept. A nil URL gives "".
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), redacted)
		}
	}
	if c.RawQuery != "" {
		parts := strings.Split(c.RawQuery, "&")
		for i, p := range parts {
			name, _, _ := strings.Cut(p, "=")
			if n, err := url.QueryUnescape(name); err == nil {
				name = n
			}
			if sensitiveParams[strings.ToLower(name)] {
				parts[i] = url.QueryEscape(name) + "=" + redacted
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	// Fragments never reach the server but may still hold tokens
	// (OAuth implicit flow); drop them.
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// Secret holds a credential the service gave out (a session key, a
// one-time token, a ticket, a webhook signature key). Every way of
// printing it (fmt verbs, slog, JSON and text marshalling) gives REDACTED,
// so it cannot leak through a log line, an error or a panic; Reveal
// returns the value for the one place that must send it.
type Secret string

// Reveal returns the credential itself.
func (s Secret) Reveal() string { return string(s) }

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// UnmarshalText keeps the value (Secret is decoded from responses).
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

func (s Secret) scrub(text string) string { return scrubValues(text, string(s)) }

// secret is the client's own name for Secret.
type secret = Secret
