package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"net/http"

	"golang.org/x/time/rate"
)

func testBudget(max, run int) *budget {
	return newBudget(rate.NewLimiter(rate.Inf, 1), max, run, time.Now, sleepCtx)
}

func TestBudgetAIMD(t *testing.T) {
	b := testBudget(8, 3)
	ctx := context.Background()
	take := func() slot {
		t.Helper()
		s, _, err := b.acquire(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A round of 4 requests all throttled halves the limit once.
	round := []slot{take(), take(), take(), take()}
	for _, s := range round {
		b.release(s, outcomeThrottled)
	}
	if l, n := b.state(); l != 4 || n != 0 {
		t.Fatalf("after one throttled round: limit %d in flight %d, want 4 and 0", l, n)
	}
	// Each new round halves again, down to 1, never below.
	for _, want := range []int{2, 1, 1} {
		b.release(take(), outcomeThrottled)
		if l, _ := b.state(); l != want {
			t.Fatalf("limit %d, want %d", l, want)
		}
	}
	// Recovery: +1 per run of 3 successes; a failure breaks the run.
	b.release(take(), outcomeOK)
	b.release(take(), outcomeOK)
	b.release(take(), outcomeFailed)
	if l, _ := b.state(); l != 1 {
		t.Fatalf("a broken run grew the limit to %d", l)
	}
	for range 3 * 20 {
		b.release(take(), outcomeOK)
	}
	if l, _ := b.state(); l != 8 {
		t.Fatalf("limit %d after many successes, want the max 8", l)
	}
}

// A full budget blocks the next request until a slot is released; a
// cancelled wait gives the context's error.
func TestBudgetBlocksWhenFull(t *testing.T) {
	b := testBudget(2, 10)
	ctx := context.Background()
	s1, _, _ := b.acquire(ctx, time.Time{})
	s2, _, _ := b.acquire(ctx, time.Time{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.acquire(cctx, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	got := make(chan slot)
	go func() {
		s, _, err := b.acquire(ctx, time.Time{})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	b.release(s1, outcomeOK)
	s3 := <-got
	if _, n := b.state(); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	b.release(s2, outcomeOK)
	b.release(s3, outcomeOK)
}

// Under -race: many goroutines, random outcomes; the in-flight count
// never exceeds the limit's max and ends at 0.
func TestBudgetConcurrent(t *testing.T) {
	b := testBudget(4, 2)
	var mu sync.Mutex
	cur, peak := 0, 0
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s, _, err := b.acquire(context.Background(), time.Time{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				cur++
				peak = max(peak, cur)
				mu.Unlock()
				mu.Lock()
				cur--
				mu.Unlock()
				b.release(s, outcome((g+i)%3))
			}
		}()
	}
	wg.Wait()
	if l, n := b.state(); n != 0 || l < 1 || l > 4 || peak > 4 {
		t.Fatalf("limit %d in flight %d peak %d", l, n, peak)
	}
}

// A Retry-After pauses the other requests of the client too (the waiting
// request's own sleep is not doubled).
func TestBudgetPause(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var slept []time.Duration
	b := newBudget(rate.NewLimiter(rate.Inf, 1), 2, 10, func() time.Time { return now },
		func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil })
	b.pause(now.Add(5 * time.Second))
	s, paused, _ := b.acquire(context.Background(), time.Time{})
	b.release(s, outcomeOK)
	s, _, _ = b.acquire(context.Background(), now.Add(5*time.Second)) // the request that slept itself
	b.release(s, outcomeOK)
	if paused != 5*time.Second || len(slept) != 1 {
		t.Fatalf("paused %s, sleeps %v; want one 5s pause", paused, slept)
	}
}

// The client's 429s shrink its limit; successes grow it back.
func TestClientAdaptsInFlight(t *testing.T) {
	s := &script{steps: []func(w http.ResponseWriter, r *http.Request){
		status(429), body(200, describeOK),
	}}
	c, _ := newTestClient(t, s, WithMaxInFlight(4, 1))
	recordSleeps(c)
	if _, err := c.Describe(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	// 4 → 2 on the 429, +1 on the success.
	if got := c.InFlightLimit(); got != 3 {
		t.Fatalf("limit %d, want 3", got)
	}
}

// --- the adaptive rate, against simulated services --------------------------
//
// The simulations below run a client's budget against a rate-limited
// service in simulated time: no goroutine, no sleep, no wall clock. The
// workers follow acquire and do: wait out a pause, take a slot, wait for
// the token (and for a pause that began meanwhile, then for a new token),
// send, and on a 429 tell the budget, pause every worker for Retry-After
// and retry the same request.

// simService says whether a request arriving at t is accepted, or the
// Retry-After of its 429 (0: none).
type simService interface {
	admit(t time.Time) (ok bool, retryAfter time.Duration)
}

// fixedWindow allows n requests per window; the window opens with the
// first request after the previous one closed (as servicetest's
// WithRateLimit). Retry-After: whole seconds to the window's end, at
// least 1.
type fixedWindow struct {
	n     int
	w     time.Duration
	start time.Time
	count int
}

func (s *fixedWindow) admit(t time.Time) (bool, time.Duration) {
	if s.start.IsZero() || t.Sub(s.start) >= s.w {
		s.start, s.count = t, 0
	}
	s.count++
	if s.count <= s.n {
		return true, 0
	}
	return false, max(wholeSeconds(s.start.Add(s.w).Sub(t)), time.Second)
}

// tokenBucket refills rate tokens a second up to capacity; a request takes
// one. Retry-After: whole seconds until a token is there, at least 1.
type tokenBucket struct {
	rate, capacity float64
	tokens         float64
	last           time.Time
}

func (s *tokenBucket) admit(t time.Time) (bool, time.Duration) {
	if s.last.IsZero() {
		s.tokens = s.capacity
	} else {
		s.tokens = min(s.capacity, s.tokens+t.Sub(s.last).Seconds()*s.rate)
	}
	s.last = t
	if s.tokens >= 1 {
		s.tokens--
		return true, 0
	}
	return false, max(wholeSeconds(time.Duration((1-s.tokens)/s.rate*float64(time.Second))), time.Second)
}

// announcing is a service whose 429s announce limit, as meta.rateLimit's
// limit does.
type announcing struct {
	simService
	limit int
}

func wholeSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// simResult is what a simulated read cost.
type simResult struct {
	accepted, throttled int
	elapsed             time.Duration
	maxRate, finalRate  float64
}

// simulate reads requests requests with workers workers (each answer
// takes latency) through a budget of maxInFlight slots and rate config
// rc, against svc, in simulated time.
func simulate(t *testing.T, svc simService, rc rateConfig, requests, workers, maxInFlight int, latency time.Duration) simResult {
	t.Helper()
	limit := 0 // the limit its 429s announce
	if a, ok := svc.(announcing); ok {
		limit = a.limit
	}
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	b := newRateBudget(maxInFlight, defaultRecoverRun, rc, clock, nil)
	b.clock = clock

	type worker struct {
		at         time.Time // when it acts next
		state      int       // 0 acquire, 1 token due, 2 answer due, 3 waiting for a slot, 4 done
		sleptUntil time.Time
		reservedAt time.Time
		held       bool // its token was delayed
		s          slot
		ok         bool
		retryAfter time.Duration
	}
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = &worker{at: start}
	}
	var res simResult
	issued := 0 // requests handed to workers (a retry is the same request)
	for i := range ws {
		if issued < requests {
			issued++
		} else {
			ws[i].state = 4
		}
	}
	wakeWaiting := func() {
		for _, w := range ws {
			if w.state == 3 {
				w.state, w.at = 0, now
			}
		}
	}
	for steps := 0; ; steps++ {
		if steps > 50*requests+100000 {
			t.Fatalf("simulation did not finish: %+v", res)
		}
		var w *worker
		for _, c := range ws {
			if c.state != 3 && c.state != 4 && (w == nil || c.at.Before(w.at)) {
				w = c
			}
		}
		if w == nil {
			break
		}
		now = w.at
		switch w.state {
		case 0: // acquire: pause, slot, token
			b.mu.Lock()
			pause := b.pauseUntil
			b.mu.Unlock()
			if pause.After(w.sleptUntil) && pause.After(now) {
				w.sleptUntil, w.at = pause, pause
				continue
			}
			if !w.held { // a re-reservation after a pause keeps its slot
				b.mu.Lock()
				if b.inflight >= b.limit {
					b.mu.Unlock()
					w.state = 3
					continue
				}
				b.inflight++
				b.mu.Unlock()
			}
			delay, _ := b.reserve()
			w.state, w.at, w.held, w.reservedAt = 1, now.Add(delay), true, now
			if delay == 0 {
				w.held = false
			}
		case 1: // token due: a pause that began meanwhile comes first
			b.mu.Lock()
			repause := w.held && b.pauseUntil.After(w.sleptUntil) && b.pauseUntil.After(now)
			b.mu.Unlock()
			if repause {
				w.state = 0 // keeps its slot: held stays true
				continue
			}
			w.held = false
			w.s = b.send()
			w.ok, w.retryAfter = svc.admit(now)
			w.state, w.at = 2, now.Add(latency)
			res.maxRate = max(res.maxRate, b.rate.r)
		case 2: // answer
			if w.ok {
				b.release(w.s, outcomeOK)
				res.accepted++
				if issued < requests {
					issued++
					w.state = 0
				} else {
					w.state = 4
				}
			} else {
				b.throttled(w.s, w.retryAfter, quotaInfo{limit: limit, reset: now.Add(w.retryAfter), ok: limit > 0})
				res.throttled++
				w.sleptUntil = now.Add(w.retryAfter)
				b.pause(w.sleptUntil)
				w.state, w.at = 0, w.sleptUntil
			}
			wakeWaiting()
		}
	}
	res.elapsed = now.Sub(start)
	res.finalRate = b.rate.r
	return res
}

// The default client (no ceiling, start at 10/s) against services that
// allow 5, 20, 50 and 200 requests a second, over a minute of the
// service's allowance: the read takes at most 1.15 × the ideal time
// (requests / limit, simulated time) and at most 2 % of the requests are
// answered 429; the rate ends near the limit. A token bucket holding a
// tenth of a second's worth refuses the first ramp early, so the first
// estimate is low and the climb back costs more: within 1.6 ×, the rate
// at least 0.7 × the limit at the end; one holding half a second's worth,
// within 1.2 ×. Each service is also run announcing its limit in its 429s
// (a token bucket its capacity or its rate).
func TestRateConvergesOnTheServiceLimit(t *testing.T) {
	for _, n := range []int{5, 20, 50, 200} {
		for _, c := range []struct {
			name string
			svc  simService
			over float64 // most time over the ideal
			low  float64 // least rate at the end, a share of n
		}{
			{"fixed window", &fixedWindow{n: n, w: time.Second}, 1.15, 0.8},
			{"10 s fixed window", &fixedWindow{n: 10 * n, w: 10 * time.Second}, 1.15, 0.8},
			{"token bucket", &tokenBucket{rate: float64(n), capacity: float64(n)}, 1.15, 0.8},
			{"small token bucket", &tokenBucket{rate: float64(n), capacity: max(1, float64(n)/10)}, 1.6, 0.7},
			{"fixed window, announced", announcing{&fixedWindow{n: n, w: time.Second}, n}, 1.15, 0.8},
			{"10 s fixed window, announced", announcing{&fixedWindow{n: 10 * n, w: 10 * time.Second}, 10 * n}, 1.15, 0.8},
			{"token bucket, announced", announcing{&tokenBucket{rate: float64(n), capacity: float64(n)}, n}, 1.15, 0.8},
			{"small token bucket, announced", announcing{&tokenBucket{rate: float64(n), capacity: max(1, float64(n)/10)}, max(1, n/10)}, 1.6, 0.7},
			{"half token bucket", &tokenBucket{rate: float64(n), capacity: max(1, float64(n)/2)}, 1.2, 0.8},
			{"half token bucket, announcing its rate", announcing{&tokenBucket{rate: float64(n), capacity: max(1, float64(n)/2)}, n}, 1.2, 0.8},
			{"small token bucket, announcing its rate", announcing{&tokenBucket{rate: float64(n), capacity: max(1, float64(n)/10)}, n}, 1.6, 0.7},
		} {
			t.Run(fmt.Sprintf("%s/%d", c.name, n), func(t *testing.T) {
				r := simulate(t, c.svc, rateConfig{}, 60*n, DefaultConcurrency, DefaultConcurrency, 5*time.Millisecond)
				ideal := time.Duration(float64(r.accepted) / float64(n) * float64(time.Second))
				over := r.elapsed.Seconds() / ideal.Seconds()
				share := float64(r.throttled) / float64(r.accepted+r.throttled)
				t.Logf("%d accepted, %d throttled (%.2f %%), %s for an ideal %s (%.3f), rate %.2f at the end, %.2f at most",
					r.accepted, r.throttled, 100*share, r.elapsed.Round(time.Millisecond), ideal.Round(time.Millisecond), over, r.finalRate, r.maxRate)
				if over > c.over {
					t.Errorf("%.3f × the ideal time, want at most %.2f", over, c.over)
				}
				if share > 0.02 {
					t.Errorf("%.2f %% of the requests throttled, want at most 2 %%", 100*share)
				}
				if r.finalRate < c.low*float64(n) || r.finalRate > 1.25*float64(n) {
					t.Errorf("rate %.2f at the end, want within [%.1f, 1.25] × %d", r.finalRate, c.low, n)
				}
			})
		}
	}
}

// A ceiling (WithRateLimit) bounds the rate: against a service that never
// refuses, the rate climbs to the ceiling and stays there.
func TestRateCeiling(t *testing.T) {
	r := simulate(t, &fixedWindow{n: 1 << 30, w: time.Second}, rateConfig{ceiling: 30}, 600, 4, 4, 5*time.Millisecond)
	if r.maxRate != 30 || r.finalRate != 30 || r.throttled != 0 {
		t.Fatalf("rate %.2f at most, %.2f at the end, %d throttled; want 30, 30, 0", r.maxRate, r.finalRate, r.throttled)
	}
	if secs := r.elapsed.Seconds(); secs < 599.0/30 {
		t.Fatalf("600 requests in %.2f s: faster than the ceiling", secs)
	}
	// A ceiling below the start rate is where it starts.
	r = simulate(t, &fixedWindow{n: 1 << 30, w: time.Second}, rateConfig{ceiling: 2}, 20, 4, 4, 5*time.Millisecond)
	if r.maxRate != 2 {
		t.Fatalf("rate %.2f at most under a ceiling of 2", r.maxRate)
	}
}

// The rate grows only while the limiter holds requests back: a client
// that sends less than its rate (one worker, answers taking 200 ms: 5 a
// second) leaves it at the start; four fast workers double it again and
// again.
func TestRateGrowsOnlyWhenHeldBack(t *testing.T) {
	unlimited := func() simService { return &fixedWindow{n: 1 << 30, w: time.Second} }
	if r := simulate(t, unlimited(), rateConfig{}, 100, 1, 4, 200*time.Millisecond); r.maxRate != DefaultStartRate {
		t.Fatalf("a client sending 5 a second raised the rate to %.2f", r.maxRate)
	}
	if r := simulate(t, unlimited(), rateConfig{}, 1000, 4, 4, time.Millisecond); r.maxRate < 500 {
		t.Fatalf("1000 requests, four fast workers: rate %.2f at most, want it doubled past 500", r.maxRate)
	}
}

// clockedBudget is a budget whose rate starts at 100 a second, on a clock
// the test moves (*now), and take, which takes a slot and a token and
// sends.
func clockedBudget(t *testing.T) (b *budget, now *time.Time, take func() slot) {
	t.Helper()
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	now = &at
	clock := func() time.Time { return *now }
	b = newRateBudget(8, 10, rateConfig{start: 100}, clock, nil)
	b.clock = clock
	take = func() slot {
		t.Helper()
		if err := b.takeSlot(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.reserve()
		return b.send()
	}
	return b, now, take
}

// A round of 429s lowers the rate once, to just under what the service
// accepted in its window; a 429 that follows no accepted answer in the
// window does not lower it (nothing was learnt); a Retry-After widens the
// window the estimate counts over.
func TestRateLowersOncePerRound(t *testing.T) {
	b, now, take := clockedBudget(t)
	rateNow := func() float64 { b.mu.Lock(); defer b.mu.Unlock(); return b.rate.r }

	// The first 429 of the client: nothing accepted before it.
	b.throttled(take(), time.Second, quotaInfo{})
	if r := rateNow(); r != 100 {
		t.Fatalf("a 429 after no accepted answer moved the rate to %.2f", r)
	}
	// 20 accepted over the next second, then a round of four 429s.
	for range 20 {
		*now = now.Add(50 * time.Millisecond)
		b.release(take(), outcomeOK)
	}
	round := []slot{take(), take(), take(), take()}
	for _, s := range round {
		b.throttled(s, time.Second, quotaInfo{})
	}
	if r := rateNow(); r != ratePlateau*20 {
		t.Fatalf("rate %.2f after the round, want %.2f (%.2f × the 20 accepted in the window)", r, ratePlateau*20, ratePlateau)
	}
	// A Retry-After of 10 s: the window is 10 s from then on.
	*now = now.Add(time.Second)
	b.release(take(), outcomeOK)
	b.throttled(take(), 10*time.Second, quotaInfo{})
	if b.rate.window != 10*time.Second {
		t.Fatalf("window %s after Retry-After: 10, want 10s", b.rate.window)
	}
	// 21 accepted in the last 10 s: 2.1 a second, and the rate is lower
	// than the send rate allows.
	if r, want := rateNow(), ratePlateau*21/10; math.Abs(r-want) > 1e-9 {
		t.Fatalf("rate %.4f, want %.4f", r, want)
	}
}

// Off (WithoutRateLimit) there is no limiter: no wait, no adaptation.
func TestRateOff(t *testing.T) {
	c, _ := newTestClient(t, http.NotFoundHandler(), WithoutRateLimit())
	if r := c.Rate(); !math.IsInf(r, 1) {
		t.Fatalf("rate %v, want +Inf", r)
	}
	c, _ = newTestClient(t, http.NotFoundHandler(), WithRateLimit(25, 0))
	if r := c.Rate(); r != DefaultStartRate {
		t.Fatalf("rate %v under a ceiling of 25, want the start %v", r, DefaultStartRate)
	}
	if _, err := New("http://x.example", WithRateLimit(math.NaN(), 0)); err == nil {
		t.Fatal("WithRateLimit(NaN) accepted")
	}
}

// The climb after a 429 takes rateFirstClimbWindows windows the first
// time, rateCubicWindows after, twice that when the estimate confirms the
// one before, and back to rateCubicWindows when it does not.
func TestRateClimbLengthensWhileTheLimitHolds(t *testing.T) {
	b, now, take := clockedBudget(t)
	round := func(accepted int) time.Duration {
		t.Helper()
		for range accepted {
			*now = now.Add(time.Second / time.Duration(accepted+1))
			b.release(take(), outcomeOK)
		}
		*now = now.Add(time.Second / time.Duration(accepted+1))
		if lowered, _ := b.throttled(take(), time.Second, quotaInfo{}); !lowered {
			t.Fatal("the 429 did not lower the rate")
		}
		*now = now.Add(time.Second) // the pause: the next round counts alone
		return b.rate.climb
	}
	w := time.Second
	for i, c := range []struct {
		accepted int
		want     time.Duration
	}{
		{20, rateFirstClimbWindows * w}, // the first, from slow start
		{19, 2 * rateCubicWindows * w},  // confirms 20
		{20, 4 * rateCubicWindows * w},  // confirms 19
		{21, 4 * rateCubicWindows * w},  // confirms 20: no longer than 4 ×
		{10, rateCubicWindows * w},      // a new limit
	} {
		if got := round(c.accepted); got != c.want {
			t.Fatalf("round %d (%d accepted): climb %s, want %s", i+1, c.accepted, got, c.want)
		}
	}
}

// A 429 that announces the service's limit, matched by the count in the
// window, is the service's word: the rate drops to rateConfirmedPlateau
// of it (the client's count of 19 stands corrected to the 20 announced)
// and climbs back to that level, slowest at once. A count too small to
// tell, or an announcement of an hourly quota, leaves the client's own
// estimate and the short first climb. In slow start, a first 429 whose
// count is well under the announcement says nothing and the next one
// lowers the rate by the higher count; after slow start a count under the
// limit lowers it at once.
func TestRateTakesAnAnnouncedLimit(t *testing.T) {
	slowest := rateCubicWindows * time.Second << (bits.Len(rateSlowestClimb) - 1)
	first := rateFirstClimbWindows * time.Second
	for _, c := range []struct {
		name      string
		announced int
		reset     time.Duration // from the 429
		rounds    []int         // accepted in the window before each 429
		skipped   int           // 429s that say nothing, first
		rate      float64       // after the last 429
		climb     time.Duration // after the last 429
	}{
		{"matched", 20, time.Second, []int{19}, 0, rateConfirmedPlateau * 20, slowest},
		{"none", 0, 0, []int{18}, 0, ratePlateau * 18, first},
		{"too few to tell", 5, time.Second, []int{5}, 0, ratePlateau * 5, first},
		{"hourly quota", 3600, time.Hour, []int{18}, 0, ratePlateau * 18, first},
		{"15 % under: shared", 20, time.Second, []int{17, 12}, 1, ratePlateau * 17, first},
		{"under after slow start", 20, time.Second, []int{19, 12}, 0, ratePlateau * 12, rateCubicWindows * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, now, take := clockedBudget(t)
			var lowered bool
			var rps float64
			for i, accepted := range c.rounds {
				for range accepted {
					*now = now.Add(time.Second / time.Duration(accepted+1))
					b.release(take(), outcomeOK)
				}
				*now = now.Add(time.Second / time.Duration(accepted+1))
				q := quotaInfo{limit: c.announced, reset: now.Add(c.reset), ok: c.announced > 0}
				lowered, rps = b.throttled(take(), time.Second, q)
				if lowered == (i < c.skipped) {
					t.Fatalf("429 %d (%d accepted): lowered %v, rate %.4f; want lowered %v", i+1, accepted, lowered, rps, i >= c.skipped)
				}
				*now = now.Add(time.Second) // the pause: the next round counts alone
			}
			if math.Abs(rps-c.rate) > 1e-9 || b.rate.climb != c.climb {
				t.Fatalf("rate %.4f, climb %s; want %.4f, %s", rps, b.rate.climb, c.rate, c.climb)
			}
			// The climb levels off where it started: at the plateau.
			b.mu.Lock()
			b.rate.grow(*now, b.rate.climb-b.rate.held)
			r := b.rate.r
			b.mu.Unlock()
			if math.Abs(r-c.rate) > 1e-9 {
				t.Fatalf("rate %.4f at the end of the climb, want %.4f", r, c.rate)
			}
		})
	}
}

// Over the wire: the limit a 429's body announces (meta.rateLimit, as
// servicetest's WithRateLimit sends it) reaches the rate. Twenty requests
// go at once, the 21st is refused: the rate drops to
// rateConfirmedPlateau × 20 when the 429 says its limit is 20, and to
// ratePlateau × 20 when it says nothing.
func TestClientTakesTheLimitA429Announces(t *testing.T) {
	for _, c := range []struct {
		name string
		meta string
		want float64
	}{
		{"announced", `,"meta":{"rateLimit":{"limit":20,"remaining":0,"reset":%d}}`, rateConfirmedPlateau * 20},
		{"silent", "", ratePlateau * 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) != 21 {
					io.WriteString(w, describeOK)
					return
				}
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				meta := c.meta
				if meta != "" {
					// A reset that has passed: the quota does not hold the
					// retry back (the recorded sleeps pass no time).
					meta = fmt.Sprintf(meta, time.Now().Unix())
				}
				io.WriteString(w, `{"response":{"code":1429,"name":"RateLimitError","message":"slow down"}`+meta+`}`)
			})
			cl, _ := newTestClient(t, h, WithMaxInFlight(1, 1))
			recordSleeps(cl)
			cl.budget.rate = newRateCtl(rateConfig{start: 1000}, time.Now()) // twenty at once
			for i := range 21 {
				if _, err := cl.Describe(context.Background(), "x"); err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
			}
			if got := cl.Rate(); math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("rate %.4f after the 429, want %.4f", got, c.want)
			}
		})
	}
}

