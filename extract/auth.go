package extract

import (
	"context"
	"errors"
	"sync"
)

// AccessTokenSource gives the OAuth 2.0 access token of each request.
// Token is called before every request that carries the access token and
// must be cheap while the token is valid (refreshing it before it expires
// is the source's job); Refresh is called once when the service answered
// 401 to a request that carried rejected, and returns a new token (or the
// current one, when another caller already replaced rejected). Both are
// called concurrently. *OAuth is one.
type AccessTokenSource interface {
	Token(ctx context.Context) (string, error)
	Refresh(ctx context.Context, rejected string) (string, error)
}

var _ AccessTokenSource = (*OAuth)(nil)

// funcSource adapts WithTokenSource's function: it keeps the last token and
// asks the function again only when that one was refused.
type funcSource struct {
	fn  func(context.Context) (string, error)
	mu  sync.Mutex
	cur string
}

func (s *funcSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != "" {
		return s.cur, nil
	}
	return s.fetchLocked(ctx)
}

func (s *funcSource) Refresh(ctx context.Context, rejected string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != "" && s.cur != rejected {
		return s.cur, nil
	}
	return s.fetchLocked(ctx)
}

func (s *funcSource) fetchLocked(ctx context.Context) (string, error) {
	tok, err := s.fn(ctx)
	if err != nil {
		return "", err
	}
	if tok == "" {
		return "", errors.New("returned an empty token")
	}
	s.cur = tok
	return tok, nil
}

// bearer returns the bearer credential of a request, or "" for none.
func (c *Client) bearer(ctx context.Context, info reqInfo) (string, error) {
	switch info.cred {
	case credAPI:
		return string(c.apiToken), nil
	case credAccess:
	default:
		return "", nil
	}
	if c.tokens == nil {
		return string(c.token), nil
	}
	tok, err := c.tokens.Token(ctx)
	if err != nil {
		return "", c.tokenSourceError(err)
	}
	c.remember(tok)
	return tok, nil
}

// tokenSourceError is a failure of the access token source: its message
// without the client's credentials, its chain kept, so that a caller
// still tells a failed refresh (ErrRefreshFailed: refused, or failing
// after its attempts) from other failures.
func (c *Client) tokenSourceError(err error) error {
	return &wrapped{msg: "access token source: " + c.scrub(err.Error()), err: err}
}

// refreshToken asks the source for a token to replace rejected.
func (c *Client) refreshToken(ctx context.Context, rejected string) error {
	tok, err := c.tokens.Refresh(ctx, rejected)
	if err != nil {
		return c.tokenSourceError(err)
	}
	c.remember(tok)
	c.log.DebugContext(ctx, "access token replaced after a 401")
	return nil
}

// remember adds a credential value to those scrubbed from messages.
func (c *Client) remember(tok string) {
	if len(tok) < minScrubLen {
		return
	}
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	for _, s := range c.seen {
		if string(s) == tok {
			return
		}
	}
	c.seen = append(c.seen, secret(tok))
}

// minScrubLen: shorter values are not scrubbed from text (they would
// garble unrelated words); credentials never enter messages in the first
// place, redaction is the last guard.
const minScrubLen = 8

// scrub replaces every credential value the client holds or ever held, and
// the extra ones given, by REDACTED.
func (c *Client) scrub(text string, extra ...string) string {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	for _, s := range c.seen {
		text = s.scrub(text)
	}
	return scrubValues(text, extra...)
}
