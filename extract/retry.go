package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// reqStats counts what one logical request cost.
type reqStats struct {
	attempts int           // HTTP requests sent
	waited   time.Duration // time slept between attempts
}

func (s reqStats) retries() int { return max(s.attempts-1, 0) }

func (r reqInfo) String() string {
	var b strings.Builder
	b.WriteString("reporting " + r.op)
	if r.object != "" {
		b.WriteString(" " + strconv.Quote(r.object))
	}
	if r.page > 0 {
		fmt.Fprintf(&b, " page %d", r.page)
	}
	return b.String()
}

// retryableStatus: 429 and the transient server errors. 400, 401, 403,
// 404, 405, 409 and everything else are final.
func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// get fetches u into buf, retrying within the client's budget. Every
// attempt first waits on the shared limiter. A 2xx body that is not valid
// JSON (cut short) is retried like a dropped connection. On success buf
// holds the body.
func (c *Client) get(ctx context.Context, info reqInfo, u *url.URL, buf *bytes.Buffer) (reqStats, error) {
	var st reqStats
	for {
		if err := c.limiter.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return st, context.Cause(ctx)
			}
			return st, fmt.Errorf("%s: rate limiter: %w", info, err)
		}
		st.attempts++
		start := time.Now()
		resp, err := c.attempt(ctx, u, buf)
		c.logAttempt(ctx, info, u, resp.status, st.attempts, time.Since(start), err)
		if ctx.Err() != nil {
			return st, context.Cause(ctx)
		}

		var last error
		var wait time.Duration
		hinted := false
		var te *transportError
		switch {
		case err != nil && errors.As(err, &te) && retryableTransport(err):
			last = &wrapped{msg: fmt.Sprintf("%s: %s", info, c.token.scrub(err.Error())), err: err}
		case err != nil:
			return st, &wrapped{msg: fmt.Sprintf("%s: %s", info, c.token.scrub(err.Error())), err: err}
		case resp.status >= 200 && resp.status < 300:
			if json.Valid(buf.Bytes()) {
				return st, nil
			}
			last = fmt.Errorf("%s: %w (%d bytes)", info, errMalformedBody, buf.Len())
		default:
			apiErr := c.apiError(info, resp.status, buf.Bytes())
			if !retryableStatus(resp.status) {
				return st, apiErr
			}
			last = apiErr
			wait, hinted = parseRetryAfter(resp.header.Get("Retry-After"), c.now())
		}

		if st.attempts >= c.maxAttempts {
			return st, fmt.Errorf("%w after %d attempts (waited %s): %w", ErrRetriesExhausted, st.attempts, st.waited, last)
		}
		if !hinted {
			wait = c.backoff(st.attempts)
		}
		if st.waited+wait > c.maxWait {
			return st, fmt.Errorf("%w after %d attempts (waited %s, next wait %s would exceed %s): %w",
				ErrRetriesExhausted, st.attempts, st.waited, wait, c.maxWait, last)
		}
		c.log.WarnContext(ctx, "retrying reporting request",
			"op", info.op, "object", info.object, "page", info.page,
			"attempt", st.attempts, "wait", wait, "retry_after", hinted, "cause", last.Error())
		if err := c.sleep(ctx, wait); err != nil {
			return st, context.Cause(ctx)
		}
		st.waited += wait
	}
}

// errMalformedBody: a success body that is not JSON, usually cut short.
var errMalformedBody = errors.New("malformed or truncated JSON body")

// wrapped gives an error a scrubbed message while keeping its chain.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// backoff is exponential with full jitter: uniform in [0, min(cap, base*2^(attempt-1))].
func (c *Client) backoff(attempt int) time.Duration {
	d := c.backoffCap
	if shift := attempt - 1; shift < 32 {
		if e := c.backoffBase << shift; e > 0 && e < d {
			d = e
		}
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date. A
// date in the past means no wait. ok is false when the header is absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(24*time.Hour/time.Second) {
			n = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) logAttempt(ctx context.Context, info reqInfo, u *url.URL, status, attempt int, d time.Duration, err error) {
	if !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []any{
		"method", http.MethodGet,
		"url", RedactURL(u),
		"status", status,
		"attempt", attempt,
		"duration", d,
	}
	if info.params != "" {
		attrs = append(attrs, "parameters", info.params)
	}
	if err != nil {
		attrs = append(attrs, "error", c.token.scrub(err.Error()))
	}
	c.log.DebugContext(ctx, "reporting request", attrs...)
}

// apiError decodes an error body of either service style.
func (c *Client) apiError(info reqInfo, status int, body []byte) *APIError {
	e := &APIError{Interface: "reporting", Op: info.op, Object: info.object, Page: info.page, Status: status}
	var v3 struct {
		Response *struct {
			Code    json.RawMessage `json:"code"`
			Name    string          `json:"name"`
			Message string          `json:"message"`
		} `json:"response"`
	}
	var v4 struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Meta   []struct {
			Name     string `json:"name"`
			Reason   string `json:"reason"`
			Category string `json:"category"`
		} `json:"meta"`
	}
	switch {
	case json.Unmarshal(body, &v3) == nil && v3.Response != nil &&
		(v3.Response.Name != "" || v3.Response.Message != "" || len(v3.Response.Code) > 0):
		e.Code = looseInt(v3.Response.Code)
		e.Name = v3.Response.Name
		e.Message = v3.Response.Message
	case json.Unmarshal(body, &v4) == nil && (v4.Type != "" || v4.Title != "" || v4.Detail != ""):
		e.Type, e.Title = v4.Type, v4.Title
		msg := v4.Detail
		for _, m := range v4.Meta {
			part := strings.TrimSpace(strings.Join([]string{m.Name, m.Reason}, ": "))
			if m.Category != "" {
				part += " (" + m.Category + ")"
			}
			if msg != "" {
				msg += "; "
			}
			msg += part
		}
		e.Message = msg
	default:
		// Scrub before cutting, so no prefix of the token survives the cut.
		b := c.token.scrub(string(bytes.TrimSpace(body)))
		if len(b) > 200 {
			b = b[:200]
		}
		e.Message = strings.ToValidUTF8(b, "?")
	}
	e.Message = c.token.scrub(e.Message)
	e.Name = c.token.scrub(e.Name)
	e.Title = c.token.scrub(e.Title)
	return e
}

// looseInt reads 3004 or "3004"; anything else gives 0.
func looseInt(raw json.RawMessage) int {
	s := strings.Trim(string(raw), `" `)
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