// A read that starts in a window someone else has mostly used (the run
// before, another client of the tenant) counts a fifth of the limit at its
// first 429. When the 429 announces the limit, that 429 says nothing and
// the next one, in a window of its own, finds the limit: the read keeps to
// 1.15 × the ideal. A silent service leaves the client a fifth of the
// limit to climb back from, which takes longer.
func TestRateFirstWindowShared(t *testing.T) {
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC) // simulate's
	for _, n := range []int{5, 20, 50, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			used := func() *fixedWindow {
				return &fixedWindow{n: n, w: time.Second, start: start, count: n - max(1, n/5)}
			}
			ann := simulate(t, announcing{used(), n}, rateConfig{}, 60*n, DefaultConcurrency, DefaultConcurrency, 5*time.Millisecond)
			silent := simulate(t, used(), rateConfig{}, 60*n, DefaultConcurrency, DefaultConcurrency, 5*time.Millisecond)
			ideal := time.Duration(float64(ann.accepted) / float64(n) * float64(time.Second))
			over := ann.elapsed.Seconds() / ideal.Seconds()
			share := float64(ann.throttled) / float64(ann.accepted+ann.throttled)
			t.Logf("announced: %s (%.3f × the ideal), %d throttled; silent: %s", ann.elapsed.Round(time.Millisecond), over, ann.throttled, silent.elapsed.Round(time.Millisecond))
			if over > 1.15 || share > 0.02 {
				t.Errorf("announced: %.3f × the ideal, %.2f %% throttled; want at most 1.15 and 2 %%", over, 100*share)
			}
			if ann.elapsed >= silent.elapsed {
				t.Errorf("announced %s, not faster than silent %s", ann.elapsed, silent.elapsed)
			}
		})
	}
}

