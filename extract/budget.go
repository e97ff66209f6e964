package extract

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// budget is the one request budget of a Client: every request of every
// kind, retries included, first takes a slot of an adaptive concurrency
// limit, then a token of the shared, adaptive rate limiter (rateCtl).
//
// The concurrency limit is AIMD: it starts at max, halves on a 429 and
// grows by one after a run of recoverRun successes, never above max nor
// below 1. A 429 halves the limit once per round: answers to requests
// that started before the last halving do not halve it again, so a burst
// of 429s from one round of requests counts as one signal. The same
// round lowers the rate once. A 429 that carries Retry-After also pauses
// every request of the client until then.
type budget struct {
	max        int
	recoverRun int
	now        func() time.Time                           // Retry-After dates and the quota
	sleep      func(context.Context, time.Duration) error // pauses
	// clock and wait are the rate's time: when a token is due and the
	// wait for it (real time but in tests).
	clock func() time.Time
	wait  func(context.Context, time.Duration) error

	mu         sync.Mutex
	limit      int
	inflight   int
	run        int    // successes in a row
	epoch      uint64 // incremented on every halving
	pauseUntil time.Time
	wake       chan struct{} // closed and replaced when a slot may be free
	quota      Quota         // the service's announced request quota (quota.go)
	rate       rateCtl
}

// slot is held by one request in flight.
type slot struct {
	epoch uint64
	sent  time.Time // when its token let it go (zero: no limiter)
	rate  float64   // the rate then, requests per second
}

// outcome of a request, as the budget sees it.
type outcome int

const (
	outcomeOK        outcome = iota // a 2xx or a final 4xx: the service is fine
	outcomeThrottled                // 429
	outcomeFailed                   // 5xx or transport failure: breaks a run of successes
	outcomeUnsent                   // never sent (no token, no credential): neutral
)

// newBudget is a budget whose rate starts at l's and never passes it (nil
// or rate.Inf: no limiter). Clients use newRateBudget.
func newBudget(l *rate.Limiter, max, recoverRun int, now func() time.Time, sleep func(context.Context, time.Duration) error) *budget {
	rc := rateConfig{off: true}
	if l != nil && l.Limit() != rate.Inf {
		r := math.Max(float64(l.Limit()), minRate)
		rc = rateConfig{ceiling: r, burst: l.Burst(), start: r}
	}
	return newRateBudget(max, recoverRun, rc, now, sleep)
}

func newRateBudget(max, recoverRun int, rc rateConfig, now func() time.Time, sleep func(context.Context, time.Duration) error) *budget {
	return &budget{
		max: max, recoverRun: recoverRun, now: now, sleep: sleep,
		clock: time.Now, wait: sleepCtx,
		limit: max, wake: make(chan struct{}),
		rate: newRateCtl(rc, time.Now()),
	}
}

// acquire waits for a pause to pass (unless the caller already slept until
// sleptUntil or later), for a free slot and for the rate limiter. It
// returns how long it slept for a pause. A request that waited for its
// token while a 429 paused the client waits for the pause too, then for
// a new token, so that requests queued before a pause do not all go when
// it ends.
func (b *budget) acquire(ctx context.Context, sleptUntil time.Time) (slot, time.Duration, error) {
	var paused time.Duration
	taken := false
	for {
		b.mu.Lock()
		pause := b.pauseUntil
		b.mu.Unlock()
		if pause.After(sleptUntil) {
			// Sleep once per pause: a test clock may stand still.
			if d := pause.Sub(b.now()); d > 0 {
				if err := b.sleep(ctx, d); err != nil {
					if taken {
						b.release(slot{}, outcomeUnsent)
					}
					return slot{}, paused, err
				}
				paused += d
			}
			sleptUntil = pause
		}
		if !taken {
			if err := b.takeSlot(ctx); err != nil {
				return slot{}, paused, err
			}
			taken = true
		}
		delay, res := b.reserve()
		if err := b.waitToken(ctx, delay, res); err != nil {
			b.release(slot{}, outcomeUnsent)
			return slot{}, paused, err
		}
		b.mu.Lock()
		repause := delay > 0 && b.pauseUntil.After(sleptUntil)
		b.mu.Unlock()
		if !repause {
			return b.send(), paused, nil
		}
	}
}

