package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sepipe/sepipe/service"
)

// reqStats counts what one logical request cost.
type reqStats struct {
	attempts int           // HTTP requests sent
	waited   time.Duration // time slept between attempts
}

func (s reqStats) retries() int { return max(s.attempts-1, 0) }

func (r reqInfo) String() string {
	var b strings.Builder
	if r.iface == "" {
		r.iface = IfaceReporting
	}
	b.WriteString(r.iface + " " + r.op)
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

// get fetches a reporting URL into buf; see do.
func (c *Client) get(ctx context.Context, info reqInfo, u *url.URL, buf *bytes.Buffer) (reqStats, error) {
	return c.do(ctx, info, u, buf)
}

// resetPrecision is how precisely a service announces when its window
// reopens: in whole seconds (Retry-After, X-RateLimit-Reset, RateLimit-Reset),
// each rounded its own way, so a request that slept the Retry-After a 429
// gave may find the announced reset up to a second later. That second is
// not counted against requests.max_wait: a sync right after a plan that
// spent the window, allowed to wait the window, failed on it ("in 0s, more
// than the 2m0s a request may wait").
const resetPrecision = time.Second

// do sends a request, retrying within the client's budget, and leaves a
// success body in buf. Every attempt first takes a slot of the shared
// budget (adaptive concurrency, then the adaptive rate).
//
// GET, HEAD and DELETE are retried on 429, 500/502/503/504, transport
// failures and 2xx bodies that are not valid JSON (cut short). A DELETE
// whose retry finds 404 after an earlier attempt may have reached the
// service counts as done. Other methods (POST creates, updates) are
// retried only on 429 and when the connection could not be made; every
// other failure after the request may have been sent is an
// *UncertainError, because the service has no idempotency key.
//
// A 401 to a request carrying the access token, when WithOAuth or
// WithTokenSource is set, replaces the token and retries once, whatever
// the method. A 429 whose Retry-After alone is longer than the retry
// budget's wait ends the request with ErrQuotaExhausted, even on its last
// attempt, and holds every request of the client back until then, as an
// announced quota would. Other 429s with Retry-After do not count against
// the attempts: they are retried while the waits fit in the budget's
// wait, and a request refused again waits twice as long as the time
// before (at least a second), however short the Retry-After, so that a
// service whose window is longer than its Retry-After says is outwaited
// rather than failed.
func (c *Client) do(ctx context.Context, info reqInfo, u *url.URL, buf *bytes.Buffer) (reqStats, error) {
	info = info.withDefaults()
	safe := !info.noRetry && (info.method == http.MethodGet || info.method == http.MethodHead || info.method == http.MethodDelete)
	var st reqStats
	refreshed := false
	mayHaveActed := false // an earlier attempt may have reached the service
	var sleptUntil time.Time
	lastPace := time.Duration(-1) // the wait after this request's last 429 with Retry-After; -1: none yet
	for {
		if ok, reset := c.budget.takeQuota(info.quota); !ok {
			wait := max(reset.Sub(c.now()), 0)
			if st.waited+wait > c.maxWait+resetPrecision {
				return st, quotaError(reset, "%s: %w: the window resets at %s, in %s, more than the %s a request may wait (requests.max_wait)",
					info, ErrQuotaExhausted, reset.UTC().Format(time.RFC3339), wait.Round(time.Second), c.maxWait)
			}
			c.log.WarnContext(ctx, "request quota used up; waiting for the window to reset",
				"interface", info.iface, "op", info.op, "object", info.object, "wait", wait.Round(time.Millisecond))
			if err := c.sleep(ctx, wait); err != nil {
				return st, context.Cause(ctx)
			}
			st.waited += wait
			continue
		}
		sl, paused, err := c.budget.acquire(ctx, sleptUntil)
		st.waited += paused
		if err != nil {
			if ctx.Err() != nil {
				return st, context.Cause(ctx)
			}
			return st, fmt.Errorf("%s: rate limiter: %w", info, err)
		}
		bearer, err := c.bearer(ctx, info)
		if err != nil {
			c.budget.release(sl, outcomeUnsent)
			if ctx.Err() != nil {
				return st, context.Cause(ctx)
			}
			return st, fmt.Errorf("%s: %w", info, err)
		}
		st.attempts++
		start := time.Now()
		resp, sent, err := c.attempt(ctx, info, u, bearer, buf)
		q := parseQuotaHeaders(resp.header, c.now())
		retryAfter, hintedWait := parseRetryAfter(resp.header.Get("Retry-After"), c.now())
		hint := "Retry-After"
		if resp.status == http.StatusTooManyRequests && !hintedWait && (!q.ok || q.remaining == 0) {
			// No Retry-After, but when the window resets, and nothing
			// (or nothing said) remains in it: the same hint. A 429 with
			// requests remaining (a burst refused) says nothing of a wait.
			now := c.now()
			if t, ok := headerReset(resp.header, now); ok {
				retryAfter, hintedWait, hint = max(t.Sub(now), 0), true, "the window's reset"
			}
		}
		if resp.status == http.StatusTooManyRequests && (!q.ok || q.limit == 0) {
			if m := parseQuotaMeta(buf.Bytes(), c.now()); m.ok {
				q = m // the body says more: the limit too
			}
		}
		switch {
		case err != nil || retryableStatus(resp.status) && resp.status != http.StatusTooManyRequests:
			c.budget.release(sl, outcomeFailed)
		case resp.status == http.StatusTooManyRequests:
			if lowered, rps := c.budget.throttled(sl, retryAfter, q); lowered {
				c.log.DebugContext(ctx, "request rate lowered after a 429", "interface", info.iface, "op", info.op,
					"rate", math.Round(rps*100)/100, "announced_limit", q.limit)
			}
		default:
			c.budget.release(sl, outcomeOK)
		}
		c.logAttempt(ctx, info, u, resp.status, st.attempts, time.Since(start), err)
		if c.observer != nil && sent {
			c.observer.ObserveRequest(info.iface, resp.status, st.attempts > 1, time.Since(start))
		}
		c.budget.observeQuota(q)
		if ctx.Err() != nil {
			return st, context.Cause(ctx)
		}

		var last error
		var wait time.Duration
		hinted := false
		var te *transportError
		switch {
		case err != nil && errors.As(err, &te) && retryableTransport(err):
			last = &wrapped{msg: fmt.Sprintf("%s: %s", info, c.scrub(err.Error(), info.secrets...)), err: err}
			if !safe && sent {
				return st, c.uncertain(info, true, 0, last)
			}
			mayHaveActed = mayHaveActed || sent
		case err != nil:
			if !safe && sent {
				return st, c.uncertain(info, true, resp.status, &wrapped{msg: fmt.Sprintf("%s: %s", info, c.scrub(err.Error(), info.secrets...)), err: err})
			}
			return st, &wrapped{msg: fmt.Sprintf("%s: %s", info, c.scrub(err.Error(), info.secrets...)), err: err}
		case resp.status >= 200 && resp.status < 300:
			if resp.status == http.StatusNoContent || info.method == http.MethodHead || info.decoderChecks ||
				(info.method == http.MethodDelete && buf.Len() == 0) || json.Valid(buf.Bytes()) {
				return st, nil
			}
			last = fmt.Errorf("%s: %w (%d bytes)", info, errMalformedBody, buf.Len())
			if !safe {
				return st, c.uncertain(info, true, resp.status, last)
			}
		case resp.status == http.StatusUnauthorized && info.cred == credAccess && c.tokens != nil && !refreshed:
			refreshed = true
			apiErr := c.apiError(info, resp.status, buf.Bytes())
			if err := c.refreshToken(ctx, bearer); err != nil {
				if ctx.Err() != nil {
					return st, context.Cause(ctx)
				}
				return st, fmt.Errorf("%w; refreshing it failed: %w", apiErr, err)
			}
			c.log.DebugContext(ctx, "retrying with a refreshed access token", "interface", info.iface, "op", info.op)
			continue // one extra attempt, outside the retry budget
		case resp.status == http.StatusNotFound && info.method == http.MethodDelete && mayHaveActed:
			// An earlier attempt deleted it.
			return st, nil
		default:
			apiErr := c.apiError(info, resp.status, buf.Bytes())
			if !retryableStatus(resp.status) {
				return st, apiErr
			}
			if !safe && resp.status != http.StatusTooManyRequests {
				return st, c.uncertain(info, true, resp.status, apiErr)
			}
			mayHaveActed = mayHaveActed || resp.status != http.StatusTooManyRequests
			last = apiErr
			wait, hinted = retryAfter, hintedWait
		}

		if hinted && resp.status == http.StatusTooManyRequests && wait > c.maxWait {
			// The service said when its window reopens, and that alone is
			// past what a request may wait: its quota is spent until
			// then, as when it announces one. Every request of the client
			// holds back until then (the quota), and this one's stream
			// can be read once it has passed.
			until := c.now().Add(wait)
			c.budget.observeQuota(quotaInfo{reset: until, ok: true})
			err := quotaError(until, "%w: the service asks to wait %s (%s), more than the %s a request may wait (requests.max_wait); "+
				"it can be read after %s, or with requests.max_wait above the wait: %w",
				ErrQuotaExhausted, wait.Round(time.Second), hint, c.maxWait, until.UTC().Format(time.RFC3339), last)
			return st, c.unsent(info, safe, err)
		}
		paced := hinted && resp.status == http.StatusTooManyRequests
		if paced {
			if lastPace >= 0 {
				// Refused again after waiting what it asked: its window
				// is longer than its Retry-After says. Each repeat waits
				// twice the last, at least a second.
				wait = max(wait, 2*lastPace, time.Second)
			}
			lastPace = wait
		}
		if st.attempts >= c.maxAttempts && !paced {
			err := fmt.Errorf("%w after %d attempts (waited %s): %w", ErrRetriesExhausted, st.attempts, st.waited, last)
			return st, c.unsent(info, safe, err)
		}
		if !hinted {
			wait = c.backoff(st.attempts)
		}
		if st.waited+wait > c.maxWait {
			err := fmt.Errorf("%w after %d attempts (waited %s, next wait %s would exceed %s): %w",
				ErrRetriesExhausted, st.attempts, st.waited, wait, c.maxWait, last)
			return st, c.unsent(info, safe, err)
		}
		sleptUntil = c.now().Add(wait)
		if hinted {
			c.budget.pause(sleptUntil)
		}
		c.log.WarnContext(ctx, "retrying "+info.iface+" request",
			"op", info.op, "object", info.object, "page", info.page,
			"attempt", st.attempts, "wait", wait, "retry_after", hinted, "cause", last.Error())
		if err := c.sleep(ctx, wait); err != nil {
			return st, context.Cause(ctx)
		}
		st.waited += wait
	}
}

// unsent is the error of a request that gives up instead of sending
// again: err, or, for a request that is not retried blindly, err in an
// *UncertainError whose Sent is false.
func (c *Client) unsent(info reqInfo, safe bool, err error) error {
	if safe {
		return err
	}
	return c.uncertain(info, false, 0, err)
}

// uncertain builds the error of a request that is not retried blindly.
func (c *Client) uncertain(info reqInfo, sent bool, status int, err error) *UncertainError {
	return &UncertainError{Interface: info.iface, Op: info.op, Object: info.object, Sent: sent, Status: status, Err: err}
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
// date in the past means no wait. It tolerates what services send beside
// the standard: a fraction of a second ("20.5"), a number past any int,
// a repeated header joined by a comma ("30, 30": the first). A wait, a
// date's included, is at most a day. ok is false when the header is absent or
// unreadable, or negative.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	const most = 24 * time.Hour // the cap of every wait, a date's too
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), most), true
	}
	if first, _, ok := strings.Cut(v, ","); ok {
		v = strings.TrimSpace(first)
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsNaN(n) {
		return 0, false
	}
	if n >= most.Seconds() {
		return most, true
	}
	return time.Duration(math.Ceil(n * float64(time.Second))), true
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
		"interface", info.iface,
		"op", info.op,
		"method", info.method,
		"url", service.RedactURL(u),
		"status", status,
		"attempt", attempt,
		"duration", d,
	}
	if info.params != "" {
		attrs = append(attrs, "parameters", info.params)
	}
	if err != nil {
		attrs = append(attrs, "error", c.scrub(err.Error(), info.secrets...))
	}
	c.log.DebugContext(ctx, info.iface+" request", attrs...)
}

