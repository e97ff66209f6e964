package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/service"
)

// Phases of Run.
const (
	// PhaseSync is sepipe end to end: pipeline.Sync of one object (HTTP,
	// decode, Arrow, Parquet, DuckDB) into a fresh output folder.
	PhaseSync = "sync"
	// PhaseFetch fetches every page with the same client and concurrency
	// and discards it, reading only the page header the client's paging
	// checks need.
	PhaseFetch = "fetch"
	// PhaseReadJSON loads the same pages, saved beforehand as local files,
	// into a table of a new DuckDB file with DuckDB's own read_json.
	PhaseReadJSON = "read_json"
)

// Object is the object Run reads: the fake's largest report.
const Object = "userCourseProgress"

// benchRowsPerUser is about how many userCourseProgress rows the fake
// tenant holds per user.
const benchRowsPerUser = 12

// Config says how big a benchmark to run and how.
type Config struct {
	// Rows is about how many rows of Object (or of the wide object, with
	// Wide) the fake tenant holds (the fake has about 12 per user, 4 of
	// the wide object; the exact count is reported).
	Rows int
	// Dir is the scratch folder for the phases' output and the saved pages;
	// default a new temporary folder, removed at the end.
	Dir string
	// Concurrency is the client's page workers (default
	// extract.DefaultConcurrency); PageSize its rows per page (default
	// extract.DefaultPageSize).
	Concurrency int
	PageSize    int
	// Repeat runs every phase this many times, interleaved, and keeps the
	// fastest run of each (default 1).
	Repeat int
	// Seed of the fake tenant (default 1).
	Seed int64
	// Phases limits the run to these phases (default all three; only the
	// sync with RateLimit).
	Phases []string
	// RunPhase runs one phase and measures it. Default: RunPhase in
	// this process, where the fake service runs too, so peak memory
	// includes the fake's. The CLI runs each phase in a child process, so
	// that each phase has a clean high-water mark of its own.
	RunPhase func(ctx context.Context, spec PhaseSpec) (PhaseResult, error)
	// Logger receives progress (default: discard).
	Logger *slog.Logger
	// CPUProfiles, if set, is a folder where each phase run writes its CPU
	// profile (PHASE-RUN.pprof).
	CPUProfiles string
	// RateLimit, if above 0, is the service's limit in the sync phase:
	// a second fake, with the same data, answers 429 to data requests
	// beyond RateLimit in one RateWindow (default 1 s), with Retry-After
	// and meta.rateLimit, as servicetest.WithRateLimit does. The sync
	// does not know the limit: its client has the default settings (no
	// ceiling on its adaptive rate). Each run starts a window after the
	// run before ended, in a window of its own. The other phases read the
	// unlimited fake, as without it.
	RateLimit  int
	RateWindow time.Duration
	// Mode is the sync's write mode for the object: "replace" (default),
	// "append" or "merge" (on userId, courseId, every row read again).
	Mode string
	// Resync runs an untimed sync into the sync phase's folder first, so
	// the timed one meets a warehouse that already holds every row (the
	// nightly steady state: a merge upserts every key, a replace swaps the
	// table and adds a day of history).
	Resync bool
	// Wide reads the fake's wide object instead of Object
	// (servicetest.WithWideObject: 64 fields, about 3 KB of JSON a row,
	// four rows a user; a merge's key is activityId).
	Wide bool
}

// PhaseSpec is one phase to run: everything a child process needs.
type PhaseSpec struct {
	Phase       string `json:"phase"`
	URL         string `json:"url,omitempty"`   // the fake service (sync, fetch)
	Token       string `json:"token,omitempty"` // its access token
	Object      string `json:"object"`
	Concurrency int    `json:"concurrency"`
	PageSize    int    `json:"page_size"`
	// Dir is the phase's own output folder (sync, read_json); Pages the
	// folder of saved pages (read_json).
	Dir   string `json:"dir,omitempty"`
	Pages string `json:"pages,omitempty"`
	// CPUProfile, if set, is a file to write the phase's CPU profile to.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// Defaults: the client has the default settings, as a default sync's
	// (the rate-limited sync); otherwise its rate limiter is off.
	Defaults bool `json:"defaults,omitempty"`
	// Mode and Resync are Config's (sync).
	Mode   string `json:"mode,omitempty"`
	Resync bool   `json:"resync,omitempty"`
}

