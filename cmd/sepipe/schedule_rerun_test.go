package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
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
	s := &scheduler{sched: &onceSoon{}, loc: time.UTC, log: log, maxRuns: 1, run: func(ctx context.Context, continuation bool, _ []string) error {
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

// TestSchedulerRetriesAFailedRun: a failed run is tried again, up to
// schedule.retries times, each wait twice the one before: only the
// streams that failed (not one that failed for its configuration) when
// others committed, the whole run when none did; a retry that succeeds
// ends the chain. What a retry cannot mend (a refused refresh token) is
// not retried, and a chain whose retries all fail leaves the day to the
// next scheduled run.
func TestSchedulerRetriesAFailedRun(t *testing.T) {
	partly := &pipeline.RunError{RunID: "r1", Partial: true, Failed: []*pipeline.ObjectError{
		{Object: "user", Step: "read", Err: extract.ErrRetriesExhausted},
		{Object: "group", Step: "config", Err: errors.New("primary key names no field")}}}
	down := errors.New("token endpoint: connection refused")
	refused := refreshError(t, http.StatusBadRequest, `{"error":"invalid_grant","error_description":"refresh token revoked"}`)
	for _, tc := range []struct {
		name    string
		results []error
		want    []string // the objects each run was given ("" for the configured selection)
		log     string
	}{
		// The retry of user fails whole (the service still down): the
		// next retry reads user again, not what committed.
		{"partly failed, then down, then ok", []error{partly, down, nil}, []string{"", "user", "user"}, "run retrying the streams that failed"},
		{"every retry fails", []error{down, down, down, nil}, []string{"", "", ""}, "not retrying again: every retry of the run failed"},
		{"refresh token refused", []error{refused, nil}, []string{""}, "run failed"},
		{"only a configuration failed", []error{&pipeline.RunError{RunID: "r", Failed: partly.Failed[1:]}, nil}, []string{""}, "run failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
			log, _ := g.loggerTo(g.stderr)
			var got []string
			var at []time.Time
			s := &scheduler{sched: &onceSoon{}, loc: time.UTC, log: log, maxRuns: 1, retries: 2, retryDelay: 40 * time.Millisecond,
				run: func(ctx context.Context, continuation bool, objects []string) error {
					if continuation {
						t.Error("a retry ran as a continuation (it would read only what a quota deferred)")
					}
					got = append(got, strings.Join(objects, ","))
					at = append(at, time.Now())
					if len(got) > len(tc.results) {
						return nil
					}
					return tc.results[len(got)-1]
				}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.loop(ctx, make(chan os.Signal)); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("runs given %q, want %q\n%s", got, tc.want, logs.String())
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log without %q:\n%s", tc.log, logs.String())
			}
			if len(at) == 3 {
				if first, second := at[1].Sub(at[0]), at[2].Sub(at[1]); first < 40*time.Millisecond || second < 80*time.Millisecond {
					t.Errorf("retries after %v and %v, want at least 40ms and then 80ms", first, second)
				}
			}
		})
	}
}

// TestSchedulerRetryAfterTheNextRun: a retry that would come after the
// next scheduled run is left to that run; after the last scheduled run
// (--max-runs) none waits more than an hour.
func TestSchedulerRetryAfterTheNextRun(t *testing.T) {
	var logs strings.Builder
	g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
	log, _ := g.loggerTo(g.stderr)
	var runs []string
	s := &scheduler{sched: every(150 * time.Millisecond), loc: time.UTC, log: log, maxRuns: 2, retries: 2, retryDelay: 2 * time.Hour,
		run: func(ctx context.Context, _ bool, objects []string) error {
			runs = append(runs, strings.Join(objects, ","))
			return errors.New("the service is down")
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.loop(ctx, make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the schedule waited for a retry two hours off after its last run:\n%s", logs.String())
	}
	if len(runs) != 2 || !strings.Contains(logs.String(), "not retrying: the next scheduled run comes first") {
		t.Errorf("runs %q, want the two scheduled runs and no retry:\n%s", runs, logs.String())
	}
}

// TestSchedulerRetriesAFailedStreamBesideADeferredOne: a run in which a
// stream failed (the service down for a moment) and the quota deferred
// another past the next scheduled run (a daily window) is not continued
// before that run; the failed stream is retried all the same. It was not:
// any deferred stream with a reset (continueAt's ok) stopped the retry,
// whether or not a continuation was coming, and the failed stream waited
// for the next night.
func TestSchedulerRetriesAFailedStreamBesideADeferredOne(t *testing.T) {
	for _, maxRuns := range []int{0, 1} {
		t.Run(fmt.Sprintf("max runs %d", maxRuns), func(t *testing.T) {
			var logs strings.Builder
			g := &globals{logLevel: "info", logFormat: "text", stderr: &syncWriter{w: &logs}}
			log, _ := g.loggerTo(g.stderr)
			sigs := make(chan os.Signal, 1)
			var got []string
			s := &scheduler{sched: &onceSoon{}, loc: time.UTC, log: log, maxRuns: maxRuns, retries: 2, retryDelay: 40 * time.Millisecond,
				run: func(ctx context.Context, continuation bool, objects []string) error {
					got = append(got, strings.Join(objects, ","))
					if len(got) > 1 {
						sigs <- os.Interrupt // ends the schedule after this run
						return nil
					}
					return &pipeline.RunError{RunID: "r1", Partial: true,
						Failed: []*pipeline.ObjectError{{Object: "user", Step: "read", Err: extract.ErrRetriesExhausted}},
						Deferred: []*pipeline.ObjectError{{Object: "course", Step: "read",
							Err: &extract.QuotaError{Reset: time.Now().Add(48 * time.Hour), Err: extract.ErrQuotaExhausted}}}}
				}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go func() {
				<-ctx.Done()
				select {
				case sigs <- os.Interrupt:
				default:
				}
			}()
			if err := s.loop(ctx, sigs); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != "|user" {
				t.Errorf("runs given %q, want the scheduled run and a retry of user\n%s", got, logs.String())
			}
		})
	}
}

// TestRetryWhatLeavesARefusedClient: a token endpoint that refuses the
// OAuth client (401 invalid_client: a wrong id or secret) is mended by a
// person, not by another try, as a refused refresh token is; one that
// fails (503) is tried again.
func TestRetryWhatLeavesARefusedClient(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		retry  bool
	}{
		{http.StatusUnauthorized, `{"error":"invalid_client","error_description":"client authentication failed"}`, false},
		{http.StatusBadRequest, `{"error":"invalid_grant","error_description":"refresh token revoked"}`, false},
		{http.StatusServiceUnavailable, `upstream down`, true},
	} {
		err := refreshError(t, tc.status, tc.body)
		if _, retry := retryWhat(err); retry != tc.retry {
			t.Errorf("%d %s: retried %v, want %v (%v)", tc.status, tc.body, retry, tc.retry, err)
		}
	}
}

// refreshError is the error a refresh meets when the token endpoint
// answers status with body each time it is asked.
func refreshError(t *testing.T, status int, body string) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	o, err := extract.NewOAuth(srv.URL, extract.OAuthConfig{ClientID: "cid", ClientSecret: "secret-123456789", RefreshToken: "ref-123456789"},
		&extract.FileTokenStore{Path: filepath.Join(t.TempDir(), "t.json")}, extract.WithOAuthHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = o.Token(context.Background()); err == nil {
		t.Fatalf("%d: the token endpoint's answer gave no error", status)
	}
	return err
}

// TestRetryWhatOfAnUnpublishedRun: a run that committed, failed a stream
// and could not publish is retried for that stream (which publishes too);
// one that only could not publish is left to the next run.
func TestRetryWhatOfAnUnpublishedRun(t *testing.T) {
	re := &pipeline.RunError{RunID: "r", Partial: true, Failed: []*pipeline.ObjectError{{Object: "user", Step: "read", Err: extract.ErrRetriesExhausted}}}
	unpublished := fmt.Errorf("run r %w: publishing failed: disk full", pipeline.ErrNotPublished)
	if objs, ok := retryWhat(fmt.Errorf("%w; %w", unpublished, re)); !ok || strings.Join(objs, ",") != "user" {
		t.Errorf("unpublished with a failed stream: retry %v %v, want user", objs, ok)
	}
	if objs, ok := retryWhat(unpublished); ok {
		t.Errorf("only unpublished: retry %v, want none (the next run publishes)", objs)
	}
}
