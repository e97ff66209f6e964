package webhooks

import (
	"testing"
	"time"
)

// A publish writes the whole working database anew and holds it, so the
// next one waits publishGap times as long as the last took when that is
// longer than the interval: at a fixed 10 s, a warehouse whose publish
// takes 8 s spent four fifths of the listener's time publishing while
// events waited in the spool.
func TestPublishWaitsForTenTimesItsCost(t *testing.T) {
	now := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
	every := 10 * time.Second
	for _, c := range []struct {
		name      string
		dirty     bool
		sinceLast time.Duration
		cost      time.Duration
		want      bool
	}{
		{"first publish", true, 0, 0, true},
		{"cheap, interval passed", true, 10 * time.Second, 100 * time.Millisecond, true},
		{"cheap, interval not passed", true, 9 * time.Second, 100 * time.Millisecond, false},
		{"dear, interval passed, ten times its cost not", true, 15 * time.Second, 3 * time.Second, false},
		{"dear, ten times its cost passed", true, 30 * time.Second, 3 * time.Second, true},
		{"nothing loaded since", false, time.Hour, 0, false},
	} {
		l := &eventLoader{dirty: c.dirty, lastCost: c.cost}
		if c.sinceLast > 0 {
			l.lastPublished = now.Add(-c.sinceLast)
		}
		if got := l.publishDue(now, every); got != c.want {
			t.Errorf("%s: %v since the last publish, which took %v: due %v, want %v", c.name, c.sinceLast, c.cost, got, c.want)
		}
	}
}
