package service

import (
	"net/url"
	"strings"
)

// Redacted replaces a credential in logs and errors.
const Redacted = "REDACTED"

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
			c.User = url.UserPassword(c.User.Username(), Redacted)
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
				parts[i] = url.QueryEscape(name) + "=" + Redacted
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	// Fragments never reach the server but may still hold tokens
	// (OAuth implicit flow); drop them.
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}