// TestRateLongWindowUsedBeforeTheClient: a service of long windows (60 s)
// that announces no limit. A first window someone else had nearly used
// (2 requests left) does not set the rate: taken for it, 2 requests in
// 60 s put the client at its floor, and 600 requests took hours; the
// next window, the client's own, goes at the service's rate. A service
// whose limit is that low costs one more 429 than the rule's first
// count would have, not more.
func TestRateLongWindowUsedBeforeTheClient(t *testing.T) {
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC) // simulate's
	used := simulate(t, &fixedWindow{n: 3000, w: time.Minute, start: start, count: 2998}, rateConfig{}, 600, DefaultConcurrency, DefaultConcurrency, 5*time.Millisecond)
	t.Logf("window used by someone else: %s, %d throttled, final rate %.2f", used.elapsed.Round(time.Millisecond), used.throttled, used.finalRate)
	if used.elapsed > 70*time.Second || used.throttled > 2 {
		t.Errorf("600 requests after a window someone else used took %s with %d 429s; want one wait for the next window (about 60 s) and at most 2", used.elapsed, used.throttled)
	}
	low := simulate(t, &fixedWindow{n: 2, w: time.Minute, start: start}, rateConfig{}, 8, DefaultConcurrency, DefaultConcurrency, 5*time.Millisecond)
	t.Logf("2 a minute: %s, %d throttled", low.elapsed.Round(time.Millisecond), low.throttled)
	if low.accepted != 8 || low.elapsed > 4*time.Minute || low.throttled > 5 {
		t.Errorf("8 requests at 2 a minute: %d accepted in %s with %d 429s; want all in about 3 minutes with at most 5", low.accepted, low.elapsed, low.throttled)
	}
}
