package extract

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// budget is the one request budget of a Client: every request of every
// kind, retries included, first takes a slot of an adaptive concurrency
// limit, then a token of the shared rate limiter.
//
// The concurrency limit is AIMD: it starts at max, halves on a 429 and
// grows by one after a run of recoverRun successes, never above max nor
// below 1. A 429 halves the limit once per round: answers to requests
// that started before the last halving do not halve it again, so a burst
// of 429s from one round of requests counts as one signal. A 429 that
// carries Retry-After also pauses every request of the client until then.
type budget struct {
	limiter    *rate.Limiter
	max        int
	recoverRun int
	now        func() time.Time
	sleep      func(context.Context, time.Duration) error

	mu         sync.Mutex
	limit      int
	inflight   int
	run        int    // successes in a row
	epoch      uint64 // incremented on every halving
	pauseUntil time.Time
	wake       chan struct{} // closed and replaced when a slot may be free
	quota      Quota         // the service's announced request quota (quota.go)
}

// slot is held by one request in flight.
type slot struct{ epoch uint64 }

// outcome of a request, as the budget sees it.
type outcome int

const (
	outcomeOK        outcome = iota // a 2xx or a final 4xx: the service is fine
	outcomeThrottled                // 429
	outcomeFailed                   // 5xx or transport failure: breaks a run of successes
)

func newBudget(l *rate.Limiter, max, recoverRun int, now func() time.Time, sleep func(context.Context, time.Duration) error) *budget {
	return &budget{
		limiter: l, max: max, recoverRun: recoverRun, now: now, sleep: sleep,
		limit: max, wake: make(chan struct{}),
	}
}

// acquire waits for a pause to pass (unless the caller already slept until
// sleptUntil or later), for a free slot and for the rate limiter. It
// returns how long it slept for a pause.
func (b *budget) acquire(ctx context.Context, sleptUntil time.Time) (slot, time.Duration, error) {
	b.mu.Lock()
	pause := b.pauseUntil
	b.mu.Unlock()
	var paused time.Duration
	if pause.After(sleptUntil) {
		// Sleep once: a test clock may stand still.
		if d := pause.Sub(b.now()); d > 0 {
			if err := b.sleep(ctx, d); err != nil {
				return slot{}, 0, err
			}
			paused = d
		}
	}
	for {
		b.mu.Lock()
		if b.inflight < b.limit {
			b.inflight++
			s := slot{epoch: b.epoch}
			b.mu.Unlock()
			if err := b.limiter.Wait(ctx); err != nil {
				b.release(s, outcomeFailed)
				return slot{}, paused, err
			}
			return s, paused, nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return slot{}, paused, ctx.Err()
		case <-wake:
		}
	}
}

// release frees a slot and adapts the limit to the outcome.
func (b *budget) release(s slot, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	switch o {
	case outcomeThrottled:
		b.run = 0
		if s.epoch == b.epoch {
			b.limit = max(1, b.limit/2)
			b.epoch++
		}
	case outcomeOK:
		b.run++
		if b.run >= b.recoverRun && b.limit < b.max {
			b.limit++
			b.run = 0
		}
	default:
		b.run = 0
	}
	close(b.wake)
	b.wake = make(chan struct{})
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
