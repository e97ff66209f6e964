package pipeline_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
)

// The fake's hostile wire (servicetest.WithHostileWire): one report object
// per hostile case of issue 19's paging, size, redirect and silence. Each
// test syncs the case's object beside course and checks that only the
// case's stream fails (a partial run: exit 3), that course commits, and
// that nothing of the hostile object is committed.

// wireRunLimit ends a sync whose defence broke instead of letting it run
// for ever; no test comes near it when the defences hold.
const wireRunLimit = 40 * time.Second

type wireRun struct {
	srv   *servicetest.Server
	out   string
	res   *pipeline.Result
	err   error
	took  time.Duration
	wired string // the case's object id
}

// syncWire syncs course and the object of case c of a fresh fake.
func syncWire(t *testing.T, c servicetest.HostileCase, fakeOpts []servicetest.Option, opts ...extract.Option) *wireRun {
	t.Helper()
	srv := servicetest.NewServer(append([]servicetest.Option{servicetest.WithUsers(10), servicetest.WithHostileWire(c)}, fakeOpts...)...)
	t.Cleanup(srv.Close)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), wireRunLimit)
	defer cancel()
	start := time.Now()
	res, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.AccessToken(), append([]extract.Option{extract.WithPageSize(50)}, opts...)...),
		pipeline.Config{Out: out, Now: clock(day1), Only: []string{"course", c.ObjectID()}})
	return &wireRun{srv: srv, out: out, res: res, err: err, took: time.Since(start), wired: c.ObjectID()}
}

// failedAlone checks that the run is partial, that the case's stream is
// the one that failed, that course committed and that nothing of the
// case's object reached the warehouse or the lake.
func (w *wireRun) failedAlone(t *testing.T) {
	t.Helper()
	var re *pipeline.RunError
	if !errors.As(w.err, &re) || !re.Partial || len(re.Failed) != 1 || re.Failed[0].Object != w.wired {
		t.Fatalf("err = %v, want a partial *pipeline.RunError naming %s alone", w.err, w.wired)
	}
	counts := objectCounts(t, w.out)
	if counts["course"] == 0 || len(counts) != 1 {
		t.Errorf("tables %v, want course alone, committed", counts)
	}
	db := warehousetest.Open(t, w.out)
	if st := warehousetest.Scalar[string](t, db, `SELECT status FROM _sepipe_runs`); st != "partial" {
		t.Errorf("run status %s, want partial", st)
	}
	filepath.WalkDir(filepath.Join(w.out, "lake"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "wire_") {
			t.Errorf("the failed stream reached the lake: %s", p)
		}
		return nil
	})
}

// TestHostileWireRepeatedPageFailsItsStream: page 3 holding page 2's rows
// under its own number is a paging fault: the object is read again from
// page 1 (extract.DefaultHealing times), then its stream fails; the
// duplicates are never committed.
func TestHostileWireRepeatedPageFailsItsStream(t *testing.T) {
	t.Parallel()
	w := syncWire(t, servicetest.HostileRepeatedPage, nil)
	w.failedAlone(t)
	var ie *extract.IntegrityError
	// Pages arrive in any order: either may be named as the repeat.
	if msg := w.err.Error(); !errors.As(w.err, &ie) || !strings.Contains(msg, "page 2 holds the same rows as page 3") &&
		!strings.Contains(msg, "page 3 holds the same rows as page 2") {
		t.Fatalf("err = %v, want an *extract.IntegrityError naming the repeat", w.err)
	}
	if ie.Reads != 1+extract.DefaultHealing {
		t.Errorf("failed after %d reads, want %d (read again before failing)", ie.Reads, 1+extract.DefaultHealing)
	}
	if n := w.srv.HostileWire().RepeatedPages; n < int64(1+extract.DefaultHealing) {
		t.Errorf("the repeated page was served %d times, want once per read", n)
	}
}

// TestHostileWireEndlessPagesEndTheStream: pages that stay full past the
// total page 1 announced, each announcing one page more, end the stream
// with a clear error after a bounded number of requests.
func TestHostileWireEndlessPagesEndTheStream(t *testing.T) {
	t.Parallel()
	w := syncWire(t, servicetest.HostileEndlessPages, nil)
	w.failedAlone(t)
	var ie *extract.IntegrityError
	if !errors.As(w.err, &ie) || !strings.Contains(w.err.Error(), "total") {
		t.Fatalf("err = %v, want an *extract.IntegrityError about the totals", w.err)
	}
	// Page 1 announces two pages: two requests per read.
	if n := w.srv.Service.RequestsFor(w.wired); n > int64(2*(1+extract.DefaultHealing)) {
		t.Errorf("%d requests for %s, want at most %d", n, w.wired, 2*(1+extract.DefaultHealing))
	}
}

