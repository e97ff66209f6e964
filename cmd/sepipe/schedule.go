package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

func init() { register(newScheduleCmd) }

func newScheduleCmd(g *globals) *cobra.Command {
	f := &syncFlags{}
	var spec, tz, retryDelay string
	var maxRuns, retries int
	cmd := &cobra.Command{
		Use:   "schedule [--cron SPEC] [--time-zone ZONE]",
		Short: "Run the sync on a cron schedule, in the foreground",
		Long: `Schedule is a long-running process that runs the same sync as 'sepipe sync'
on a cron expression (schedule.cron, or --cron) in a time zone
(schedule.time_zone, or --time-zone; default the machine's). It logs the next
run time after each start, never runs two syncs at once (a tick that comes
while a run is still going is skipped and logged), and keeps going when a
run fails (the failure is logged and recorded in _sepipe_runs). A failed run
is tried again (schedule.retries, default 2) after schedule.retry_delay
(default 10m), then after twice that, if that comes before the next
scheduled run: only the streams that failed when others committed, the
whole run when none did; not what a retry cannot mend (a refused refresh
token, a stream's configuration, a frozen schema). When a run
ends with streams the service's request quota deferred, it runs again just
after the quota resets, if that is before the next scheduled run, and goes on
window by window while each such run leaves fewer streams unfinished.

Cron expressions: 5 fields "minute hour day-of-month month day-of-week"
("0 2 * * *" is 02:00 every day, "30 6 * * 1-5" 06:30 on weekdays), 6 fields
with seconds first, or @hourly, @daily, @every 6h. Times follow the time zone.
Where daylight saving starts or ends, an expression with fixed hours ("0 2 * * *",
@daily) runs once for each time it names: a time the clocks jump over runs at
the end of the gap, a time they pass twice runs the first time only. One that
matches every hour ("*/15 * * * *", @hourly) keeps its pace in real time.

SIGTERM or SIGINT (Ctrl-C) stops it cleanly: no new run starts, the current
one finishes and commits, then it exits 0. A second signal cancels the
current run (which then commits nothing) and exits. Run it under systemd, a
container or supervisord; docs/cli.md has a unit file and the plain cron
alternative.`,
		Example: `  sepipe schedule                                  # schedule.cron from ./sepipe.yaml
  sepipe schedule --cron "0 2 * * *" --time-zone Europe/Berlin
  sepipe schedule --cron "@every 6h" --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.load(cmd, g)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("cron") {
				c.Schedule.Cron = spec
			}
			if cmd.Flags().Changed("time-zone") {
				c.Schedule.TimeZone = tz
			}
			if c.Schedule.Cron == "" {
				return usagef("no schedule: give --cron or write schedule.cron in sepipe.yaml")
			}
			sched, err := parseCron(c.Schedule.Cron)
			if err != nil {
				if cmd.Flags().Changed("cron") {
					return usageError{&ConfigError{Key: "--cron", Msg: err.Error()}}
				}
				return c.errf("schedule.cron", "%v", err)
			}
			loc, err := time.LoadLocation(c.Schedule.TimeZone)
			if err != nil {
				if cmd.Flags().Changed("time-zone") {
					return usagef("--time-zone: unknown time zone %q (want an IANA name such as Europe/Berlin, UTC or Local)", tz)
				}
				return c.errf("schedule.time_zone", "unknown time zone %q", c.Schedule.TimeZone)
			}
			if maxRuns < 0 {
				return usagef("--max-runs must not be negative, got %d", maxRuns)
			}
			if cmd.Flags().Changed("retries") {
				if retries < 0 || retries > maxRetries {
					return usagef("--retries: want 0 to %d, got %d", maxRetries, retries)
				}
				c.Schedule.Retries = &retries
			}
			if cmd.Flags().Changed("retry-delay") {
				d, err := ParseDuration(retryDelay)
				if err != nil || d < time.Second {
					return usagef("--retry-delay: want a duration of at least 1s (e.g. 10m), got %q", retryDelay)
				}
				c.Schedule.RetryDelay = Duration(d)
			}
			log, err := g.loggerTo(g.stderr)
			if err != nil {
				return err
			}
			c.warnTo(func(w string) { log.Warn(w) })
			if _, err := newClient(c, log, true); err != nil {
				return err // a missing token fails now, not at 2 a.m.
			}
			mc, err := f.metrics.resolve(cmd, c)
			if err != nil {
				return err
			}
			var m *monitor.Metrics
			var running atomic.Bool
			if mc.Addr != "" {
				m = monitor.New(c.tenant)
				stop, err := serveMonitor(cmd.Context(), mc.Addr, monitor.Handler(m, func(ctx context.Context) []string {
					return scheduleReady(ctx, c.Output.Dir, running.Load())
				}), log)
				if err != nil {
					return err
				}
				defer stop() //nolint:errcheck // closing
			}
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			s := &scheduler{sched: sched, loc: loc, log: log, maxRuns: maxRuns,
				retries: *c.Schedule.Retries, retryDelay: time.Duration(c.Schedule.RetryDelay),
				run: func(ctx context.Context, continuation bool, objects []string) error {
					fb := &logProgress{log: log, every: 10 * time.Second, objs: map[string]*objLog{}}
					// --objects are a standing selection here: a day a quota
					// deferred streams is continued within them, and a
					// continuation reads nothing if nothing is left.
					cont := pipeline.ContinueOrReadAll
					if continuation {
						cont = pipeline.ContinueOnly
					}
					if objects == nil {
						objects = f.objects
					}
					running.Store(true)
					defer running.Store(false)
					_, err := runSync(ctx, g, c, log, fb, m, objects, cont, nil)
					return err
				}}
			log.Info("schedule started", "cron", c.Schedule.Cron, "time_zone", loc.String(), "out", c.Output.Dir)
			return s.loop(cmd.Context(), sigs)
		},
	}
	f.add(cmd, true)
	f.metrics.addServe(cmd, "default: not served")
	cmd.Flags().StringVar(&spec, "cron", "", "cron expression; overrides schedule.cron")
	cmd.Flags().StringVar(&tz, "time-zone", "", "IANA time zone of the cron expression (e.g. Europe/Berlin); overrides schedule.time_zone")
	cmd.Flags().IntVar(&retries, "retries", defaultRetries, "times a failed run is tried again before the next scheduled run; overrides schedule.retries")
	cmd.Flags().StringVar(&retryDelay, "retry-delay", defaultRetryDelay.String(), "wait before the first retry of a failed run, doubled for each later one; overrides schedule.retry_delay")
	cmd.Flags().IntVar(&maxRuns, "max-runs", 0, "exit after this many scheduled runs and their continuations after a quota (those within the hour) (0: run until stopped); for trying a schedule out")
	return cmd
}

// scheduleReady is why a schedule cannot do its job now (its readiness
// probe): the output folder cannot be written or its working database
// opened (outputReady), or, between runs, a change of the working
// database has not been published for publishStuck (a program holds warehouse.duckdb open for writing: readers
// see an older run until it lets go).
func scheduleReady(ctx context.Context, out string, running bool) []string {
	causes := outputReady(ctx, out)
	lake := load.Lake{Root: out}
	if fi, err := os.Stat(lake.StatePath()); err == nil && !running && lake.PublishPending() && time.Since(fi.ModTime()) > publishStuck {
		causes = append(causes, fmt.Sprintf("what the working database holds since %s is not published to %s (a program holding it open for writing?): 'sepipe publish' finishes it",
			fi.ModTime().UTC().Format(time.RFC3339), lake.WarehousePath()))
	}
	return causes
}

// publishStuck is how long a change of the working database may stay
// unpublished between runs before a schedule says it is not ready: a
// listener on the same folder publishes its events within seconds.
const publishStuck = 10 * time.Minute

// scheduler runs run on sched, one run at a time.
type scheduler struct {
	sched cron.Schedule
	loc   *time.Location
	log   *slog.Logger
	// run runs a sync: a continuation reads only what the day's runs
	// left; objects, when not nil, are the streams to read instead of the
	// configured selection (a retry of the streams that failed).
	run        func(ctx context.Context, continuation bool, objects []string) error
	maxRuns    int
	retries    int              // schedule.retries: tries again of a failed run, per scheduled run
	retryDelay time.Duration    // schedule.retry_delay: before the first; each later one waits twice as long
	now        func() time.Time // default time.Now
}

// retryWhat says whether a run that ended with err is tried again
// (schedule.retries), and what: the streams that failed, when the run
// committed others, or the whole run (objects nil). Not retried: what a
// retry cannot mend (bad usage or configuration, a refresh token the
// token endpoint refused, an object the service does not have, an output
// folder holding a file that is not sepipe's), a stream that failed for
// its configuration, its name or its schema, a run that committed and only
// its publishing or its Iceberg commit is left (the next run finishes it),
// and what a quota deferred (continued after the reset, continueAt). A
// refresh the token endpoint refused (invalid_grant, invalid_client) is
// mended by a person, not by another try.
func retryWhat(err error) (objects []string, ok bool) {
	var re *pipeline.RunError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.As(err, new(usageError)),
		errors.As(err, new(quotaBeforeRun)), extract.RefreshRefused(err),
		errors.Is(err, pipeline.ErrUnknownObject), errors.Is(err, load.ErrNotDuckDB):
		return nil, false
	case errors.As(err, &re):
		// (A run that committed and could not publish carries its
		// RunError too: its failed streams are retried, which also
		// finishes the publish.)
		for _, f := range re.Failed {
			if f.Mendable() {
				objects = append(objects, f.Object)
			}
		}
		switch {
		case len(objects) == 0:
			return nil, false
		case re.Partial:
			return objects, true
		}
		return nil, true // nothing committed: the whole run again
	case committedNotFinished(err):
		return nil, false
	}
	return nil, true
}

// timerKind is what the schedule does with a run it could start later
// (scheduler.loop's timerFor).
type timerKind int

const (
	timerSet          timerKind = iota // a timer starts it
	timerNextRunFirst                  // the next scheduled run comes first and reads it
	timerTooLate                       // the scheduled runs are done and it is too far off
)

// errRunCancelled is returned when a second signal cancelled a run.
var errRunCancelled = errors.New("schedule stopped: the current run was cancelled by a second signal")

// continueMargin is how long after a quota's reset a continuation starts:
// resets are often given to the second.
const continueMargin = 2 * time.Second

// continueUnscheduled bounds the wait for a continuation once the
// scheduled runs are done (--max-runs): a try-out does not wait for a
// daily quota.
const continueUnscheduled = time.Hour

// unfinished counts the streams a run that ended with err left to a
// continuation (RunError.Unfinished).
func unfinished(err error) int {
	if errors.As(err, new(quotaBeforeRun)) {
		return math.MaxInt // it read nothing: every stream is left
	}
	var re *pipeline.RunError
	if !errors.As(err, &re) {
		return 0
	}
	return len(re.Unfinished())
}

// continueAt is when to continue a run that ended with err: after the
// reset of the quota that deferred its streams (ok false: not at all), or,
// for a run that met the quota spent before it could list what to read
// (quotaBeforeRun), after that reset, as the whole run again (whole).
// When it is not continued for a reason worth a warning, why says it, and
// streams names them. A run whose deferred streams each need more than a
// whole window's quota (and none failed) is not continued: no window holds
// them. A continuation (cont) that left as many streams unfinished as the
// run before it (before) stalled and is not continued either, so a chain
// ends after at most as many continuations as the first run left streams.
func continueAt(err error, cont bool, before int) (at time.Time, ok bool, why string, streams []string) {
	if qb := (quotaBeforeRun{}); errors.As(err, &qb) {
		if cont {
			// Run again after a reset and the quota was spent again:
			// someone else takes each window; one rerun is all.
			return time.Time{}, false, "the quota was spent again before the run could list what to read", nil
		}
		// Nothing read: the whole run again once the quota resets (whole).
		return qb.Reset.Add(continueMargin), true, "", nil
	}
	var re *pipeline.RunError
	if !errors.As(err, &re) {
		return time.Time{}, false, "", nil
	}
	big, left := re.Exceeds(), re.Unfinished()
	switch {
	case len(big) > 0 && len(big) == len(re.Deferred) && len(re.Failed) == 0:
		return time.Time{}, false, "not continuing: these streams need more requests than the quota allows in a whole window; " + extract.ExceedsAdvice, big
	case cont && len(left) >= before && len(re.Deferred) > 0:
		return time.Time{}, false, "the continuation left as many streams unfinished as the run before it: a window's quota does not cover what is left", left
	case cont && len(left) >= before:
		return time.Time{}, false, "the continuation's streams failed again", left
	}
	at, ok = re.ResumeAt()
	return at.Add(continueMargin), ok, "", nil
}

// loop runs until stopped: by the first signal on sigs or ctx's end (the
// current run finishes first), or after maxRuns scheduled runs and their
// continuations. A second signal cancels the current run. A run whose
// streams a request quota deferred is continued after the quota resets
// (continueAt) when that comes before the next scheduled run, so that a
// quota smaller than one sync is worked through window by window.
func (s *scheduler) loop(ctx context.Context, sigs <-chan os.Signal) error {
	if s.now == nil {
		s.now = time.Now
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	var (
		running   bool
		stopping  bool
		cancelled bool
		runs      int  // scheduled runs started
		cont      bool // the current or last run is a continuation
		whole     bool // the pending continuation runs the whole run again (quotaBeforeRun)
		left      int  // streams the last run left unfinished
		contAt    time.Time
		contC     <-chan time.Time // a pending continuation's timer
		attempts  int              // retries of the current scheduled run
		retryObjs []string         // a pending retry's streams (nil: the whole run)
		ranObjs   []string         // the current or last run's streams (nil: the configured selection)
		retryC    <-chan time.Time // a pending retry's timer
		signals   int
		done      = make(chan error, 1)
		ctxDone   = ctx.Done()
	)
	ticksLeft := func() bool { return s.maxRuns == 0 || runs < s.maxRuns }
	next := s.sched.Next(s.now().In(s.loc))
	// timerFor says whether a run at at (a continuation, a retry) gets a
	// timer of its own: not when the next scheduled run comes first, nor,
	// after the last of --max-runs, when it is more than
	// continueUnscheduled off.
	timerFor := func(at time.Time) timerKind {
		switch {
		case ticksLeft() && !at.Before(next):
			return timerNextRunFirst
		case !ticksLeft() && at.Sub(s.now()) > continueUnscheduled:
			return timerTooLate
		}
		return timerSet
	}
	s.log.Info("next run", "at", next.Format(time.RFC3339))
	timer := time.NewTimer(next.Sub(s.now()))
	defer timer.Stop()
	var contTimer, retryTimer *time.Timer
	defer func() {
		if contTimer != nil {
			contTimer.Stop()
		}
		if retryTimer != nil {
			retryTimer.Stop()
		}
	}()
	// start starts a run: a continuation reads only what the day's runs
	// left; again (a whole run after a quota spent before the last one
	// could list) reads as a scheduled run does, but counts as a
	// continuation for ending the chain.
	start := func(continuation, again bool, objects []string) {
		if contTimer != nil {
			contTimer.Stop() // a scheduled run replaces a pending continuation
		}
		if retryTimer != nil {
			retryTimer.Stop() // and a pending retry
		}
		running, cont, contC, retryC, ranObjs = true, continuation || again, nil, nil, objects
		go func() { done <- s.run(runCtx, continuation, objects) }()
	}
	stop := func(why string) {
		if !stopping {
			stopping = true
			if running {
				s.log.Info("stopping after the current run", "why", why, "cancel", "signal again to cancel the run")
			}
		}
	}
	for {
		if stopping && !running {
			s.log.Info("schedule stopped", "runs", runs)
			if cancelled {
				return errRunCancelled
			}
			return nil
		}
		select {
		case <-timer.C:
			scheduled := next
			switch {
			case stopping, !ticksLeft():
			case running:
				s.log.Warn("skipped a scheduled run: the previous run is still going", "scheduled", scheduled.Format(time.RFC3339))
			default:
				if contC != nil {
					s.log.Info("the scheduled run continues the deferred streams instead", "continuation", contAt.Format(time.RFC3339))
				}
				if retryC != nil {
					s.log.Info("the scheduled run replaces the pending retry")
				}
				runs++
				attempts = 0
				s.log.Info("run starting", "run", runs, "scheduled", scheduled.Format(time.RFC3339))
				start(false, false, nil)
			}
			next = s.sched.Next(s.now().In(s.loc))
			timer.Reset(next.Sub(s.now()))
			if !stopping && ticksLeft() {
				s.log.Info("next run", "at", next.Format(time.RFC3339))
			}
		case <-contC:
			if whole {
				// The run read nothing: run it again as scheduled (a
				// continuation reads only what a run of the day left).
				s.log.Info("run starting again: the quota was spent before it could list what to read", "run", runs, "quota_reset", contAt.Add(-continueMargin).Format(time.RFC3339))
				start(false, true, nil)
				break
			}
			s.log.Info("run continuing the streams the quota deferred", "run", runs, "quota_reset", contAt.Add(-continueMargin).Format(time.RFC3339))
			start(true, false, nil)
		case <-retryC:
			if retryObjs != nil {
				s.log.Info("run retrying the streams that failed", "run", runs, "attempt", attempts, "of", s.retries, "streams", retryObjs)
			} else {
				s.log.Info("run retrying", "run", runs, "attempt", attempts, "of", s.retries)
			}
			start(false, false, retryObjs)
		case err := <-done:
			running = false
			var re *pipeline.RunError
			switch {
			case errors.As(err, &re) && partial(re):
				s.log.Warn("run partial", "run", runs, "continuation", cont, "err", err)
			case err != nil:
				s.log.Error("run failed", "run", runs, "continuation", cont, "err", err)
			default:
				s.log.Info("run finished", "run", runs, "continuation", cont)
			}
			at, ok, why, streams := continueAt(err, cont, left)
			left = unfinished(err)
			whole = errors.As(err, new(quotaBeforeRun))
			// A continuation comes when the quota resets before the next
			// scheduled run (or, after the last one, within the hour).
			contSoon := ok && timerFor(at) == timerSet
			if objs, retry := retryWhat(err); retry && !contSoon && !stopping && s.retries > 0 {
				if objs == nil {
					// A retry of some streams that failed whole tries
					// those streams again, not what already committed.
					objs = ranObjs
				}
				// A failed run, and no continuation after a quota's
				// reset to read its failed streams before the next
				// scheduled run: tried again, up to schedule.retries
				// times, each wait twice the one before.
				wait := s.retryDelay << attempts
				switch retryAt := s.now().Add(wait); {
				case attempts >= s.retries:
					s.log.Warn("not retrying again: every retry of the run failed; the next scheduled run tries again", "retries", s.retries, "next", next.Format(time.RFC3339))
					why = ""
				case timerFor(retryAt) == timerNextRunFirst:
					s.log.Info("not retrying: the next scheduled run comes first", "next", next.Format(time.RFC3339))
				case timerFor(retryAt) == timerTooLate:
					s.log.Warn("not retrying: the scheduled runs are done (--max-runs) and the retry would wait more than an hour", "retry_delay", wait.String())
				default:
					why, streams = "", nil // retried, not left to the next scheduled run
					attempts++
					retryObjs = objs
					retryTimer = time.NewTimer(wait)
					retryC = retryTimer.C
					s.log.Info("retrying the run", "attempt", attempts, "of", s.retries, "at", s.now().Add(wait).Format(time.RFC3339), "streams", objs)
				}
			}
			switch {
			case stopping:
			case why != "" && ticksLeft():
				s.log.Warn(why+"; the next scheduled run tries again", "streams", streams, "next", next.Format(time.RFC3339))
			case why != "":
				s.log.Warn(why, "streams", streams)
			case !ok:
			case timerFor(at) == timerNextRunFirst:
				s.log.Info("the next scheduled run continues the streams the quota deferred", "quota_reset", at.Add(-continueMargin).Format(time.RFC3339), "next", next.Format(time.RFC3339))
			case timerFor(at) == timerTooLate:
				s.log.Warn("not waiting for the quota to reset: the scheduled runs are done (--max-runs)", "quota_reset", at.Add(-continueMargin).Format(time.RFC3339))
			default:
				contAt = at
				contTimer = time.NewTimer(max(at.Sub(s.now()), 0))
				contC = contTimer.C
				if whole {
					s.log.Info("running again after the quota resets: it was spent before the run could list what to read", "at", at.Format(time.RFC3339))
				} else {
					s.log.Info("continuing the streams the quota deferred after it resets", "at", at.Format(time.RFC3339))
				}
			}
			if !ticksLeft() && contC == nil && retryC == nil {
				stop("max runs reached")
			}
		case sig := <-sigs:
			signals++
			if signals == 1 {
				stop(sig.String())
			} else if running {
				s.log.Warn("cancelling the current run", "signal", sig.String())
				cancelled = true
				cancelRun()
			}
		case <-ctxDone:
			ctxDone = nil
			stop("context done")
		}
	}
}

// allHours is a cron hour field that matches every hour.
const allHours = 1<<24 - 1

// wallClock wraps a cron schedule whose hour field names particular hours
// ("0 2 * * *", "30 6 * * 1-5", @daily) so that each matching local time
// runs once, daylight-saving changes included; other schedules are
// returned as they are. Across a change robfig/cron reads the expression
// on the wall clock: a time the clocks jump over (02:00 to 03:00 in spring)
// never matches, so the night's run is skipped, and a time the clocks pass
// twice (02:00 to 03:00 in autumn) matches both times. Wrapped, a matching
// time in a gap runs at the first instant after it (several collapse into
// one run), and a repeated one runs at its first occurrence only. A
// schedule that matches every hour ("*/15 * * * *", @hourly) is left as
// it is: it already runs at its real-time pace across either change (02:15
// does not exist in spring and 03:15 is an hour after 01:15; in autumn the
// repeated hour runs again, a quarter of an hour apart as ever). @every
// counts real time and is not a wall-clock schedule at all.
func wallClock(s cron.Schedule) cron.Schedule {
	spec, ok := s.(*cron.SpecSchedule)
	if !ok || spec.Hour&allHours == allHours {
		return s
	}
	return &wallClockSchedule{spec: spec}
}

// wallClockSchedule is a cron expression with fixed hours, read on the
// local wall clock with daylight-saving changes resolved (wallClock).
type wallClockSchedule struct {
	spec *cron.SpecSchedule
}

// Next returns the first instant after t at which the local wall clock
// shows a time the expression matches, in t's location: the expression
// is matched on the wall clock alone (a clock without daylight saving),
// and each match is then placed in the zone (wallInstant). robfig/cron's
// own Next adds hours to cross a change, which misplaces runs in a zone
// whose clocks move by half an hour (Australia/Lord_Howe).
func (w *wallClockSchedule) Next(t time.Time) time.Time {
	loc := w.spec.Location // as robfig/cron: CRON_TZ= wins, else t's zone
	if loc == time.Local {
		loc = t.Location()
	}
	onWall := *w.spec
	onWall.Location = time.UTC
	wall := wallAsUTC(t.In(loc))
	// A match whose instant is not after t (a repeated time's second
	// pass, or a second match in one gap) is passed over; a few hundred
	// such matches at most, for an expression of every minute of an hour.
	for range 1 << 12 {
		m := onWall.Next(wall)
		if m.IsZero() {
			return m // no match within robfig/cron's five years
		}
		if at := wallInstant(m, loc); at.After(t) {
			return at.In(t.Location())
		}
		wall = m
	}
	return time.Time{}
}

// wallInstant is the first instant at which loc's clocks show wall (a
// wall-clock reading held as UTC): of a time shown twice (clocks set
// back), the first pass; of a time never shown (clocks set forward), the
// end of the gap, the first instant after it.
func wallInstant(wall time.Time, loc *time.Location) time.Time {
	var first time.Time
	for _, near := range []time.Duration{-48 * time.Hour, 0, 48 * time.Hour} {
		// The offsets in force around wall: a change of offset is never
		// closer to another than two days.
		_, off := wall.Add(near).In(loc).Zone()
		at := wall.Add(-time.Duration(off) * time.Second)
		if wallAsUTC(at.In(loc)).Equal(wall) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: read at the offset before it, wall is an instant past the
	// change, whose start is the gap's end.
	_, before := wall.Add(-48 * time.Hour).In(loc).Zone()
	start, _ := wall.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start
}

// wallAsUTC is t's wall-clock reading as a UTC time: a clock without
// daylight saving, on which the expression is matched field by field.
func wallAsUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
