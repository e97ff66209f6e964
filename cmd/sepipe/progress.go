package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/sepipe/sepipe/pipeline"
)

// isTerminal reports whether w is a terminal (progress bars make sense).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// swapWriter lets the logger write above the progress bars while they run
// and straight to stderr after.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *swapWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// feedback is a run's progress reporting: bars on a terminal, log lines
// otherwise. finish must be called when the run returns.
type feedback interface {
	pipeline.Progress
	finish()
}

// newFeedback picks bars (stderr is a terminal and not quiet) or log lines,
// and returns the logger to use during the run.
func newFeedback(g *globals, quiet bool) (feedback, *slog.Logger, error) {
	if !quiet && isTerminal(g.stderr) {
		sw := &swapWriter{w: g.stderr}
		log, err := g.loggerTo(sw)
		if err != nil {
			return nil, nil, err
		}
		p := mpb.New(mpb.WithOutput(g.stderr), mpb.WithWidth(32), mpb.WithRefreshRate(150*time.Millisecond))
		sw.set(p)
		return gcPolicy{&barProgress{p: p, sw: sw, stderr: g.stderr, bars: map[string]*objBar{}}}, log, nil
	}
	log, err := g.loggerTo(g.stderr)
	if err != nil {
		return nil, nil, err
	}
	return gcPolicy{&logProgress{log: log, every: 2 * time.Second, objs: map[string]*objLog{}}}, log, nil
}

// gcPolicy is the command's memory policy during a run: when a stream is
// staged its buffers are garbage, and no Go allocation would trigger a GC
// while DuckDB loads the warehouse, so the process would hold both at
// once; it hands that memory back to the OS instead. (The library leaves
// the garbage collector alone.)
type gcPolicy struct{ feedback }

func (g gcPolicy) ObjectDone(r pipeline.ObjectResult) {
	debug.FreeOSMemory()
	g.feedback.ObjectDone(r)
}

// barProgress draws one bar per stream: pages done of the total, rows and
// rows per second.
type barProgress struct {
	p      *mpb.Progress
	sw     *swapWriter
	stderr io.Writer
	mu     sync.Mutex
	bars   map[string]*objBar
	once   sync.Once
}

type objBar struct {
	bar   *mpb.Bar
	rows  atomic.Int64
	start time.Time
	total atomic.Bool
}

func (b *barProgress) ObjectStarted(object string) {
	ob := &objBar{start: time.Now()}
	ob.bar = b.p.AddBar(0,
		mpb.PrependDecorators(
			decor.Name(object, decor.WC{C: decor.DindentRight | decor.DSyncWidth}),
			decor.CountersNoUnit(" %d/%d pages", decor.WCSyncWidth),
		),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string {
				rows := ob.rows.Load()
				secs := time.Since(ob.start).Seconds()
				return fmt.Sprintf("%d rows  %.0f rows/s", rows, float64(rows)/max(secs, 0.001))
			}),
			decor.OnComplete(decor.Name(""), "  done"),
		),
	)
	b.mu.Lock()
	b.bars[object] = ob
	b.mu.Unlock()
}

func (b *barProgress) get(object string) *objBar {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bars[object]
}

func (b *barProgress) PageDone(object string, _, rows, totalPages int) {
	ob := b.get(object)
	if ob == nil {
		return
	}
	if totalPages > 0 && ob.total.CompareAndSwap(false, true) {
		ob.bar.SetTotal(int64(totalPages), false)
	}
	ob.rows.Add(int64(rows))
	ob.bar.Increment()
}

func (b *barProgress) ObjectDone(r pipeline.ObjectResult) {
	ob := b.get(r.Object)
	if ob == nil {
		return
	}
	if r.Err != nil {
		ob.bar.Abort(false)
		return
	}
	ob.bar.SetTotal(-1, true)
}

func (b *barProgress) finish() { b.once.Do(b.stop) }

func (b *barProgress) stop() {
	b.mu.Lock()
	for _, ob := range b.bars {
		if !ob.bar.Completed() {
			ob.bar.Abort(false) // a cancelled run: Wait must not hang
		}
	}
	b.mu.Unlock()
	b.p.Wait()
	b.sw.set(b.stderr)
}

// logProgress writes a line per stream at start and at most every `every`
// while its pages land.
type logProgress struct {
	log   *slog.Logger
	every time.Duration
	mu    sync.Mutex
	objs  map[string]*objLog
}

type objLog struct {
	start, last time.Time
	pages, rows int
	total       int
}

func (l *logProgress) ObjectStarted(object string) {
	l.mu.Lock()
	now := time.Now()
	l.objs[object] = &objLog{start: now, last: now, total: -1}
	l.mu.Unlock()
	l.log.Info("stream started", "stream", object)
}

func (l *logProgress) PageDone(object string, _, rows, totalPages int) {
	l.mu.Lock()
	o := l.objs[object]
	if o == nil {
		l.mu.Unlock()
		return
	}
	o.pages++
	o.rows += rows
	o.total = totalPages
	now := time.Now()
	if now.Sub(o.last) < l.every {
		l.mu.Unlock()
		return
	}
	o.last = now
	pages, rowsN, total := o.pages, o.rows, o.total
	rate := float64(rowsN) / max(now.Sub(o.start).Seconds(), 0.001)
	l.mu.Unlock()
	l.log.Info("stream progress", "stream", object, "pages", fmt.Sprintf("%d/%d", pages, total), "rows", rowsN,
		"rows_per_sec", int64(rate))
}

func (l *logProgress) ObjectDone(pipeline.ObjectResult) {}

func (l *logProgress) finish() {}