// PhaseResult is one measured run of a phase.
type PhaseResult struct {
	Phase    string        `json:"phase"`
	Rows     int64         `json:"rows"`
	Pages    int           `json:"pages,omitempty"`
	Bytes    int64         `json:"bytes,omitempty"` // JSON bytes received (fetch)
	Duration time.Duration `json:"duration_ns"`
	// PeakRSS is the peak resident set size in bytes: VmHWM of the process
	// that ran the phase (reset at the start of the phase when it runs in
	// the bench's own process). It counts everything resident: the Go
	// heap and runtime, DuckDB's buffers and the code pages in use.
	PeakRSS int64 `json:"peak_rss"`
	// CPU is the CPU time (user + system) the phase's process used;
	// ServiceCPU the CPU time the fake service's process used meanwhile
	// (zero when both are one process: CPU then counts both).
	CPU        time.Duration `json:"cpu_ns"`
	ServiceCPU time.Duration `json:"service_cpu_ns,omitempty"`
	// Staged and StagedPeakRSS (sync only) are the time and the peak RSS
	// until the object was staged as Parquet, before the warehouse load.
	Staged        time.Duration `json:"staged_ns,omitempty"`
	StagedPeakRSS int64         `json:"staged_peak_rss,omitempty"`
	// Requests and Throttled (sync under Config.RateLimit) are the
	// data requests the rate-limited fake saw during the phase and those
	// it answered 429; Ideal is the time the others take at exactly the
	// limit, (Requests - Throttled) / RateLimit windows.
	Requests  int64         `json:"requests,omitempty"`
	Throttled int64         `json:"throttled,omitempty"`
	Ideal     time.Duration `json:"ideal_ns,omitempty"`
}

// OverIdeal is the phase's time over its ideal time at the service's
// rate limit (0 without one).
func (r PhaseResult) OverIdeal() float64 { return ratio(r.Duration, r.Ideal) }

// ThrottledShare is the share of the phase's requests answered 429.
func (r PhaseResult) ThrottledShare() float64 {
	if r.Requests <= 0 {
		return 0
	}
	return float64(r.Throttled) / float64(r.Requests)
}

// RowsPerSecond is the phase's throughput.
func (r PhaseResult) RowsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Duration.Seconds()
}

// Result is what Run measured: the fastest run of each phase.
type Result struct {
	Object    string // the object read (Object, or the wide one)
	Rows      int64  // rows of the object on the fake
	Pages     int
	JSONBytes int64 // bytes of the saved pages
	Sync      PhaseResult
	Fetch     PhaseResult
	ReadJSON  PhaseResult
	Runs      []PhaseResult // every run, in order
	Machine   string        // GOOS/GOARCH, CPUs, Go version
	// RateLimit and RateWindow are the sync phase's service limit
	// (Config.RateLimit; 0: none).
	RateLimit  int
	RateWindow time.Duration
	// Mode and Resync are the sync phase's (Config's).
	Mode   string
	Resync bool
}

// SyncOverFetch is sepipe's time over the fetch-and-discard time.
func (r *Result) SyncOverFetch() float64 { return ratio(r.Sync.Duration, r.Fetch.Duration) }