// apiError decodes an error body of either service style.
func (c *Client) apiError(info reqInfo, status int, body []byte) *APIError {
	info = info.withDefaults()
	e := &APIError{Interface: info.iface, Op: info.op, Object: info.object, Page: info.page, Status: status}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		e.Credential = info.credName
	}
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
		b := c.scrub(string(bytes.TrimSpace(body)), info.secrets...)
		if len(b) > 200 {
			b = b[:200]
		}
		e.Message = strings.ToValidUTF8(b, "?")
	}
	// A service's message can be megabytes: an error quotes at most
	// maxQuoted bytes of it (scrubbed before the cut).
	e.Message = truncate(c.scrub(e.Message, info.secrets...), maxQuoted)
	e.Name = truncate(c.scrub(e.Name, info.secrets...), 200)
	e.Title = truncate(c.scrub(e.Title, info.secrets...), 200)
	e.Type = truncate(e.Type, 200)
	return e
}

// maxQuoted is the most of a service's message an error quotes.
const maxQuoted = 1024

// looseInt reads an error code as the service may send it (3004, "3004",
// 3004.0: service.LooseInt); anything else gives 0.
func looseInt(raw json.RawMessage) int {
	n, ok := service.LooseInt(raw)
	if !ok || int64(int(n)) != n {
		return 0
	}
	return int(n)
}
