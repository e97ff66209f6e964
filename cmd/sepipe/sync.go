package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/pipeline"
)

type syncFlags struct {
	runFlags
	metrics     metricsFlags
	fullRefresh []string
	quiet       bool
}

func init() { register(newSyncCmd) }

func newSyncCmd(g *globals) *cobra.Command {
	f := &syncFlags{}
	cmd := &cobra.Command{
		Use:   "sync [--config sepipe.yaml] [--base-url URL] [--out DIR]",
		Short: "Sync the tenant's report objects into Parquet and DuckDB",
		Long: `Sync reads every Coach report object of the tenant (or the ones the config's
include/exclude or --objects select), derives each object's schema from
/describe, and writes DIR/lake/<object>/snapshot_date=<today>/part-*.parquet
and the tables of DIR/warehouse.duckdb. A rerun on the same day replaces that
day's data. Streams are configured in sepipe.yaml (write mode, primary key,
cursor, lookback, contract, filters); flags override the file.

The OAuth access token comes from the environment: SEPIPE_ACCESS_TOKEN, or
the variable credentials.access_token names in the config. It is never taken
from a flag, so it stays out of your shell history and process list.

On a terminal each stream gets a progress bar (pages, rows, rows/s); otherwise,
or with --quiet, progress is plain log lines on stderr. A summary table ends
the run on stdout: stream, mode, rows, new rows (rows the table did not hold
before; for merge streams the rows inserted or changed), rejects, pages,
requests, duration.

Exit codes: 0 ok, 1 the run failed (nothing committed), 2 bad usage or
configuration, 3 partial: streams failed, were skipped (the tenant is not
entitled to their interface) or deferred (the request quota), or the
committed run is not published yet ('sepipe publish'); docs/cli.md lists
every case.`,
		Example: `  export SEPIPE_ACCESS_TOKEN=...
  sepipe sync                                   # reads ./sepipe.yaml
  sepipe sync --config /etc/sepipe/acme.yaml --full-refresh userCourseProgress
  sepipe sync --base-url https://acme.example.com --out ./warehouse --objects course,user`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.load(cmd, g)
			if err != nil {
				return err
			}
			fb, log, err := newFeedback(g, f.quiet)
			if err != nil {
				return err
			}
			defer fb.finish()
			c.warnTo(func(w string) { log.Warn(w) })
			mc, err := f.metrics.resolve(cmd, c)
			if err != nil {
				return err
			}
			var m *monitor.Metrics
			if mc.File != "" || mc.Pushgateway != "" {
				m = monitor.New(c.tenant)
				defer reportRun(cmd.Context(), m, mc, c.tenant, log)
			}
			_, err = runSync(cmd.Context(), g, c, log, fb, m, f.objects, continuationFor(f.objects), f.fullRefresh)
			return err
		},
	}
	f.add(cmd, true)
	f.metrics.addBatch(cmd)
	cmd.Flags().StringSliceVar(&f.fullRefresh, "full-refresh", nil, "streams to rebuild from a full read (their incremental state is dropped), comma-separated")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress bars: plain log lines only")
	return cmd
}

// continuationFor is what a sync or plan told objects (--objects) reads on
// a day a quota deferred streams: streams asked for this once are read
// whatever the day left; otherwise the day is continued.
func continuationFor(objects []string) pipeline.Continuation {
	if len(objects) > 0 {
		return pipeline.ReadAll
	}
	return pipeline.ContinueOrReadAll
}

// quotaBeforeRun is a sync that met the service's request quota spent
// before it could list what to read (a plan or another client used the
// window, and it resets after requests.max_wait): nothing was read and
// nothing is lost, as in a run whose streams the quota deferred (exit 3).
type quotaBeforeRun struct{ *extract.QuotaError }

func (e quotaBeforeRun) Unwrap() error { return e.QuotaError }

// beforeRun is err as quotaBeforeRun when it is the quota met before the
// run read anything (listing the objects, in selectRun); a run's own error (a RunError, which may hold quota errors of
// streams it deferred) and any other error are returned as they are.
func beforeRun(err error) error {
	if qe, re := (*extract.QuotaError)(nil), (*pipeline.RunError)(nil); errors.As(err, &qe) && !errors.As(err, &re) {
		return quotaBeforeRun{qe}
	}
	return err
}

// runSync runs one sync of objects (nil: the configuration's include or
// exclude, or every stream) and prints its summary; cont says what it
// reads on a day a quota deferred streams. It is shared by sync and
// schedule.
//
// m, when not nil, counts the run's requests and records how it ended
// (a run that cannot start for its usage or config is not a run).
func runSync(ctx context.Context, g *globals, c *Config, log *slog.Logger, fb feedback, m *monitor.Metrics, objects []string, cont pipeline.Continuation, fullRefresh []string) (res *pipeline.Result, err error) {
	var extra []extract.Option
	if m != nil {
		extra = append(extra, extract.WithRequestObserver(m))
	}
	client, err := newClient(c, log, true, extra...)
	if err != nil {
		return nil, err
	}
	if m != nil {
		defer func() { observeRun(ctx, m, log, c.Output.Dir, client, res, err) }()
	}
	sel, err := selectRun(ctx, c, client, objects, fullRefresh, false)
	if err != nil {
		return nil, beforeRun(err)
	}
	res, err = pipeline.Sync(ctx, client, pipeline.Config{
		Out:               c.Output.Dir,
		Selection:         sel,
		Continuation:      cont,
		Streams:           c.streams(),
		FullRefresh:       fullRefresh,
		ObjectConcurrency: c.Requests.ObjectConcurrency,
		Logger:            log,
		Progress:          fb,
		CountNewRows:      true,
		MaxValueBytes:     c.Output.MaxValueBytes,
		Iceberg:           c.Output.Lake.Iceberg,
	})
	fb.finish()
	switch {
	case res != nil && len(res.Objects) == 0 && cont == pipeline.ContinueOnly:
		fmt.Fprintln(g.stdout, "nothing left to continue today")
	case res != nil:
		printSummary(g.stdout, res)
	}
	return res, beforeRun(err)
}
