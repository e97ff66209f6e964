package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/flock"
	"github.com/sepipe/sepipe/load"
)

// ListenConfig says where a webhook receiver listens and where its events
// go.
type ListenConfig struct {
	// Addr is HOST:PORT to listen on; ignored when Listener is set.
	Addr string
	// Listener, if set, is served instead of listening on Addr (tests,
	// and sepipe listen, which opens it to name --addr in its error).
	// Listen closes it.
	Listener net.Listener
	// Out is the output folder: events go to its working database, table
	// events, and from there to the published Out/warehouse.duckdb; the
	// spool is Out/.sepipe/events.
	Out string
	// Secrets are the subscriptions' signing secrets; a delivery signed
	// with any of them is accepted (several allow rotation).
	Secrets []string
	// MaxBody bounds a delivery (default DefaultMaxDeliveryBody, at most
	// MaxDeliveryBodyCeiling: CheckMaxBody).
	MaxBody int64
	// MaxBytesInFlight bounds the bytes of delivery bodies held at once
	// across all connections (default DefaultBodyBudget, or four MaxBody
	// when that is more); MaxBytesPerSource what one source address may
	// hold of it (default DefaultSourceShare). See Receiver and
	// CheckBodyBudget.
	MaxBytesInFlight  int64
	MaxBytesPerSource int64
	// Tolerance is the signed timestamp window, either way (default
	// DefaultSignatureTolerance).
	Tolerance time.Duration
	// BatchSize starts a load as soon as this many events wait (default
	// 500); BatchInterval loads whatever waits at least this often
	// (default 1 s). A load after a backlog (a replayed spool, a warehouse
	// that was locked) takes up to MaxBatch events (default 20 000).
	BatchSize     int
	BatchInterval time.Duration
	MaxBatch      int
	// PublishInterval is how often loaded events are published to
	// Out/warehouse.duckdb (default 10 s): a new reader sees an event
	// within about BatchInterval + PublishInterval + the publish's time of
	// its acknowledgement. Each publish copies the whole working
	// database, so a publish waits at least publishGap times as long as
	// the last one took, a wait for a sync's lock left out (a warehouse
	// of 1 GB: 1 to 2 s, so 10 to 20 s; one an earlier release left,
	// written anew once: about 8 s)
	// whatever the interval: publishing takes at most about a tenth of
	// the time.
	PublishInterval time.Duration
	// LockWait bounds a batch's wait for a sync holding the working
	// database (default 5 s); the events wait in the spool meanwhile.
	LockWait time.Duration
	// DedupWindow is how many recent event ids answer redeliveries as
	// duplicates without touching the warehouse (default
	// DefaultDedupWindow).
	DedupWindow int
	// ShutdownTimeout bounds the wait for deliveries in flight once ctx
	// is done (default 10 s).
	ShutdownTimeout time.Duration
	// Logger receives progress and warnings (default: discard).
	Logger *slog.Logger
	// Ready, if set, is called once the receiver accepts connections.
	Ready func(addr net.Addr)
	// Observer, if set, is told of each delivery's outcome, each load and
	// each publish (sepipe's metrics).
	Observer Observer
	// Wrap, if set, wraps the receiver's handler: sepipe listen answers
	// its monitoring's requests (metrics, probes) on the same listener.
	Wrap func(http.Handler) http.Handler
	// State, if set, is kept up to date while Listen runs: whether it can
	// do its job, and how far behind it is (a readiness probe, the
	// metrics).
	State *ListenState
}

