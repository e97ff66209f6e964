package extract

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The request quota: a service may limit requests per time window and
// announce the limit, what is left and when the window resets. The client
// reads it wherever it is given (X-RateLimit-Limit/-Remaining/-Reset, the
// IETF RateLimit-Limit/-Remaining/-Reset fields, their combined
// "RateLimit: limit=…, remaining=…, reset=…" form and the later drafts'
// structured `RateLimit: "policy";r=…;t=…` with RateLimit-Policy's q=,
// and a JSON error body's meta.rateLimit {limit, remaining, reset}), counts every request it sends
// against it, and sends none past it: a request that would exceed it waits
// for the window to reset when that is within the retry budget's wait, and
// fails with ErrQuotaExhausted otherwise. A paged read that knows how many
// pages are left reserves them (reserveQuota) and fails at once, before
// spending anything more, when the quota cannot cover them.

// Quota is the client's view of the service's announced request quota.
type Quota struct {
	Known     bool      // the service announced a quota that is in force
	Limit     int       // requests per window (0 if not announced)
	Remaining int       // requests left in the window, counting those sepipe sent since
	Reset     time.Time // when the window resets
	Reserved  int       // requests reserved by reads under way
}

// Holds reports whether n requests fit one of the quota's windows: always
// when no quota (or no limit) is known. A read that does not fit cannot be
// finished within a window by any run.
func (q Quota) Holds(n int) bool { return !q.Known || q.Limit <= 0 || n <= q.Limit }

// ExceedsAdvice is what to do about a read that needs more requests than
// the quota allows in a whole window (QuotaError.Exceeds): every message
// about one ends with it.
const ExceedsAdvice = "raise requests.max_wait above the window's length and the read waits for the quota to reset"

// quotaReservation is requests set aside for the rest of one read.
type quotaReservation struct {
	n int // guarded by budget.mu
}

// quotaInfo is one response's announcement; ok is false when it has none.
type quotaInfo struct {
	limit, remaining int
	reset            time.Time
	ok               bool
}

// parseQuotaHeaders reads the announcement of a response's headers.
func parseQuotaHeaders(h http.Header, now time.Time) quotaInfo {
	if h == nil {
		return quotaInfo{}
	}
	rem, remOK := headerInt(h, "X-RateLimit-Remaining", "RateLimit-Remaining")
	lim, _ := headerInt(h, "X-RateLimit-Limit", "RateLimit-Limit")
	reset, resetOK := headerReset(h, now)
	if v := h.Get("RateLimit"); v != "" && !remOK {
		if f, ok := parseRateLimitField(v, now); ok {
			rem, remOK = f.remaining, true
			if f.resetOK {
				reset, resetOK = f.reset, true
			}
			if f.limit >= 0 {
				lim = f.limit
			} else if q, ok := policyQuota(h.Get("RateLimit-Policy"), f.policy); ok && lim == 0 {
				lim = q
			}
		}
	}
	if !remOK || !resetOK {
		return quotaInfo{}
	}
	return quotaInfo{limit: lim, remaining: rem, reset: reset, ok: true}
}

