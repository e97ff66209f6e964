package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sepipe/sepipe/load"
)

// ListenState is what a running listener tells its operators (set it in
// ListenConfig.State): whether it can do its job (Ready, for a readiness
// probe), and how far behind it is (Pending, OldestUnpublished,
// LastPublish, for the metrics). Its methods are safe for concurrent use;
// before Listen starts it is not ready.
type ListenState struct {
	mu    sync.Mutex
	lake  load.Lake
	spool *Spool
	// publishEvery is the publish interval, for when a publish is stuck.
	publishEvery time.Duration
	// heldSince: since when loads have found the working database held by
	// another sepipe process (a sync), without one that succeeded.
	heldSince time.Time
	// publishErr, publishFailing: the last publish's error, and since
	// when publishes fail.
	publishErr     error
	publishFailing time.Time
	lastPublish    time.Time
	// oldestLoaded is the time the oldest event loaded and not yet
	// published was received (zero when none is).
	oldestLoaded time.Time
}

// heldTooLong is how long loads may find the working database held by
// another sepipe process before the listener says it is not ready: a
// sync's commit and publish take seconds to minutes.
const heldTooLong = 15 * time.Minute

// start is called by Listen once it serves.
func (s *ListenState) start(lake load.Lake, spool *Spool, publishEvery time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lake, s.spool, s.publishEvery = lake, spool, publishEvery
}

// loaded records a load's outcome; oldest is the received time of the
// oldest event it loaded.
func (s *ListenState) loaded(err error, oldest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.heldSince = time.Time{}
		if s.oldestLoaded.IsZero() || oldest.Before(s.oldestLoaded) {
			s.oldestLoaded = oldest
		}
	case errors.Is(err, load.ErrHeldBySepipe):
		if s.heldSince.IsZero() {
			s.heldSince = time.Now()
		}
	}
}

// published records a publish's outcome.
func (s *ListenState) published(err error, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.publishErr == nil {
			s.publishFailing = at
		}
		s.publishErr = err
		return
	}
	s.publishErr, s.publishFailing, s.lastPublish, s.oldestLoaded = nil, time.Time{}, at, time.Time{}
}

// Ready reports why the listener cannot do its job now, a cause a line
// (none: it can): it is not listening yet; the event spool or the output
// folder cannot be written; the working database cannot be opened for a
// load (another program holds it for writing, or another sepipe process
// has held it for more than 15 minutes); publishes have failed for more
// than twice the publish interval (at least two minutes).
func (s *ListenState) Ready(ctx context.Context) []string {
	s.mu.Lock()
	lake, spool, every := s.lake, s.spool, s.publishEvery
	heldSince, publishErr, failing := s.heldSince, s.publishErr, s.publishFailing
	s.mu.Unlock()
	if spool == nil {
		return []string{"not listening yet"}
	}
	var causes []string
	for _, d := range []struct{ what, dir string }{{"the event spool", spool.Dir()}, {"the output folder", lake.Root}} {
		if err := load.CheckDirWritable(d.dir); err != nil {
			causes = append(causes, fmt.Sprintf("%s %s cannot be written: %v", d.what, d.dir, err))
		}
	}
	switch err := load.ProbeState(ctx, lake); {
	case errors.Is(err, load.ErrHeldBySepipe) && !heldSince.IsZero() && time.Since(heldSince) > heldTooLong:
		causes = append(causes, fmt.Sprintf("another sepipe process has held the working database since %s: events wait in the spool", heldSince.UTC().Format(time.RFC3339)))
	case errors.Is(err, load.ErrHeldBySepipe):
	case err != nil:
		causes = append(causes, fmt.Sprintf("the working database cannot be opened for a load: %v", err))
	}
	if publishErr != nil && time.Since(failing) > max(2*every, 2*time.Minute) {
		causes = append(causes, fmt.Sprintf("publishing has failed since %s: %v", failing.UTC().Format(time.RFC3339), publishErr))
	}
	return causes
}

// Pending is how many acknowledged events wait in the spool to be loaded.
func (s *ListenState) Pending() int {
	s.mu.Lock()
	spool := s.spool
	s.mu.Unlock()
	if spool == nil {
		return 0
	}
	return spool.Pending()
}

// OldestUnpublished is when the oldest acknowledged event that readers of
// the published warehouse do not see yet was received (zero: none).
func (s *ListenState) OldestUnpublished() time.Time {
	s.mu.Lock()
	oldest, spool := s.oldestLoaded, s.spool
	s.mu.Unlock()
	if spool != nil {
		if t := spool.oldestPending(); !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return oldest
}

// LastPublish is when the working database was last published by this
// listener (zero: not yet).
func (s *ListenState) LastPublish() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastPublish
}
