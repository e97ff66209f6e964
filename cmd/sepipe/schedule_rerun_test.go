package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
)

// A run that met the quota spent before it could list is run again,
// whole, after the reset, once: if the quota is spent again by then
// (another client takes each window), the chain ends and the next
// scheduled run tries. The rerun counted neither against --max-runs nor
// as a continuation, so `sepipe schedule --max-runs 1` ran again after
// every reset and never exited (found by review).
func TestScheduleWholeRerunsEnd(t *testing.T) {
	var logs strings.Builder
	g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
	log, _ := g.loggerTo(g.stderr)
	n := 0
	s := &scheduler{sched: &onceSoon{}, loc: time.UTC, log: log, maxRuns: 1, run: func(ctx context.Context, continuation bool) error {
		n++
		if n >= 20 {
			return nil // ends the test on HEAD
		}
		// The quota is spent again by the time each run starts; it
		// resets soon (here: at once).
		return quotaBeforeRun{&extract.QuotaError{Reset: time.Now().Add(-continueMargin), Err: extract.ErrQuotaExhausted}}
	}}
	if err := s.loop(context.Background(), make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	if n > 2 {
		t.Errorf("--max-runs 1: %d runs, the run met the spent quota each time and ran whole again after every reset; want the chain ended (at most one rerun)", n)
	}
}
