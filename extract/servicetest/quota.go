package servicetest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// WithQuota gives the tenant a request quota: n data requests per window
// (fixed windows of real time; the first opens with the first data
// request, the next with the first request after it closed). Every data
// answer announces the quota in X-RateLimit-Limit, X-RateLimit-Remaining
// and X-RateLimit-Reset (Unix seconds when the window closes) and in the
// IETF draft's RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// (seconds until then). A request beyond the quota is answered 429 with
// Retry-After (seconds until the window closes) and
// meta.rateLimit {limit, remaining, reset} in the body, as WithRateLimit's
// answers have. n ≤ 0 or window ≤ 0 switches it off.
func WithQuota(n int, window time.Duration) Option {
	return func(c *config) {
		if n <= 0 || window <= 0 {
			c.faults.quota, c.faults.quotaWindow = 0, 0
			return
		}
		c.faults.quota, c.faults.quotaWindow = n, window
	}
}

// quotaState counts the data requests of the current quota window.
type quotaState struct {
	mu      sync.Mutex
	start   time.Time
	used    int
	refused int64 // 429 answers beyond the quota
}

// QuotaRefused returns how many requests the quota (WithQuota) refused.
func (s *Service) QuotaRefused() int64 {
	q := &s.faults.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.refused
}

// quotaWindow is one answer's view of the quota.
type quotaWindow struct {
	limit, remaining int
	reset            time.Time
}

func (w quotaWindow) meta() map[string]any {
	return map[string]any{"rateLimit": map[string]any{"limit": w.limit, "remaining": w.remaining, "reset": ceilUnix(w.reset)}}
}

func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}

// takeQuota counts r against the quota. It sets the announcing headers and
// answers 429 itself when the window is used up; it reports whether it
// answered.
func (f *faultState) takeQuota(w http.ResponseWriter, r *http.Request) (quotaWindow, bool) {
	now := time.Now()
	q := &f.quota
	q.mu.Lock()
	if q.start.IsZero() || now.Sub(q.start) >= f.cfg.quotaWindow {
		q.start, q.used = now, 0
	}
	q.used++
	over := q.used > f.cfg.quota
	if over {
		q.refused++
	}
	win := quotaWindow{limit: f.cfg.quota, remaining: max(f.cfg.quota-q.used, 0), reset: q.start.Add(f.cfg.quotaWindow)}
	q.mu.Unlock()

	secs := max(int64(math.Ceil(win.reset.Sub(now).Seconds())), 1)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(win.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(win.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(win.reset), 10))
	h.Set("RateLimit-Limit", strconv.Itoa(win.limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(win.remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(secs, 10))
	if !over {
		return win, false
	}
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	writeFaultError(w, r, http.StatusTooManyRequests, rateLimitCode, "RateLimitError",
		fmt.Sprintf("quota of %d requests per %s used up; retry after the window resets", f.cfg.quota, f.cfg.quotaWindow),
		win.meta())
	return win, true
}