// SyncOverReadJSON is sepipe's time over DuckDB read_json's.
func (r *Result) SyncOverReadJSON() float64 { return ratio(r.Sync.Duration, r.ReadJSON.Duration) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

// Run starts the fake service in this process on loopback with about
// cfg.Rows rows of Object (or the wide object, cfg.Wide) and measures, on the same pages: sepipe end
// to end (PhaseSync), fetching and discarding every page (PhaseFetch), and
// DuckDB's read_json loading the pages from local files (PhaseReadJSON;
// saving the pages is not timed). With cfg.RateLimit, the sync reads a
// fake that allows that many requests per window, with default settings,
// and is measured against the ideal time at that limit.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Rows < 1 {
		return nil, fmt.Errorf("bench: rows must be at least 1, got %d", cfg.Rows)
	}
	if cfg.RateLimit < 0 || cfg.RateWindow < 0 {
		return nil, fmt.Errorf("bench: rate limit %d per %s: want neither below 0", cfg.RateLimit, cfg.RateWindow)
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = servicetest.DefaultRateWindow
	}
	if _, err := benchStreams(PhaseSpec{Object: Object, Mode: cfg.Mode}); err != nil {
		return nil, err
	}
	for _, p := range cfg.Phases {
		if p != PhaseSync && p != PhaseFetch && p != PhaseReadJSON {
			return nil, fmt.Errorf("bench: unknown phase %q (want %s, %s or %s)", p, PhaseSync, PhaseFetch, PhaseReadJSON)
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = extract.DefaultConcurrency
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = extract.DefaultPageSize
	}
	cfg.Repeat = max(cfg.Repeat, 1)
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	inProcess := cfg.RunPhase == nil
	if inProcess {
		cfg.RunPhase = RunPhase
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sepipe-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.CPUProfiles != "" {
		if err := os.MkdirAll(cfg.CPUProfiles, 0o755); err != nil {
			return nil, fmt.Errorf("bench: CPU profile folder: %w", err)
		}
	}

	object, perUser := Object, benchRowsPerUser
	opts := []servicetest.Option{servicetest.WithSeed(cfg.Seed)}
	if cfg.Wide {
		object, perUser = servicetest.WideObjectID, servicetest.WideObjectRows(1)
		opts = append(opts, servicetest.WithWideObject())
	}
	users := max(1, (cfg.Rows+perUser/2)/perUser)
	opts = append(opts, servicetest.WithUsers(users))
	srv := servicetest.NewServer(opts...)
	defer srv.Close()
	log.Info("fake service started", "url", srv.URL, "users", users)
	var limited *servicetest.Server
	if cfg.RateLimit > 0 {
		limited = servicetest.NewServer(append(opts,
			servicetest.WithRateLimit(cfg.RateLimit), servicetest.WithRateWindow(cfg.RateWindow))...)
		defer limited.Close()
		log.Info("rate-limited fake service started", "url", limited.URL, "limit", cfg.RateLimit, "window", cfg.RateWindow)
	}

	// Save the pages for read_json first (untimed); this also tells the
	// object's exact size.
	pages := filepath.Join(dir, "pages")
	res := &Result{Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		RateLimit: cfg.RateLimit, RateWindow: cfg.RateWindow, Mode: cmp.Or(cfg.Mode, string(load.Replace)), Resync: cfg.Resync}
	res.Object = object
	spec := PhaseSpec{URL: srv.URL, Token: srv.Service.AccessToken(), Object: object,
		Concurrency: cfg.Concurrency, PageSize: cfg.PageSize, Mode: cfg.Mode, Resync: cfg.Resync}
	saved, err := savePages(ctx, spec, pages)
	if err != nil {
		return nil, fmt.Errorf("bench: save pages: %w", err)
	}
	res.Rows, res.Pages, res.JSONBytes = saved.Rows, saved.Pages, saved.Bytes
	log.Info("pages saved", "rows", saved.Rows, "pages", saved.Pages, "bytes", saved.Bytes)

	phases := cfg.Phases
	switch {
	case len(phases) > 0:
	case cfg.RateLimit > 0:
		phases = []string{PhaseSync} // the others do not read the limited fake
	default:
		phases = []string{PhaseSync, PhaseFetch, PhaseReadJSON}
	}
	best := map[string]*PhaseResult{PhaseSync: &res.Sync, PhaseFetch: &res.Fetch, PhaseReadJSON: &res.ReadJSON}
	var limitedEnd time.Time // when the last run against the limited fake ended
	for rep := range cfg.Repeat {
		for _, phase := range phases {
			s := spec
			s.Phase = phase
			s.Dir = filepath.Join(dir, fmt.Sprintf("%s-%d", phase, rep))
			s.Pages = pages
			if cfg.CPUProfiles != "" {
				s.CPUProfile = filepath.Join(cfg.CPUProfiles, fmt.Sprintf("%s-%d.pprof", phase, rep+1))
			}
			var before servicetest.FaultStats
			if limited != nil && phase == PhaseSync {
				s.URL, s.Token, s.Defaults = limited.URL, limited.Service.AccessToken(), true
				before = limited.Faults()
				// Each run meets windows of its own, as a nightly sync
				// does: the run before must not have used part of its
				// first one.
				if d := time.Until(limitedEnd.Add(cfg.RateWindow)); d > 0 {
					select {
					case <-ctx.Done():
						return nil, context.Cause(ctx)
					case <-time.After(d):
					}
				}
			}
			runtime.GC() // start each phase from a quiet heap
			cpu0 := processCPU()
			r, err := cfg.RunPhase(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("bench: phase %s: %w", phase, err)
			}
			if !inProcess {
				r.ServiceCPU = processCPU() - cpu0 // the phase ran in a child: this was the fake's
			}
			if s.Defaults {
				limitedEnd = time.Now()
				after := limited.Faults()
				r.Requests, r.Throttled = after.Requests-before.Requests, after.RateLimited-before.RateLimited
				r.Ideal = time.Duration(float64(r.Requests-r.Throttled) / float64(cfg.RateLimit) * float64(cfg.RateWindow))
			}
			os.RemoveAll(s.Dir)
			if r.Rows != res.Rows {
				return nil, fmt.Errorf("bench: phase %s saw %d rows, the object has %d", phase, r.Rows, res.Rows)
			}
			log.Info("phase done", "phase", phase, "run", rep+1, "seconds", r.Duration.Seconds(), "peak_rss_mb", r.PeakRSS>>20,
				"cpu_s", r.CPU.Seconds(), "fake_cpu_s", r.ServiceCPU.Seconds(), "requests", r.Requests, "throttled", r.Throttled)
			res.Runs = append(res.Runs, r)
			if b := best[phase]; b.Duration == 0 || r.Duration < b.Duration {
				*b = r
			}
		}
	}
	// Peak memory is the highest of every run of a phase, not the fastest
	// run's: memory must stay bounded on every run.
	for _, r := range res.Runs {
		if b := best[r.Phase]; r.PeakRSS > b.PeakRSS {
			b.PeakRSS = r.PeakRSS
		}
	}
	return res, nil
}

// RunPhase runs one phase in this process and measures its time and
// peak RSS. The CLI's child processes call it.
func RunPhase(ctx context.Context, spec PhaseSpec) (PhaseResult, error) {
	out := PhaseResult{Phase: spec.Phase}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return out, err
	}
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return out, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return out, err
		}
		defer pprof.StopCPUProfile()
	}
	if spec.Phase == PhaseSync && spec.Resync {
		if err := benchSync(ctx, spec, &PhaseResult{}, func() {}); err != nil {
			return out, fmt.Errorf("the untimed first sync: %w", err)
		}
		runtime.GC()
		debug.FreeOSMemory()
	}
	peak, peek := startPeakRSS()
	cpu0 := processCPU()
	t0 := time.Now()
	var err error
	switch spec.Phase {
	case PhaseSync:
		err = benchSync(ctx, spec, &out, func() {
			out.Staged = time.Since(t0)
			out.StagedPeakRSS = peek()
		})
	case PhaseFetch:
		var s pageStats
		s, err = fetchPages(ctx, spec, nil)
		out.Rows, out.Pages, out.Bytes = s.Rows, s.Pages, s.Bytes
	case PhaseReadJSON:
		err = benchReadJSON(ctx, spec, &out)
	default:
		err = fmt.Errorf("unknown phase %q", spec.Phase)
	}
	out.Duration = time.Since(t0)
	out.CPU = processCPU() - cpu0
	out.PeakRSS = peak()
	return out, err
}

