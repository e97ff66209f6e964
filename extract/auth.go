package extract

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// bearer returns the bearer credential of a request and the generation
// of the access token it is (for refresh), or "" for none.
func (c *Client) bearer(ctx context.Context, info reqInfo) (string, uint64, error) {
	switch info.cred {
	case credAPI:
		return string(c.apiToken), 0, nil
	case credAccess:
	default:
		return "", 0, nil
	}
	c.tokenMu.Lock()
	tok, gen := c.token, c.tokenGen
	c.tokenMu.Unlock()
	if tok == "" && c.tokenSource != nil {
		if err := c.refreshToken(ctx, gen); err != nil {
			return "", 0, err
		}
		c.tokenMu.Lock()
		tok, gen = c.token, c.tokenGen
		c.tokenMu.Unlock()
	}
	return string(tok), gen, nil
}

// errTokenSource wraps a failure of the WithTokenSource function.
var errTokenSource = errors.New("access token source")

// refreshToken asks the token source for a new access token, unless the
// token has already changed since generation gen (another request
// refreshed it). Refreshes are serialised, so concurrent 401s for the same
// token ask the source once.
func (c *Client) refreshToken(ctx context.Context, gen uint64) error {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	if c.tokenGen != gen {
		return nil
	}
	tok, err := c.tokenSource(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s", errTokenSource, c.scrubLocked(err.Error()))
	}
	if tok == "" {
		return fmt.Errorf("%w: returned an empty token", errTokenSource)
	}
	c.token = secret(tok)
	c.tokenGen++
	c.seen = append(c.seen, c.token)
	c.log.DebugContext(ctx, "access token refreshed", "generation", c.tokenGen)
	return nil
}

// scrub replaces every credential value the client holds or ever held, and
// the extra ones given, by REDACTED.
func (c *Client) scrub(text string, extra ...string) string {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	return c.scrubLocked(text, extra...)
}

func (c *Client) scrubLocked(text string, extra ...string) string {
	for _, s := range c.seen {
		text = s.scrub(text)
	}
	for _, s := range extra {
		// Very short values (a numeric sid) would mangle unrelated text;
		// they are redacted in URLs and never sent in a message otherwise.
		if len(s) >= 4 {
			text = strings.ReplaceAll(text, s, redacted)
		}
	}
	return text
}
