package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/internal/cpuidle"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/load"
)

// earlyLoader loads a run's finished part files into the streams'
// history tables (a replace stream's table is a view of its history) in
// the working database while the run still fetches (issue 14): DuckDB's
// insert is most of a load, and without it the load waits for the last
// page. An append or merge stream's own table is loaded at the commit.
// The files go into the run's one transaction (load.RunLoad), so the run
// protocol is unchanged: nothing is visible, or survives a killed
// process, before the commit, and the commit loads whatever was not
// loaded early. It loads only while the processors have been mostly idle
// (cpuidle): against a slow or rate-limited service the fetch leaves most
// of their time; when the fetch keeps every core busy, loading beside it
// only slows it down.
//
// Loading early holds the working database's lock for the fetch. The
// loader takes it only when it is free, and gives it up, with everything
// it loaded, as soon as another sepipe process waits for it (a listen
// batch, a publish): the commit then loads from the staged files, as a run
// without an early load does. Any error does the same; it is logged, and
// the commit's own load reports what it finds.
type earlyLoader struct {
	ctx  context.Context // the run's: the loader lives as long as its fetch
	open func(context.Context) (*load.Warehouse, error)
	run  load.Run
	log  *slog.Logger
	// begin: load.CountingNewRows when the commit counts new rows against
	// the tables as they were.
	begin []load.BeginOption

	mu   sync.Mutex // held while loading; forget waits for it
	wh   *load.Warehouse
	rl   *load.RunLoad
	skip map[string]bool // streams that load at the commit

	qmu   sync.Mutex // guards what follows
	queue []partFile
	gens  map[string]int // a stream's read; forget starts the next
	stop  bool           // finished, or gave up for the rest of the run

	idle cpuidle.Meter // used by the loop only

	wake chan struct{}
	done chan struct{}
}

// partFile is a finished part file of a stream's read gen.
type partFile struct {
	object string
	gen    int
	schema *arrow.Schema
	path   string
}

// newEarlyLoader starts the loader of run; nil where the working
// database's lock cannot tell it that another process waits.
func newEarlyLoader(ctx context.Context, run load.Run, counts bool, open func(context.Context) (*load.Warehouse, error), log *slog.Logger) *earlyLoader {
	if !load.CanLoadEarly() {
		return nil
	}
	l := &earlyLoader{ctx: ctx, open: open, run: run, log: log, skip: map[string]bool{}, gens: map[string]int{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	if counts {
		l.begin = append(l.begin, load.CountingNewRows())
	}
	go l.loop()
	return l
}

// stream is what a stream's writers tell the loader (nil without one).
func (l *earlyLoader) stream(object string) *earlyStream {
	if l == nil {
		return nil
	}
	return &earlyStream{l: l, object: object}
}

func (l *earlyLoader) loop() {
	ctx := l.ctx
	defer close(l.done)
	tick := time.NewTicker(wantCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// No file may come for a long while (a slow service): look
			// for a waiting process in between too.
			l.yieldIfWanted()
			if l.stopped() {
				return
			}
			continue
		case <-l.wake:
		}
		l.qmu.Lock()
		files, stop := l.queue, l.stop
		l.queue = nil
		l.qmu.Unlock()
		for i, f := range files {
			if ctx.Err() != nil || l.stopped() {
				return
			}
			if !loadEarlyAlways && !l.idle.Idle() {
				// The machine is busy fetching: keep the files for later
				// (or for the commit) and look again in a while.
				l.qmu.Lock()
				l.queue = append(files[i:], l.queue...)
				l.qmu.Unlock()
				time.AfterFunc(busyRecheck, l.signal)
				break
			}
			l.load(ctx, f)
		}
		if stop {
			return
		}
	}
}

// wantCheck is how often a loader holding the working database looks for
// another process waiting for it.
const wantCheck = 250 * time.Millisecond

func (l *earlyLoader) yieldIfWanted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rl != nil && l.wh.Wanted() {
		l.giveUp("another sepipe process waits for the working database", nil)
	}
}

// busyRecheck is how long the loader leaves the machine to the fetch when
// it found it busy.
const busyRecheck = 100 * time.Millisecond

// loadEarlyAlways skips the look at the processors (tests).
var loadEarlyAlways bool

func (l *earlyLoader) stopped() bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.stop
}