func benchClient(spec PhaseSpec) (*extract.Client, error) {
	opts := []extract.Option{
		extract.WithAccessToken(spec.Token),
		extract.WithConcurrency(spec.Concurrency),
		extract.WithPageSize(spec.PageSize),
	}
	if !spec.Defaults {
		opts = append(opts, extract.WithoutRateLimit()) // loopback, unlimited: no budget needed
	}
	return extract.New(spec.URL, opts...)
}

// stagedHook tells the bench when an object is staged.
type stagedHook struct{ done func() }

func (stagedHook) ObjectStarted(string)           {}
func (stagedHook) PageDone(string, int, int, int) {}

// ObjectDone: the object is staged. The memory policy of the sync command
// (cmd/sepipe's gcPolicy) is applied too, so the figures are the command's.
func (h stagedHook) ObjectDone(pipeline.ObjectResult) {
	debug.FreeOSMemory()
	h.done()
}

func benchSync(ctx context.Context, spec PhaseSpec, out *PhaseResult, staged func()) error {
	c, err := benchClient(spec)
	if err != nil {
		return err
	}
	streams, err := benchStreams(spec)
	if err != nil {
		return err
	}
	res, err := pipeline.Sync(ctx, c, pipeline.Config{Out: spec.Dir, Only: []string{spec.Object}, Streams: streams, CountNewRows: true, Progress: stagedHook{done: staged}})
	if err != nil {
		return err
	}
	for _, o := range res.Objects {
		out.Rows += o.Rows
		out.Pages += o.Pages
	}
	return nil
}

