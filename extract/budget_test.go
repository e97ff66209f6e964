package extract

import (
	"context"
	"errors"
	"sync"
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