func (l *earlyLoader) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// load puts one file into the run's transaction, beginning it first.
func (l *earlyLoader) load(ctx context.Context, f partFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qmu.Lock()
	skip := f.gen != l.gens[f.object] || l.stop
	l.qmu.Unlock()
	if skip || l.skip[f.object] {
		return
	}
	if l.rl == nil {
		wh, err := l.open(ctx)
		if errors.Is(err, load.ErrWarehouseLocked) {
			return // another process writes: the commit loads this file
		}
		if err != nil {
			l.giveUp("could not open the working database", err)
			return
		}
		rl, err := wh.Begin(ctx, l.run, l.begin...)
		if err != nil {
			wh.Close()
			l.giveUp("could not begin the run's transaction", err)
			return
		}
		l.wh, l.rl = wh, rl
		l.log.Debug("loading the run's part files while it fetches")
	}
	if l.wh.Wanted() {
		l.giveUp("another sepipe process waits for the working database", nil)
		return
	}
	err := l.rl.LoadFiles(ctx, load.Table{Object: f.object, Schema: f.schema, Files: []string{f.path}})
	switch {
	case errors.Is(err, load.ErrNotEarly):
		l.skip[f.object] = true
		l.log.Debug("a stream loads at the commit", "stream", f.object, "reason", err)
	case err != nil:
		l.giveUp("loading a part file failed", err)
	default:
		faults.At(faults.EarlyLoaded, f.object)
	}
}

// giveUp drops what was loaded and the lock, for the rest of the run.
// Called with mu held.
func (l *earlyLoader) giveUp(why string, err error) {
	l.qmu.Lock()
	l.stop, l.queue = true, nil // queue no more files; the loop ends
	l.qmu.Unlock()
	if l.rl != nil {
		_ = l.rl.Rollback()
		_ = l.wh.Close()
		l.wh, l.rl = nil, nil
	}
	args := []any{"reason", why}
	if err != nil {
		args = append(args, "err", err)
	}
	l.log.Debug("the run loads its rows after the fetch instead of during it", args...)
}

// forget takes object's rows out (its stream is read again and its
// files are about to be removed); files of its earlier read still queued
// are skipped.
func (l *earlyLoader) forget(object string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qmu.Lock()
	l.gens[object]++
	l.qmu.Unlock()
	if l.rl == nil {
		return
	}
	if err := l.rl.Forget(l.ctx, object); err != nil {
		l.giveUp("forgetting a stream read again failed", err)
	}
}

// finish stops the loader and hands over the run's transaction and its
// warehouse (both nil when nothing was loaded early). Files still queued
// are left to the commit.
func (l *earlyLoader) finish() (*load.Warehouse, *load.RunLoad) {
	if l == nil {
		return nil, nil
	}
	l.qmu.Lock()
	l.stop, l.queue = true, nil
	l.qmu.Unlock()
	l.signal()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	wh, rl := l.wh, l.rl
	l.wh, l.rl = nil, nil
	return wh, rl
}

// abort stops the loader and drops what it loaded.
func (l *earlyLoader) abort() {
	if wh, rl := l.finish(); rl != nil {
		_ = rl.Rollback()
		_ = wh.Close()
	}
}

// earlyStream is one stream's side of the early load: its Parquet
// writers report finished files, its sink a new read or a huge page.
type earlyStream struct {
	l      *earlyLoader
	object string

	mu  sync.Mutex
	off bool // a huge page was read: its files wait for the commit's settings
}

// file queues a finished part file written with schema.
func (s *earlyStream) file(schema *arrow.Schema, path string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	off := s.off
	s.mu.Unlock()
	if off {
		return
	}
	l := s.l
	l.qmu.Lock()
	if l.stop {
		l.qmu.Unlock()
		return
	}
	l.queue = append(l.queue, partFile{object: s.object, gen: l.gens[s.object], schema: schema, path: path})
	l.qmu.Unlock()
	l.signal()
}

// huge stops loading the stream's files early: the load of a page this
// large needs the memory limit and threads the commit sets.
func (s *earlyStream) huge() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.off = true
	s.mu.Unlock()
}

// forget: the stream is read again.
func (s *earlyStream) forget() {
	if s != nil {
		s.l.forget(s.object)
	}
}