// benchStreams is the stream config of spec's mode.
func benchStreams(spec PhaseSpec) (map[string]pipeline.StreamConfig, error) {
	switch spec.Mode {
	case "", string(load.Replace):
		return nil, nil
	case string(load.Merge):
		key := []string{"userId", "courseId"}
		if spec.Object == servicetest.WideObjectID {
			key = []string{"activityId"}
		}
		return map[string]pipeline.StreamConfig{spec.Object: {Mode: load.Merge, PrimaryKey: key}}, nil
	case string(load.Append):
		return map[string]pipeline.StreamConfig{spec.Object: {Mode: load.Append}}, nil
	}
	return nil, fmt.Errorf("bench: mode %q: want replace, append or merge", spec.Mode)
}

// benchReadJSON is what a data engineer would do without sepipe: DuckDB's
// read_json over the saved pages, unnesting the results into a table of a
// new DuckDB file (opened, loaded and closed, so the data is on disk as in
// sepipe's warehouse).
func benchReadJSON(ctx context.Context, spec PhaseSpec, out *PhaseResult) error {
	db, err := sql.Open("duckdb", filepath.Join(spec.Dir, "read_json.duckdb"))
	if err != nil {
		return err
	}
	defer db.Close()
	q := "CREATE TABLE " + load.Ident(spec.Object) + " AS SELECT unnest(results, recursive := true) FROM read_json(" +
		load.Literal(filepath.Join(spec.Pages, "*.json")) + ")"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+load.Ident(spec.Object)).Scan(&out.Rows); err != nil {
		return err
	}
	return db.Close()
}

type pageStats struct {
	Rows  int64
	Pages int
	Bytes int64
}

