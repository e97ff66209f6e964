package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/bench"
)

func init() { register(newBenchCmd) }

func newBenchCmd(g *globals) *cobra.Command {
	var (
		cfg       bench.Config
		inProcess bool
		phaseSpec string
		nights    bench.NightsConfig
	)
	cmd := &cobra.Command{
		Use:   "bench [--rows N] [--rate-limit N]",
		Short: "Measure sepipe against fetching the pages and against DuckDB's read_json",
		Long: `Bench starts sepipe's fake service on a loopback port with about N rows of
userCourseProgress (with --wide, of learnerActivityDetail, 64 fields) and
measures, on the same pages:

  sepipe     sync of that object end to end (HTTP, decode, Arrow, Parquet, DuckDB)
  fetch      every page fetched with the same client and concurrency, and discarded
  read_json  DuckDB's read_json loading the same pages, saved beforehand as local
             files, into a table of a new DuckDB file (saving is not timed)

Each phase runs in a child process of its own (this binary), so that its peak
resident memory (VmHWM) is its own; the fake service stays in this process.
With --repeat, the phases run interleaved and the fastest run of each counts;
peak memory is the highest of its runs.

With --rate-limit N the sync reads a second fake, with the same data, that
answers 429 (with Retry-After) to data requests beyond N per --rate-window, as
a rate-limited service does. The sync does not know N: it runs with the default
settings, as a default sepipe sync does, and finds the rate itself. The report
gives its time against the ideal, the requests the fake answered divided by N
(in windows), and the share of requests answered 429. Each run starts a window
after the one before ended, so that it meets windows of its own, as a nightly
sync does. Only the sync phase runs unless --phases says otherwise (fetch and
read_json read the unlimited fake).

With --nights N it measures instead what nights cost: the demo's fake tenant
(--users) synced N times, its clock moving a day between runs, as 'sepipe
demo --days N' does; per night the run's time, the publish's, the sizes of the
published warehouse and the working database, and the rows of every history
table, then the growth per night after the first.`,
		Example: `  sepipe bench --rows 1000000
  sepipe bench --rows 5000000 --repeat 1
  sepipe bench --rows 600000 --rate-limit 20 --repeat 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if phaseSpec != "" {
				return runBenchChild(cmd.Context(), g.stdout, phaseSpec)
			}
			if cmd.Flags().Changed("nights") {
				if nights.Nights < 1 || nights.Users < 1 {
					return usagef("--nights and --users must be at least 1, got %d and %d", nights.Nights, nights.Users)
				}
				log, err := g.logger()
				if err != nil {
					return err
				}
				nights.Logger, nights.Dir = log, cfg.Dir
				// A line a night as it ends (a long run shows its progress).
				const line = "%5v  %10v  %6v  %9v  %12v  %13v  %12v  %10v  %8v\n"
				fmt.Fprintf(g.stdout, line, "NIGHT", "SNAPSHOT", "RUN S", "PUBLISH S", "WAREHOUSE MB", "WORKING DB MB", "HISTORY ROWS", "TABLE ROWS", "VERSIONS")
				nights.Night = func(n bench.Night) {
					fmt.Fprintf(g.stdout, line, n.Night, n.SnapshotDate, fmt.Sprintf("%.2f", n.Run.Seconds()), fmt.Sprintf("%.2f", n.Publish.Seconds()),
						fmt.Sprintf("%.1f", float64(n.WarehouseBytes)/1e6), fmt.Sprintf("%.1f", float64(n.StateBytes)/1e6), n.HistoryRows, n.Rows, n.Versions)
				}
				ns, err := bench.Nights(cmd.Context(), nights)
				if err != nil {
					return err
				}
				printNightsGrowth(g.stdout, ns)
				return nil
			}
			if cfg.Rows < 1 {
				return usagef("--rows must be at least 1, got %d", cfg.Rows)
			}
			if cfg.Repeat < 1 {
				return usagef("--repeat must be at least 1, got %d", cfg.Repeat)
			}
			if cfg.RateLimit < 0 {
				return usagef("--rate-limit must not be negative, got %d", cfg.RateLimit)
			}
			if cfg.RateWindow <= 0 {
				return usagef("--rate-window must be more than 0, got %s", cfg.RateWindow)
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			if !inProcess {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench: find this binary to run the phases: %w", err)
				}
				cfg.RunPhase = func(ctx context.Context, spec bench.PhaseSpec) (bench.PhaseResult, error) {
					return runBenchPhaseChild(ctx, self, spec)
				}
			}
			res, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			printBench(g.stdout, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Rows, "rows", 1_000_000, "about how many rows of userCourseProgress (with --wide, of learnerActivityDetail) the fake serves")
	f.IntVar(&cfg.Concurrency, "concurrency", 4, "page requests in flight (sepipe and fetch alike)")
	f.IntVar(&cfg.PageSize, "page-size", 1000, "rows per page")
	f.IntVar(&cfg.Repeat, "repeat", 3, "runs of each phase; the fastest counts")
	f.StringSliceVar(&cfg.Phases, "phases", nil, "run only these phases: sync, fetch, read_json (default all)")
	f.StringVar(&cfg.Dir, "dir", "", "scratch folder (default: a temporary folder, removed afterwards)")
	f.StringVar(&cfg.CPUProfiles, "cpuprofile-dir", "", "write each phase run's CPU profile into this folder")
	f.IntVar(&cfg.RateLimit, "rate-limit", 0, "the sync's fake allows N data requests per --rate-window and answers 429 beyond (0: no limit); the sync is not told")
	f.DurationVar(&cfg.RateWindow, "rate-window", servicetest.DefaultRateWindow, "the window of --rate-limit")
	f.StringVar(&cfg.Mode, "mode", "replace", "the sync's write mode for the object: replace, append, or merge (on userId, courseId)")
	f.BoolVar(&cfg.Wide, "wide", false, "read the fake's wide object instead (learnerActivityDetail: 64 fields, about 3 KB of JSON a row; a merge's key is activityId)")
	f.BoolVar(&cfg.Resync, "resync", false, "time a second sync into the same folder (the first untimed): the warehouse already holds every row, as on every night but the first")
	f.BoolVar(&inProcess, "in-process", false, "run the phases in this process (peak memory then includes the fake service)")
	f.IntVar(&nights.Nights, "nights", 30, "measure N nightly syncs of the demo's tenant instead (the warehouse's growth, each night's run and publish)")
	f.IntVar(&nights.Users, "users", 10_000, "with --nights: the fake tenant's users")
	f.StringVar(&phaseSpec, "phase-spec", "", "internal: run one phase, given as JSON, and print its result")
	_ = f.MarkHidden("phase-spec")
	return cmd
}

// runBenchPhaseChild runs one phase in a child process of this binary and
// reads its result. The child's peak RSS is the larger of what it measured
// and the kernel's maxrss of the whole child.
func runBenchPhaseChild(ctx context.Context, self string, spec bench.PhaseSpec) (bench.PhaseResult, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return bench.PhaseResult{}, err
	}
	c := exec.CommandContext(ctx, self, "bench", "--phase-spec", string(js))
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return bench.PhaseResult{}, fmt.Errorf("child process: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r bench.PhaseResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("child process printed %q: %w", stdout.Bytes(), err)
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss<<10 > r.PeakRSS {
		r.PeakRSS = ru.Maxrss << 10 // Linux reports kB
	}
	return r, nil
}

func runBenchChild(ctx context.Context, stdout io.Writer, spec string) error {
	var s bench.PhaseSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return usagef("--phase-spec: %v", err)
	}
	r, err := bench.RunPhase(ctx, s)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(r)
}

func printBench(w io.Writer, r *bench.Result) {
	resync := ""
	if r.Resync {
		resync = ", timed over a warehouse that holds every row"
	}
	fmt.Fprintf(w, "object %s: %d rows, %d pages, %.1f MB of JSON (%s)\nsync: mode %s%s\n\n",
		r.Object, r.Rows, r.Pages, float64(r.JSONBytes)/1e6, r.Machine, r.Mode, resync)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PHASE\tROWS\tSECONDS\tROWS/S\tPEAK RSS MB\tCPU S\tFAKE CPU S\t")
	for _, p := range []struct {
		name string
		r    bench.PhaseResult
	}{{"sepipe sync", r.Sync}, {"(a) fetch+discard", r.Fetch}, {"(b) duckdb read_json", r.ReadJSON}} {
		if p.r.Duration == 0 {
			continue // not run (--phases)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t\n", p.name, p.r.Rows, p.r.Duration.Seconds(), p.r.RowsPerSecond(),
			float64(p.r.PeakRSS)/(1<<20), p.r.CPU.Seconds(), p.r.ServiceCPU.Seconds())
	}
	tw.Flush()
	if r.Sync.Duration > 0 {
		fmt.Fprintf(w, "\nsepipe: staged as Parquet after %.2f s (peak RSS %.0f MB), then loaded DuckDB in %.2f s\n",
			r.Sync.Staged.Seconds(), float64(r.Sync.StagedPeakRSS)/(1<<20), (r.Sync.Duration - r.Sync.Staged).Seconds())
	}
	if r.RateLimit > 0 {
		printRateLimited(w, r)
		return
	}
	if r.Sync.Duration > 0 && r.Fetch.Duration > 0 {
		fmt.Fprintf(w, "\nsepipe/(a) fetch+discard = %.2f\n", r.SyncOverFetch())
	}
	if r.Sync.Duration > 0 && r.ReadJSON.Duration > 0 {
		fmt.Fprintf(w, "sepipe/(b) read_json     = %.2f\n", r.SyncOverReadJSON())
	}
	fmt.Fprintln(w, "\npeak RSS: the high-water mark (VmHWM) of the process that ran the phase; CPU S: its user+system CPU;")
	fmt.Fprintln(w, "FAKE CPU S: CPU of this process, where the fake service runs, meanwhile. Times: the fastest of --repeat runs.")
}

// printRateLimited reports the rate-limited sync against its ideal time.
func printRateLimited(w io.Writer, r *bench.Result) {
	fmt.Fprintf(w, "\nservice limit: %d requests per %s, unknown to the sync (default settings)\n", r.RateLimit, r.RateWindow)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RUN\tREQUESTS\t429\t429 SHARE\tIDEAL S\tSYNC S\tSYNC/IDEAL\tSTAGED S\tSTAGED/IDEAL\t")
	n := 0
	for _, p := range r.Runs {
		if p.Phase != bench.PhaseSync || p.Ideal <= 0 {
			continue
		}
		n++
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f %%\t%.2f\t%.2f\t%.3f\t%.2f\t%.3f\t\n", n, p.Requests, p.Throttled, 100*p.ThrottledShare(),
			p.Ideal.Seconds(), p.Duration.Seconds(), p.OverIdeal(), p.Staged.Seconds(), ratioOf(p.Staged, p.Ideal))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nideal: the requests the fake answered (not 429) divided by the limit; SYNC: the whole sync, DuckDB load")
	fmt.Fprintln(w, "included; STAGED: until the object was staged as Parquet (the fetch done). Every run is listed.")
	if s := r.Sync; s.Ideal > 0 && s.Ideal < benchSteadyWindows*r.RateWindow && s.Requests > 0 {
		rows := (int64(float64(r.Rows)/float64(s.Requests)*float64(r.RateLimit)*benchSteadyWindows) + 999) / 1000 * 1000
		fmt.Fprintf(w, "\nThe ideal is under %d windows: the first 429, which finding the limit costs once, pauses the sync\n", benchSteadyWindows)
		fmt.Fprintf(w, "for its Retry-After (whole seconds) and weighs more than in a longer run; --rows %d gives about %d.\n", rows, benchSteadyWindows)
	}
}

// benchSteadyWindows: a rate-limited run shorter than this many windows is
// dominated by finding the limit (docs/performance.md).
const benchSteadyWindows = 20

func ratioOf(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

// printNightsGrowth sums up a --nights run: what a night after the first
// adds to the warehouse, and the run's and publish's time on the second
// night and the last.
func printNightsGrowth(w io.Writer, ns []bench.Night) {
	if len(ns) < 3 {
		return
	}
	first, second, last := ns[0], ns[1], ns[len(ns)-1]
	perNight := float64(last.WarehouseBytes-first.WarehouseBytes) / float64(len(ns)-1)
	fmt.Fprintf(w, "\nwarehouse: %.1f MB after night 1, %.1f MB after night %d: %.1f MB a night after the first (%.0f%% of night 1's)\n",
		float64(first.WarehouseBytes)/1e6, float64(last.WarehouseBytes)/1e6, last.Night, perNight/1e6, 100*perNight/float64(first.WarehouseBytes))
	fmt.Fprintf(w, "history rows: %d after night 1, %d after night %d, held in %d versions\n", first.HistoryRows, last.HistoryRows, last.Night, last.Versions)
	fmt.Fprintf(w, "run: %.2f s on night 2, %.2f s on night %d; publish: %.2f s and %.2f s\n",
		second.Run.Seconds(), last.Run.Seconds(), last.Night, second.Publish.Seconds(), last.Publish.Seconds())
}