// TestHostileWireEndlessUntotalledPagesEndTheStream: full pages that
// announce no totals and never end stop at requests.max_pages
// (extract.WithMaxPages) with extract.ErrEndlessPages; course commits.
func TestHostileWireEndlessUntotalledPagesEndTheStream(t *testing.T) {
	t.Parallel()
	const maxPages = 30
	w := syncWire(t, servicetest.HostileEndlessUntotalled, nil, extract.WithMaxPages(maxPages))
	w.failedAlone(t)
	if !errors.Is(w.err, extract.ErrEndlessPages) || !strings.Contains(w.err.Error(), "no totals announced") {
		t.Fatalf("err = %v, want extract.ErrEndlessPages for pages without totals", w.err)
	}
	// One window of concurrent pages may be in flight past the bound.
	if n := w.srv.Service.RequestsFor(w.wired); n < maxPages || n > maxPages+int64(extract.DefaultConcurrency) {
		t.Errorf("%d requests for %s, want %d to %d", n, w.wired, maxPages, maxPages+extract.DefaultConcurrency)
	}
}

// TestHostileWireAbsurdTotalEndsTheStream: page 1 announcing 9e15 rows
// ends the stream at once with extract.ErrEndlessPages.
func TestHostileWireAbsurdTotalEndsTheStream(t *testing.T) {
	t.Parallel()
	w := syncWire(t, servicetest.HostileAbsurdTotal, nil)
	w.failedAlone(t)
	if !errors.Is(w.err, extract.ErrEndlessPages) {
		t.Fatalf("err = %v, want extract.ErrEndlessPages", w.err)
	}
	if n := w.srv.Service.RequestsFor(w.wired); n != 1 {
		t.Errorf("%d requests for %s, want 1 (page 1 alone)", n, w.wired)
	}
}

// TestHostileWireHugeBodyFailsItsStream: a streamed body (no
// Content-Length) past requests.max_response_bytes fails its stream with a
// message naming the limit, and the client stops reading it.
func TestHostileWireHugeBodyFailsItsStream(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	w := syncWire(t, servicetest.HostileHugeBody, nil, extract.WithMaxResponseBytes(limit))
	w.failedAlone(t)
	if !errors.Is(w.err, extract.ErrResponseTooLarge) || !strings.Contains(w.err.Error(), "1048576") ||
		!strings.Contains(w.err.Error(), "max_response_bytes") {
		t.Fatalf("err = %v, want extract.ErrResponseTooLarge naming the limit", w.err)
	}
	sent := w.srv.HostileWire().HugeBytes
	if sent == 0 || sent > servicetest.DefaultHostileHugeBytes/2 {
		t.Errorf("the fake wrote %d of its %d bytes: the client did not stop reading at the limit", sent, servicetest.DefaultHostileHugeBytes)
	}
}

// TestHostileWireRedirectSendsNoCredential: results redirected to another
// port of the same host: the other origin never sees a credential (the
// client refuses the redirect or follows it without them), and the stream
// fails without taking the others with it.
func TestHostileWireRedirectSendsNoCredential(t *testing.T) {
	t.Parallel()
	w := syncWire(t, servicetest.HostileRedirect, nil)
	st := w.srv.HostileWire()
	if st.Redirects == 0 {
		t.Fatal("the fake redirected nothing")
	}
	// A refused redirect is not retried: another attempt would be sent to
	// the same place. (A read may restart DefaultHealing times.)
	if st.OtherOriginRequests == 0 && st.Redirects > int64(1+extract.DefaultHealing) {
		t.Errorf("the fake redirected %d requests: the refusal was retried", st.Redirects)
	}
	if st.OtherOriginCredentials != 0 {
		t.Fatalf("the other origin (%s) received a credential on %d of %d requests", st.OtherOrigin, st.OtherOriginCredentials, st.OtherOriginRequests)
	}
	w.failedAlone(t)
	if !errors.Is(w.err, extract.ErrCrossOriginRedirect) && st.OtherOriginRequests == 0 {
		t.Errorf("err = %v: neither refused as a cross-origin redirect nor followed", w.err)
	}
}

// TestHostileWireSilenceEndsWithinTimeoutTimesAttempts: a server that
// takes the request and never answers, or stops mid-body, ends the stream
// within about requests.timeout × max_attempts (plus max_wait between
// attempts), not minutes; the bound asserted is a generous upper one.
func TestHostileWireSilenceEndsWithinTimeoutTimesAttempts(t *testing.T) {
	t.Parallel()
	const (
		timeout  = time.Second
		attempts = 2
		maxWait  = time.Second
		slack    = 15 * time.Second
	)
	for _, c := range []servicetest.HostileCase{servicetest.HostileSilence, servicetest.HostileStall} {
		t.Run(string(c), func(t *testing.T) {
			w := syncWire(t, c, nil, extract.WithTimeout(timeout), extract.WithRetry(attempts, maxWait))
			if bound := attempts*timeout + maxWait + slack; w.took > bound {
				t.Errorf("the run took %s, more than timeout × attempts + max_wait + slack = %s", w.took, bound)
			}
			if n := w.srv.HostileWire().Held; n == 0 {
				t.Fatal("the fake held no connection")
			}
			w.failedAlone(t)
			if !errors.Is(w.err, extract.ErrRetriesExhausted) || !strings.Contains(w.err.Error(), "no answer for 1s") {
				t.Errorf("err = %v, want retries exhausted on a timeout of 1s", w.err)
			}
		})
	}
}