func (c *ListenConfig) setDefaults() {
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxDeliveryBody
	}
	if c.Tolerance <= 0 {
		c.Tolerance = DefaultSignatureTolerance
	}
	if c.MaxBytesInFlight <= 0 {
		c.MaxBytesInFlight = max(DefaultBodyBudget, 4*c.MaxBody)
	}
	if c.MaxBytesPerSource <= 0 {
		c.MaxBytesPerSource = DefaultSourceShare(c.MaxBytesInFlight, c.MaxBody)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.BatchInterval <= 0 {
		c.BatchInterval = time.Second
	}
	if c.PublishInterval <= 0 {
		c.PublishInterval = 10 * time.Second
	}
	if c.LockWait <= 0 {
		c.LockWait = 5 * time.Second
	}
	if c.MaxBatch < c.BatchSize {
		c.MaxBatch = max(20_000, c.BatchSize)
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Observer == nil {
		c.Observer = NoObserver{}
	}
	if c.State == nil {
		c.State = &ListenState{}
	}
}

// SpoolDir is the spool folder of an output folder.
func SpoolDir(out string) string { return filepath.Join(out, ".sepipe", "events") }

// ErrListening is wrapped when another listener holds the event spool.
var ErrListening = errors.New("another sepipe listen is using this output folder's event spool")

// Listen receives webhook deliveries until ctx is done and lands their
// events in the warehouse:
//
//  1. lock the spool (a second receiver on the same folder fails with
//     ErrListening), replay it (cutting off a torn last record) and load what
//     it holds;
//  2. serve deliveries (Receiver): each accepted event is
//     appended to the spool and fsynced (group commit) before the 2xx;
//  3. every BatchInterval, or as soon as BatchSize events wait, open the
//     working database, INSERT OR IGNORE the waiting events into events in
//     one transaction, close it, and remove the spool segments now loaded.
//     A load that fails (a sync holding the working database for longer
//     than LockWait) leaves the events in the spool for the next one;
//  4. at most every PublishInterval, when events were loaded, publish the
//     working database to Out/warehouse.duckdb (load.PublishState), where
//     readers see them; readers holding the file never block it. A publish
//     that is due follows the load in progress, so traffic that keeps a
//     batch waiting does not hold it off.
//
// When ctx is done, Listen stops accepting connections, waits up to
// ShutdownTimeout for deliveries in flight, loads everything spooled and
// returns nil. It returns an error when it cannot start, when serving
// fails, or when the last load fails (the events then stay in the spool
// for the next Listen).
func Listen(ctx context.Context, cfg ListenConfig) (err error) {
	cfg.setDefaults()
	log := cfg.Logger
	if cfg.Out == "" {
		return errors.New("listen: no output folder")
	}
	if err := CheckMaxBody(cfg.MaxBody); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return fmt.Errorf("listen: output folder %s: %w", cfg.Out, err)
	}
	dir := SpoolDir(cfg.Out)
	// One listener per spool: a flock on dir/lock, released by the kernel
	// when the process dies.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("listen: spool %s: %w", dir, err)
	}
	unlock, err := flock.TryLock(filepath.Join(dir, "lock"), ErrListening)
	if err != nil {
		return fmt.Errorf("listen: spool %s: %w", dir, err)
	}
	defer unlock()
	spool, err := OpenSpool(dir, WithDedupWindow(cfg.DedupWindow), WithSpoolLogger(log))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer spool.Close()
	lake := load.Lake{Root: cfg.Out}
	if ids, err := load.RecentEventIDs(ctx, lake.WarehousePath(), cfg.DedupWindow); err != nil {
		log.Warn("listen: could not read recent event ids; redeliveries of older events are spooled again (and not loaded twice)", "error", err)
	} else {
		spool.Remember(ids...)
	}
	if n := spool.Pending(); n > 0 {
		log.Info("listen: replaying spooled events", "events", n)
	}

	rc, err := NewReceiver(spool, cfg.Secrets, WithMaxBody(cfg.MaxBody),
		WithSignatureTolerance(cfg.Tolerance), WithReceiverLogger(log),
		WithBodyBudget(cfg.MaxBytesInFlight), WithSourceShare(cfg.MaxBytesPerSource), WithObserver(cfg.Observer))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	var h http.Handler = rc
	if cfg.Wrap != nil {
		h = cfg.Wrap(rc)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	ld := &eventLoader{spool: spool, lake: lake, log: log, max: cfg.MaxBatch, lockWait: cfg.LockWait,
		obs: cfg.Observer, state: cfg.State,
		dirty: lake.PublishPending()} // a publish an earlier process did not finish
	loadCtx, stopLoader := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ld.run(loadCtx, cfg.BatchSize, cfg.BatchInterval, cfg.PublishInterval)
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	cfg.State.start(lake, spool, cfg.PublishInterval)
	log.Info("listen: receiving webhook deliveries", "addr", ln.Addr().String(), "out", cfg.Out)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}

	select {
	case <-ctx.Done():
		log.Info("listen: stopping", "cause", context.Cause(ctx))
	case err = <-serveErr:
		err = fmt.Errorf("listen: serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("listen: deliveries still in flight at shutdown", "error", serr)
		srv.Close()
	}
	cancel()
	stopLoader()
	wg.Wait()
	if cerr := spool.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("listen: %w", cerr)
	}
	// The last load: everything spooled, however long it takes.
	final := context.WithoutCancel(ctx)
	for spool.Pending() > 0 {
		if lerr := ld.once(final); lerr != nil {
			if err == nil {
				err = fmt.Errorf("listen: last load (events stay in %s for the next listen): %w", dir, lerr)
			}
			break
		}
	}
	if perr := ld.publish(final); perr != nil && err == nil {
		err = fmt.Errorf("listen: last publish (the next sync, listen or `sepipe publish` finishes it): %w", perr)
	}
	return err
}