// fetchPages reads every page of the object with the bench client and
// hands its body to keep (nil: discard it). It reads only the page header,
// which the client's paging checks need.
func fetchPages(ctx context.Context, spec PhaseSpec, keep func(n int, body []byte) error) (pageStats, error) {
	c, err := benchClient(spec)
	if err != nil {
		return pageStats{}, err
	}
	var bytes atomic.Int64
	st, err := c.ReadObject(ctx, spec.Object, extract.Query{}, func(_ context.Context, p *extract.Page) (service.PageInfo, error) {
		if p.Restart {
			return service.PageInfo{}, errors.New("the fake's pages did not add up")
		}
		bytes.Add(int64(len(p.Body)))
		if keep != nil {
			if err := keep(p.Number, p.Body); err != nil {
				return service.PageInfo{}, err
			}
		}
		return pageHeader(p.Body)
	})
	return pageStats{Rows: st.Rows, Pages: st.Pages, Bytes: bytes.Load()}, err
}

// savePages saves every page of the object as dir/page-NNNNNN.json.
func savePages(ctx context.Context, spec PhaseSpec, dir string) (pageStats, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pageStats{}, err
	}
	return fetchPages(ctx, spec, func(n int, body []byte) error {
		return os.WriteFile(filepath.Join(dir, fmt.Sprintf("page-%06d.json", n)), body, 0o644)
	})
}

// pageHeader reads the page's header keys up to "results" and derives the
// page's row count from the totals, without reading the rows. It is the
// least a reader must do to page safely.
func pageHeader(body []byte) (service.PageInfo, error) {
	info := service.PageInfo{TotalResults: -1, TotalPages: -1}
	dec := json.NewDecoder(io.LimitReader(bytes.NewReader(body), 512))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return info, fmt.Errorf("page does not start with an object")
	}
	for {
		t, err := dec.Token()
		if err != nil {
			return info, fmt.Errorf("page header: %w", err)
		}
		key, _ := t.(string)
		if key == "results" {
			break
		}
		var v json.Number
		if err := dec.Decode(&v); err != nil {
			return info, fmt.Errorf("page header %q: %w", key, err)
		}
		n, _ := strconv.ParseInt(string(v), 10, 64)
		switch key {
		case "page":
			info.Page = int(n)
		case "resultsPerPage":
			info.ResultsPerPage = int(n)
		case "totalResults":
			info.TotalResults = n
		case "totalPages":
			info.TotalPages = int(n)
		}
	}
	if info.Page < 1 || info.ResultsPerPage < 1 || info.TotalResults < 0 {
		return info, fmt.Errorf("page header without page, resultsPerPage and totalResults")
	}
	info.Rows = int(min(max(info.TotalResults-int64(info.Page-1)*int64(info.ResultsPerPage), 0), int64(info.ResultsPerPage)))
	return info, nil
}

// startPeakRSS starts measuring this process's peak RSS and returns the
// functions that report it: stop ends the measurement, peek reads the peak
// so far. On Linux it resets the kernel's high-water mark
// (VmHWM, via /proc/self/clear_refs) and reads it back at the end; where
// that is not allowed it samples VmRSS every 5 ms instead.
func startPeakRSS() (stop, peek func() int64) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err == nil {
		if _, ok := procStatus("VmHWM:"); ok {
			hwm := func() int64 { v, _ := procStatus("VmHWM:"); return v }
			return hwm, hwm
		}
	}
	var peak atomic.Int64
	sample := func() {
		if v, ok := procStatus("VmRSS:"); ok && v > peak.Load() {
			peak.Store(v)
		}
	}
	sample()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() int64 {
			close(done)
			<-stopped
			sample()
			return peak.Load()
		}, func() int64 {
			sample()
			return peak.Load()
		}
}

// procStatus reads one "Name:   N kB" line of /proc/self/status, in bytes.
func procStatus(name string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		fields := bytes.Fields(line[len(name):])
		if len(fields) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}