// headerReset reads when the window resets from X-RateLimit-Reset or
// RateLimit-Reset, the first that parses.
func headerReset(h http.Header, now time.Time) (time.Time, bool) {
	for _, name := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		if v := h.Get(name); v != "" {
			if t, ok := parseReset(v, now); ok {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// rateLimitItem is one policy's state in a RateLimit field.
type rateLimitItem struct {
	policy           string // its name, "" when the field gives none
	limit, remaining int    // limit -1: not given
	reset            time.Time
	resetOK          bool
}

// parseRateLimitField reads the combined RateLimit field in both of the
// IETF draft's forms: "limit=100, remaining=50, reset=30" (one policy,
// its parameters as members) and the structured form of later drafts,
// `"default";r=50;t=30` (a member a policy: r remaining, t seconds to
// its reset), of which it takes the policy with the fewest requests
// remaining: the one that binds.
func parseRateLimitField(v string, now time.Time) (rateLimitItem, bool) {
	best, found := rateLimitItem{limit: -1}, false
	flat := rateLimitItem{limit: -1} // the older form's parameters, across members
	flatOK := false
	for member := range strings.SplitSeq(v, ",") {
		it, ok := rateLimitItem{limit: -1}, false
		for i, param := range strings.Split(member, ";") {
			param = strings.TrimSpace(param)
			k, val, hasValue := strings.Cut(param, "=")
			if !hasValue {
				if i == 0 {
					it.policy = strings.Trim(param, `"`)
				}
				continue
			}
			n, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "limit":
				flat.limit = int(min(n, 1<<31))
			case "remaining":
				flat.remaining, flatOK = int(min(n, 1<<31)), true
			case "reset":
				flat.reset, flat.resetOK = secondsFrom(now, n), true
			case "r":
				it.remaining, ok = int(min(n, 1<<31)), true
				flat.remaining, flatOK = it.remaining, true // "r=0, t=30" too
			case "t":
				it.reset, it.resetOK = secondsFrom(now, n), true
				flat.reset, flat.resetOK = it.reset, true
			}
		}
		if ok && it.resetOK && (!found || it.remaining < best.remaining) {
			best, found = it, true
		}
	}
	if found {
		return best, true
	}
	return flat, flatOK // one policy, its parameters as members
}

// policyQuota reads the quota (requests a window) of the named policy,
// or of the first when name is "", from a RateLimit-Policy field:
// `"default";q=100;w=60`, or the older "100;w=60".
func policyQuota(v, name string) (int, bool) {
	for member := range strings.SplitSeq(v, ",") {
		params := strings.Split(member, ";")
		head := strings.TrimSpace(params[0])
		if n, err := strconv.ParseInt(head, 10, 64); err == nil && n >= 0 {
			return int(min(n, 1<<31)), true // the older form: the quota first
		}
		if name != "" && strings.Trim(head, `"`) != name {
			continue
		}
		for _, param := range params[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64); err == nil && n >= 0 {
					return int(min(n, 1<<31)), true
				}
			}
		}
	}
	return 0, false
}

// headerInt reads the first of names that holds a non-negative integer
// (a structured value such as "600, 600;w=3600" gives its first number).
func headerInt(h http.Header, names ...string) (int, bool) {
	for _, name := range names {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		if i := strings.IndexAny(v, ",;"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return int(min(n, 1<<31)), true
		}
	}
	return 0, false
}

// parseReset reads a reset as Unix seconds (large numbers), seconds from
// now (small ones), an HTTP date or an RFC 3339 time. Resets more than a
// day away are capped to a day.
func parseReset(v string, now time.Time) (time.Time, bool) {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	t, ok := resetTime(v, now)
	if i := strings.IndexAny(v, ",;"); !ok && i >= 0 {
		t, ok = resetTime(strings.Trim(strings.TrimSpace(v[:i]), `"`), now) // "30, 3600": the first window's
	}
	if !ok {
		return time.Time{}, false
	}
	if day := now.Add(24 * time.Hour); t.After(day) {
		t = day
	}
	return t, true
}

// resetTime reads one reset (parseReset's forms), uncapped.
func resetTime(v string, now time.Time) (time.Time, bool) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case n < 0 || math.IsNaN(n) || math.IsInf(n, 0):
			return time.Time{}, false
		case n > 1e12: // Unix milliseconds
			return time.UnixMilli(int64(min(n, 1e15))), true
		case n > 1e9: // Unix seconds
			return time.Unix(int64(n), 0), true
		}
		return secondsFrom(now, n), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// secondsFrom is now and n seconds (at most a day, the cap of every wait).
func secondsFrom(now time.Time, n float64) time.Time {
	return now.Add(time.Duration(min(n, 86400) * float64(time.Second)))
}

// parseQuotaMeta reads meta.rateLimit (or meta.ratelimit, meta.quota) of a
// JSON body: numbers or numeric strings.
func parseQuotaMeta(body []byte, now time.Time) quotaInfo {
	var doc struct {
		Meta map[string]json.RawMessage `json:"meta"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Meta == nil {
		return quotaInfo{}
	}
	for _, key := range []string{"rateLimit", "ratelimit", "rate_limit", "quota"} {
		raw, ok := doc.Meta[key]
		if !ok {
			continue
		}
		var m struct {
			Limit     json.RawMessage `json:"limit"`
			Remaining json.RawMessage `json:"remaining"`
			Reset     json.RawMessage `json:"reset"`
		}
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		rem, err := strconv.ParseInt(strings.Trim(string(m.Remaining), `" `), 10, 64)
		if err != nil || rem < 0 {
			continue
		}
		reset, ok := parseReset(string(m.Reset), now)
		if !ok {
			continue
		}
		lim, _ := strconv.ParseInt(strings.Trim(string(m.Limit), `" `), 10, 64)
		return quotaInfo{limit: int(min(max(lim, 0), 1<<31)), remaining: int(min(rem, 1<<31)), reset: reset, ok: true}
	}
	return quotaInfo{}
}