// eventLoader moves spooled events into the working database and
// publishes them.
type eventLoader struct {
	spool    *Spool
	lake     load.Lake
	log      *slog.Logger
	max      int
	lockWait time.Duration
	// dirty: events were loaded since the last publish.
	dirty bool
	// lastPublished is when the last publish ended, or the last one that
	// failed after copying the working database.
	lastPublished time.Time
	// lastCost is how long the last publish took (publishDue).
	lastCost time.Duration
	obs      Observer
	state    *ListenState
}

// publishGap is how many times as long as the last publish took the
// listener waits at least before the next one. A publish copies (or, once
// after an earlier release, writes anew) the whole working database and
// holds it meanwhile, so batches wait: at a fixed interval of 10 s, a
// warehouse whose publish takes 8 s would spend four fifths of the
// listener's time publishing and keep events waiting in the spool.
const publishGap = 10

// publishDue reports whether events loaded since the last publish are due
// to be published at now: every has passed since the last publish, and
// publishGap times its cost.
func (l *eventLoader) publishDue(now time.Time, every time.Duration) bool {
	return l.dirty && now.Sub(l.lastPublished) >= max(every, publishGap*l.lastCost)
}

// run loads every interval, or as soon as batch events wait, and
// publishes at most every publishEvery, until ctx is done. A publish that
// is due is made after each load, so a backlog that keeps batch events
// waiting never holds it off.
func (l *eventLoader) run(ctx context.Context, batch int, interval, publishEvery time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.spool.Ready():
			if l.spool.Pending() < batch {
				continue
			}
		}
		for l.spool.Pending() > 0 && ctx.Err() == nil {
			if err := l.once(ctx); err != nil {
				if errors.Is(err, load.ErrWarehouseLocked) {
					l.log.Warn("listen: a sync holds the working database; events wait in the spool", "pending", l.spool.Pending())
				} else if ctx.Err() == nil {
					l.log.Error("listen: load failed; events wait in the spool", "pending", l.spool.Pending(), "error", err)
				}
				break
			}
			l.publishIfDue(ctx, publishEvery)
			if l.spool.Pending() < batch {
				break
			}
		}
		l.publishIfDue(ctx, publishEvery)
	}
}

// publishIfDue publishes when a publish is due (publishDue).
func (l *eventLoader) publishIfDue(ctx context.Context, publishEvery time.Duration) {
	if !l.publishDue(time.Now(), publishEvery) || ctx.Err() != nil {
		return
	}
	if err := l.publish(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("listen: publish failed; the events are loaded and the next publish retries", "error", err)
	}
}

// publish publishes the working database if events were loaded since the
// last publish.
func (l *eventLoader) publish(ctx context.Context) error {
	if !l.dirty {
		return nil
	}
	// First without waiting, so the time taken is the publish's own cost.
	// A sync holding the working database is waited for as a load waits;
	// that wait is not the publish's cost (publishDue would put the next
	// publish ten times the wait off), which stays as last measured.
	start := time.Now()
	err := load.PublishState(ctx, l.lake)
	cost := time.Since(start)
	if errors.Is(err, load.ErrWarehouseLocked) {
		err, cost = load.PublishState(ctx, l.lake, load.WithLockWait(l.lockWait)), l.lastCost
	}
	l.state.published(err, time.Now())
	switch {
	case errors.Is(err, load.ErrWarehouseLocked):
		return err // nothing was copied: the next batch tries again
	case err != nil:
		// It failed having copied the working database (a program holds
		// warehouse.duckdb for writing, a full disk): try again when a
		// publish is due, not at every batch, each time a whole copy.
		l.lastPublished, l.lastCost = time.Now(), cost
		return err
	}
	l.dirty, l.lastPublished, l.lastCost = false, time.Now(), cost
	l.obs.Published(time.Since(start), l.lastPublished)
	l.log.Debug("listen: published", "path", l.lake.WarehousePath(), "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// once loads one batch and compacts the spool.
func (l *eventLoader) once(ctx context.Context) error {
	evs, upTo := l.spool.Unloaded(l.max)
	if len(evs) == 0 {
		return nil
	}
	start := time.Now()
	n, err := load.LoadEvents(ctx, l.lake, evs, load.WithLockWait(l.lockWait))
	oldest := evs[0].ReceivedAt
	for _, ev := range evs {
		if ev.ReceivedAt.Before(oldest) {
			oldest = ev.ReceivedAt
		}
	}
	l.state.loaded(err, oldest)
	if err != nil {
		return err
	}
	l.obs.Loaded(len(evs), int(n), time.Since(start))
	l.dirty = true
	faults.At(faults.EventsLoaded, "") // loaded, not yet removed from the spool: a replay must not double them
	l.log.Debug("listen: loaded events", "events", len(evs), "new", n, "duration", time.Since(start).Round(time.Millisecond))
	if err := l.spool.MarkLoaded(upTo); err != nil {
		l.log.Warn("listen: spool compaction failed; loaded events will be replayed (and ignored)", "error", err)
	}
	return nil
}