// takeSlot waits for a free slot and takes it.
func (b *budget) takeSlot(ctx context.Context) error {
	for {
		b.mu.Lock()
		if b.inflight < b.limit {
			b.inflight++
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// reserve reserves a token of the rate limiter: the request may go after
// delay.
func (b *budget) reserve() (time.Duration, *rate.Reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, delay, res := b.rate.reserve(b.clock())
	return delay, res
}

// send notes that the holder of a slot sends its request now: the slot
// belongs to the current round and remembers the time and the rate.
func (b *budget) send() slot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slot{epoch: b.epoch, sent: b.rate.sentAt(b.clock()), rate: b.rate.r}
}

// waitToken waits delay for a reserved token, or gives the token back when
// ctx ends first or its deadline comes sooner.
func (b *budget) waitToken(ctx context.Context, delay time.Duration, res *rate.Reservation) error {
	if delay <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(b.clock().Add(delay)) {
		res.CancelAt(b.clock())
		return fmt.Errorf("waiting %s for the request rate would pass the context's deadline", delay.Round(time.Millisecond))
	}
	if err := b.wait(ctx, delay); err != nil {
		res.CancelAt(b.clock())
		return err
	}
	return nil
}

// release frees a slot and adapts the limit to the outcome (a 429 goes
// through throttled).
func (b *budget) release(s slot, o outcome) {
	b.settle(s, o, 0, quotaInfo{})
}

// throttled frees the slot of a request answered 429; retryAfter is the
// answer's hint (0: none) and q the request quota it announced (q.ok
// false: none). It reports whether the rate was lowered, and the rate now.
func (b *budget) throttled(s slot, retryAfter time.Duration, q quotaInfo) (lowered bool, rps float64) {
	lowered = b.settle(s, outcomeThrottled, retryAfter, q)
	b.mu.Lock()
	defer b.mu.Unlock()
	return lowered, b.rate.r
}

func (b *budget) settle(s slot, o outcome, retryAfter time.Duration, q quotaInfo) (lowered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	b.rate.landed(s)
	switch o {
	case outcomeThrottled:
		b.run = 0
		b.rate.window429(retryAfter)
		if s.epoch == b.epoch {
			b.limit = max(1, b.limit/2)
			b.epoch++
			lowered = b.rate.throttled(b.clock(), s, q)
		}
	case outcomeOK:
		b.run++
		if b.run >= b.recoverRun && b.limit < b.max {
			b.limit++
			b.run = 0
		}
		b.rate.answered(s)
	case outcomeFailed:
		b.run = 0
		b.rate.answered(s) // the service counted it too
	}
	close(b.wake)
	b.wake = make(chan struct{})
	return lowered
}

// pause holds every request until t (a Retry-After). The latest hint
// wins: it is the service's latest word.
func (b *budget) pause(t time.Time) {
	b.mu.Lock()
	b.pauseUntil = t
	b.mu.Unlock()
}

// state reports the current limit and requests in flight.
func (b *budget) state() (limit, inflight int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit, b.inflight
}

// InFlightLimit reports the client's current adaptive limit of requests
// in flight (between 1 and WithMaxInFlight's n).
func (c *Client) InFlightLimit() int {
	l, _ := c.budget.state()
	return l
}

// Rate reports the client's current request rate, in requests per second:
// where its adaptive rate stands (never above WithRateLimit's ceiling), or
// +Inf when WithoutRateLimit switched the limiter off.
func (c *Client) Rate() float64 {
	c.budget.mu.Lock()
	defer c.budget.mu.Unlock()
	return c.budget.rate.r
}

// The request rate.
//
// A client does not assume the service's rate: it finds it. The rate
// starts at DefaultStartRate (or the ceiling, when lower) and, until the
// first 429, doubles after every slowStartStep during which the limiter
// held requests back (time when no request waited for a token does not
// count: a client that sends less than its rate learns nothing).
//
// A 429 (once per round, as the concurrency limit) is measured. The
// service accepted a number of requests in its window before the 429:
// over the window (estimated from the longest Retry-After, at least 1 s)
// that is the rate it allows; against a service that counts requests per
// fixed window it is exactly the window's limit. The throttled request
// was sent at the limiter's rate then, an upper bound. The estimate is
// the lower of the two. The rate drops to the lower of rateBackoff × the
// send rate and ratePlateau × the accepted rate, then climbs along a
// cubic (as TCP CUBIC does): quickly at first, flat near ratePlateau ×
// the estimate, where it stays longest, reached after rateCubicWindows
// windows of held-back time; then ever faster above it, probing whether
// the service allows more (rateProbe × the plateau one climb later). So a
// service whose limit holds sees one 429 per probe, a few hundred
// requests apart at least, and one whose estimate was high (a token
// bucket that lets a burst through) sees the rate fall by rateBackoff per
// 429 until it holds. A 429 whose estimate confirms the one before (within
// rateSame) doubles the next climb, up to rateSlowestClimb times: a limit
// that holds is probed less and less often.
//
// A 429 may announce the service's limit (quota.go reads it: the
// X-RateLimit-*, RateLimit-* and RateLimit headers, or the body's
// meta.rateLimit, with what remains and when it resets). Only a limit of
// the window that refused the request counts: nothing remains, and it
// resets within the estimated window (plus a second, for resets given in
// whole seconds); an hourly quota's limit says nothing about the rate.
// When the requests counted in the estimated window match that limit
// (within rateAnnounced, and at least rateConfirmMin requests), the
// estimate is the service's own word, confirmed by the count: not low,
// whatever the ramp before, and the window is right. The announced limit
// then stands for the client's count, which misses requests that
// overtook the refused one or takes in some of the window before; the
// rate levels off at rateConfirmedPlateau of the estimate instead of
// ratePlateau; and the climb is the slowest at once, whether a
// Retry-After was seen or not, so a short run is not probed again and a
// long one seldom. In slow start,
// the client's first 429 whose count is under the announced limit by more
// than rateAnnounced may have come in a window someone else used too
// (another client of the tenant, the run before): it says nothing about
// the rate, as a 429 after no accepted answer, and the next 429 takes the
// higher of the two counts (a token bucket holding less than its rate
// refuses the ramp early, and its second count is no higher).
//
// The first estimate may be low: taken while the rate was still doubling,
// it counts a window of which the client used only the end (a token
// bucket that holds less than a window's worth refuses the ramp soon
// after it passes the bucket's rate). The first climb takes
// rateFirstClimbWindows windows, so the probe above comes sooner.
//
// Until a 429 has said Retry-After, the window is a guess and the
// estimate may be low (a service counting per 100 ms refuses a burst
// while the client sends little per second): the climb then takes two
// windows, unless an announced limit confirmed the count. A 429 that follows no accepted answer in the window says
// nothing about the rate (another client used the window, or the quota is
// spent): it pauses and retries but does not lower the rate. Nor does the
// first 429 of a window longer than rateLongWindow that began before the
// client's first request, when no limit is announced: like the shared
// window above, it counted only the window's end, and the next 429 takes
// the higher of the two counts.
//
// The limiter's burst is burstTime of the rate (at least 1), so that a
// burst after a pause does not fill a service's window on its own.

const (
	// DefaultStartRate is the adaptive rate before any answer, in requests
	// per second.
	DefaultStartRate = 10
	// slowStartStep: held-back time per doubling before the first 429.
	slowStartStep = 50 * time.Millisecond
	// rateBackoff: after a 429 the rate drops to at most this share of
	// the rate the throttled request was sent at.
	rateBackoff = 0.9
	// ratePlateau: ... and to at most this share of the rate the service
	// accepted, where it stays longest: the margin for bursts and jitter.
	ratePlateau = 0.95
	// rateConfirmedPlateau: the same for a limit the service announced
	// and the count confirmed: the estimate is exact, so the margin is
	// for jitter only.
	rateConfirmedPlateau = 0.98
	// rateProbe: one climb past the plateau, the rate is this much above.
	rateProbe = 0.05
	// rateCubicWindows: held-back time, in service windows, to reach the
	// plateau after a 429.
	rateCubicWindows = 15
	// rateFirstClimbWindows: the same after the first 429, whose estimate
	// may be low (see above).
	rateFirstClimbWindows = 5
	// rateSame: a 429's estimate within this share of the one before
	// confirms the limit, and the next climb takes twice as long (up to
	// rateSlowestClimb times the first).
	rateSame         = 0.1
	rateSlowestClimb = 4
	// rateAnnounced: a count within this share of an announced limit
	// matches it; a first count further under it may have shared its
	// window.
	rateAnnounced = 0.1
	// rateConfirmMin: an announced limit confirms the count of at least
	// this many requests only (fewer match by chance: a token bucket
	// holding one request announces 1, and the first 429 counts 1).
	rateConfirmMin = 10
	// rateLongWindow: a window longer than this, which began before the
	// client's first request, does not set the rate by its first 429
	// (see throttled): a count that low is far more costly there, where
	// the climb back takes windows, than one more 429.
	rateLongWindow = 10 * time.Second
	// burstTime: the automatic burst is this much of the rate.
	burstTime = 25 * time.Millisecond
	// minRate is the floor of the adaptive rate, requests per second.
	minRate = 0.05
	// minWindow and maxWindow bound the estimate of the service's window.
	minWindow = time.Second
	maxWindow = 10 * time.Minute
	// okRing is how many accepted answers the estimate remembers.
	okRing = 8192
)

// rateConfig says how a client's rate is limited (WithRateLimit,
// WithoutRateLimit).
type rateConfig struct {
	off     bool    // no limiter at all
	ceiling float64 // the rate never passes it; 0: no ceiling
	burst   int     // the limiter's burst; 0: automatic
	start   float64 // the first rate; 0: DefaultStartRate
}

// rateCtl is the adaptive rate of a budget. It is guarded by budget.mu;
// every method takes the time it acts at, so tests drive it with a fake
// clock.
type rateCtl struct {
	lim     *rate.Limiter // nil: off
	ceiling float64       // +Inf: none
	burst   int           // 0: automatic

	r         float64       // the current rate
	slow      bool          // slow start: no 429 measured yet
	shared    bool          // a 429 in slow start may have found its window shared (see throttled)
	sharedAcc float64       // ... and the rate its count gave
	est       float64       // the last 429's estimate of the service's rate
	plateau   float64       // the share of est the climb levels off at
	same      int           // estimates in a row that confirmed the one before
	from      float64       // the rate right after the last decrease
	climb     time.Duration // held-back time from the decrease to the plateau
	held      time.Duration // held-back time since the last doubling (slow start) or decrease
	last      time.Time     // the latest token's time
	window    time.Duration // the estimate of the service's window
	// windowKnown: a 429 said Retry-After; without one the window is a
	// guess and the estimate may be low.
	windowKnown bool

	base   time.Time             // oks and flying hold send times as offsets from base
	oks    [okRing]time.Duration // ring of the send times of accepted answers
	okN    int                   // entries in oks
	okAt   int                   // next write position
	flying []time.Duration       // send times of the requests in flight
}

func newRateCtl(cfg rateConfig, now time.Time) rateCtl {
	c := rateCtl{ceiling: math.Inf(1), burst: cfg.burst, slow: true, window: minWindow, base: now}
	if cfg.off {
		c.r = math.Inf(1)
		return c
	}
	if cfg.ceiling > 0 {
		c.ceiling = cfg.ceiling
	}
	start := cfg.start
	if start <= 0 {
		start = DefaultStartRate
	}
	c.r = min(start, c.ceiling)
	c.lim = rate.NewLimiter(rate.Limit(c.r), c.burstFor(c.r))
	return c
}

func (c *rateCtl) burstFor(r float64) int {
	if c.burst > 0 {
		return c.burst
	}
	return max(1, int(r*burstTime.Seconds()))
}

// set changes the rate at now, within the floor and the ceiling.
func (c *rateCtl) set(now time.Time, r float64) {
	r = min(max(r, minRate), c.ceiling)
	if r == c.r || c.lim == nil {
		return
	}
	c.r = r
	c.lim.SetLimitAt(now, rate.Limit(r))
	if b := c.burstFor(r); b != c.lim.Burst() {
		c.lim.SetBurstAt(now, b)
	}
}

// reserve reserves one request's token at now: the request may go at
// at, after delay (at is zero when the limiter is off). A request held
// back by the limiter grows the rate.
func (c *rateCtl) reserve(now time.Time) (at time.Time, delay time.Duration, res *rate.Reservation) {
	if c.lim == nil {
		return time.Time{}, 0, nil
	}
	res = c.lim.ReserveN(now, 1) // ok: the burst is at least 1
	delay = res.DelayFrom(now)
	at = now.Add(delay)
	if delay > 0 && !c.last.IsZero() && at.After(c.last) {
		// The limiter spaced this request from the one before: the time
		// between them was held back (at most a burst's worth, in case
		// the rate fell meanwhile).
		most := time.Duration(float64(c.lim.Burst()+1) / c.r * float64(time.Second))
		c.grow(now, min(at.Sub(c.last), most))
	}
	if at.After(c.last) {
		c.last = at
	}
	return at, delay, res
}

// sentAt is the send time a slot remembers: now, or zero when the limiter
// is off. The request is in flight until landed.
func (c *rateCtl) sentAt(now time.Time) time.Time {
	if c.lim == nil {
		return time.Time{}
	}
	c.flying = append(c.flying, now.Sub(c.base))
	return now
}

// landed notes that the request of s is no longer in flight.
func (c *rateCtl) landed(s slot) {
	if s.sent.IsZero() {
		return
	}
	if i := slices.Index(c.flying, s.sent.Sub(c.base)); i >= 0 {
		c.flying = slices.Delete(c.flying, i, i+1)
	}
}

// grow adds d of held-back time and raises the rate accordingly.
func (c *rateCtl) grow(now time.Time, d time.Duration) {
	c.held += d
	if c.slow {
		if c.held >= slowStartStep {
			c.held = 0
			c.set(now, 2*c.r)
		}
		return
	}
	k := c.climb.Seconds()
	x := (c.held.Seconds() - k) / k
	plateau := c.plateau * c.est
	if x < 0 {
		c.set(now, plateau+(plateau-c.from)*x*x*x) // from c.from up to the plateau
		return
	}
	c.set(now, plateau*(1+rateProbe*x*x*x))
}

// answered notes an answer the service accepted (it counted it).
func (c *rateCtl) answered(s slot) {
	if c.lim == nil || s.sent.IsZero() {
		return
	}
	c.oks[c.okAt] = s.sent.Sub(c.base)
	c.okAt = (c.okAt + 1) % okRing
	c.okN = min(c.okN+1, okRing)
}

// window429 widens the estimate of the service's window to a 429's
// Retry-After.
func (c *rateCtl) window429(retryAfter time.Duration) {
	if retryAfter <= 0 {
		return
	}
	c.windowKnown = true
	if retryAfter > c.window {
		c.window = min(retryAfter, maxWindow)
	}
}

// accepted reports the rate of accepted answers sent in the service's
// window before ref: their count over the window (over the time the ring
// covers, when it holds fewer than the window's answers). Requests sent
// before ref and still in flight count too: the service counted them
// before the one it refused.
func (c *rateCtl) accepted(ref time.Time) (n int, rps float64) {
	to := ref.Sub(c.base)
	from := to - c.window
	oldest := to
	for i := range c.okN {
		t := c.oks[(c.okAt-1-i+okRing)%okRing]
		if t > from && t <= to {
			n++
		}
		oldest = min(oldest, t)
	}
	for _, t := range c.flying {
		if t > from && t < to {
			n++
		}
	}
	span := c.window
	if c.okN == okRing && oldest > from {
		span = max(to-oldest, time.Millisecond)
	}
	return n, float64(n) / span.Seconds()
}

// mayBeShared reports whether the first 429, to a request sent at s.sent
// after n accepted answers in the window (limit: the window's announced
// limit, 0 none), may have come in a window someone else (the run before,
// another client of the tenant) used too, so that its count says nothing
// of the rate: a window the service says holds more than the client sent,
// or a long one that began before the client did, whose count is of its
// end only (taken for the rate, 2 requests in a window of 60 s put the
// client at its floor for most of an hour; skipped, it costs one more 429
// where the limit is that low).
func (c *rateCtl) mayBeShared(s slot, n, limit int) bool {
	if limit > 0 {
		return float64(n) < (1-rateAnnounced)*float64(limit)
	}
	return c.window > rateLongWindow && s.sent.Sub(c.base) < c.window
}

// throttled lowers the rate after the first 429 of a round, to a request
// sent at s.sent at rate s.rate; q is the request quota the 429 announced
// (q.ok false: none). It reports whether it did.
func (c *rateCtl) throttled(now time.Time, s slot, q quotaInfo) bool {
	if c.lim == nil || s.sent.IsZero() {
		return false
	}
	n, acc := c.accepted(s.sent)
	if n == 0 {
		return false // nothing learnt about the rate
	}
	limit := 0 // the limit of the window that refused the request
	if q.ok && q.remaining == 0 && !q.reset.After(now.Add(c.window+time.Second)) {
		limit = q.limit
	}
	if c.slow && !c.shared && c.mayBeShared(s, n, limit) {
		c.shared, c.sharedAcc = true, acc
		return false
	}
	confirmed := n >= rateConfirmMin && math.Abs(float64(n-limit)) <= rateAnnounced*float64(limit)
	if confirmed {
		// The service's count, not the client's.
		acc *= float64(limit) / float64(n)
	}
	if c.slow {
		acc = max(acc, c.sharedAcc) // 0 unless the first 429 was skipped
	}
	est := min(s.rate, acc)
	switch {
	case confirmed:
		c.same = bits.Len(rateSlowestClimb) - 1
	case !c.slow && math.Abs(est-c.est) <= rateSame*c.est:
		c.same = min(c.same+1, bits.Len(rateSlowestClimb)-1)
	default:
		c.same = 0
	}
	c.est = est
	c.plateau = ratePlateau
	if confirmed {
		c.plateau = rateConfirmedPlateau
	}
	from := min(rateBackoff*s.rate, c.plateau*acc, c.r)
	c.held = 0
	c.climb = rateCubicWindows * c.window << c.same
	switch {
	case confirmed:
	case !c.windowKnown:
		c.climb = 2 * c.window
	case c.slow:
		c.climb = rateFirstClimbWindows * c.window
	}
	c.slow = false
	c.set(now, from)
	c.from = c.r
	return true
}