// observeQuota takes a response's announcement. A later reset starts a new
// window; within a window the lower count wins (sepipe counts what it
// sent, another client of the tenant may have spent more).
func (b *budget) observeQuota(q quotaInfo) {
	if !q.ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &b.quota
	if !s.Known || q.reset.After(s.Reset.Add(time.Second)) {
		s.Known, s.Limit, s.Remaining, s.Reset, s.Reserved = true, q.limit, q.remaining, q.reset, 0
		return
	}
	s.Remaining = min(s.Remaining, q.remaining)
	if q.limit > 0 {
		s.Limit = q.limit
	}
}

// expireQuota forgets a window that has reset. b.mu is held.
func (b *budget) expireQuota(now time.Time) {
	if b.quota.Known && !now.Before(b.quota.Reset) {
		b.quota = Quota{}
	}
}

// takeQuota counts one request against the quota (from res when it holds
// a reservation). When the quota is used up it returns ok false and when
// the window resets.
func (b *budget) takeQuota(res *quotaReservation) (ok bool, reset time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireQuota(b.now())
	s := &b.quota
	if res != nil && res.n > 0 {
		res.n--
		if s.Known {
			s.Reserved = max(s.Reserved-1, 0)
			s.Remaining--
		}
		return true, time.Time{}
	}
	if !s.Known {
		return true, time.Time{}
	}
	if s.Remaining-s.Reserved < 1 {
		return false, s.Reset
	}
	s.Remaining--
	return true, time.Time{}
}

// reserveQuota sets n requests aside for the rest of a read. When the
// quota cannot cover them it returns ok false, with the quota as it was
// (what is free, the limit, when the window resets); the caller decides
// whether to wait or give up.
func (b *budget) reserveQuota(n int) (res *quotaReservation, ok bool, q Quota) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireQuota(b.now())
	s := &b.quota
	res = &quotaReservation{}
	if !s.Known || n <= 0 {
		return res, true, *s
	}
	q = *s
	if n > s.Remaining-s.Reserved {
		return res, false, q
	}
	res.n = n
	s.Reserved += n
	return res, true, q
}

// reservePages sets the request quota aside for the pages a read has
// left (res, released when the read ends). When the quota cannot cover
// them and its window does not reset within the wait a request may take,
// it fails with a *QuotaError before the read spends more; when the reset
// is that near, the pages wait for it. The error says when the pages are
// more than a whole window allows, which no later run can read either.
func (c *Client) reservePages(pages int) (*quotaReservation, error) {
	res, ok, q := c.budget.reserveQuota(pages)
	wait := max(q.Reset.Sub(c.now()), 0)
	if ok || wait <= c.maxWait {
		return res, nil
	}
	// A later run reads the first page again too (and more: the object's
	// describe, the list of objects), so this is the least it takes.
	exceeds := !q.Holds(pages + 1)
	never := ""
	if exceeds {
		never = fmt.Sprintf("; with its first page that is more than the %d requests the quota allows in a whole window, so a later run cannot read it within one either: %s",
			q.Limit, ExceedsAdvice)
	}
	return res, &QuotaError{Reset: q.Reset, Exceeds: exceeds, Err: fmt.Errorf("%w: %d more pages to read, %d requests left until the window resets at %s (in %s)%s",
		ErrQuotaExhausted, pages, q.Remaining-q.Reserved, q.Reset.UTC().Format(time.RFC3339), wait.Round(time.Second), never)}
}

// releaseQuota gives back what a finished read did not use.
func (b *budget) releaseQuota(res *quotaReservation) {
	if res == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.quota.Known {
		b.quota.Reserved = max(b.quota.Reserved-res.n, 0)
	}
	res.n = 0
}

// Quota reports the client's view of the service's request quota.
func (c *Client) Quota() Quota {
	c.budget.mu.Lock()
	defer c.budget.mu.Unlock()
	c.budget.expireQuota(c.now())
	return c.budget.quota
}
