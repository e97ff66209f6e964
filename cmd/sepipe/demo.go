package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/internal/demo"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// demoQuery is the example the demo runs on the warehouse it built.
const demoQuery = `SELECT status,
       count(*)                          AS assignments,
       count(DISTINCT userId)            AS learners,
       round(avg(progressPercentage), 1) AS avg_progress_pct
FROM "userCourseProgress"
GROUP BY status
ORDER BY assignments DESC`

func init() { register(newDemoCmd) }

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newDemoCmd(g *globals) *cobra.Command {
	var (
		out   string
		users int
		seed  int64
		shape bool
		days  int
		mf    metricsFlags
	)
	cmd := &cobra.Command{
		Use:   "demo [--out DIR] [--users N]",
		Short: "Sync a built-in fake tenant end to end and show the result",
		Long: `Demo starts sepipe's fake of the service on a loopback port and syncs every
report object and collection into DIR exactly as 'sepipe sync' would a real
tenant, once a day for --days days (the fake tenant's clock moves a day
between runs, so the lake holds a short history), then prints the last
run's row counts and the result of an example query.

Open the result with 'sepipe query --out DIR', or any DuckDB client opened
read-only (a client holding the file for writing stops the next run's
publish; docs/bi.md), e.g.:
  duckdb -readonly DIR/warehouse.duckdb "SELECT * FROM course LIMIT 5"`,
		Example: `  sepipe demo
  sepipe demo --out /tmp/demo --users 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if users < 1 {
				return usagef("--users must be at least 1, got %d", users)
			}
			if days < 1 {
				// demo.Config takes 0 for its default; the flag has
				// its default already, so 0 here is a mistake.
				return usagef("--days must be at least 1, got %d", days)
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			dc := demo.Config{Out: out, Users: users, Seed: seed, Days: days, ShapeVariants: shape, Logger: log}
			mc, err := mf.resolve(cmd, defaultConfig())
			if err != nil {
				return err
			}
			var m *monitor.Metrics
			if mc.File != "" || mc.Pushgateway != "" {
				m = monitor.New("")
				dc.Requests = m
				dc.Ran = func(r *pipeline.Result) { observeRun(cmd.Context(), m, log, out, nil, r, nil) }
				defer reportRun(cmd.Context(), m, mc, "", log)
			}
			dr, err := demo.Run(cmd.Context(), dc)
			if err != nil {
				if m != nil {
					observeRun(cmd.Context(), m, log, out, nil, nil, err)
				}
				return err
			}
			fmt.Fprintf(g.stdout, "fake tenant: %d users, seed %d; %d daily runs\n", users, seed, len(dr.Runs))
			res := &dr.Runs[len(dr.Runs)-1]
			fmt.Fprintf(g.stdout, "\nrun %s, snapshot %s\n\n", res.RunID, res.SnapshotDate)
			printSummary(g.stdout, res)

			wh, err := load.OpenReadOnly(cmd.Context(), res.Warehouse)
			if err != nil {
				return err
			}
			defer wh.Close()
			fmt.Fprintf(g.stdout, "\nwarehouse: %s\nlake:      %s\n\nexample query:\n%s\n\n", res.Warehouse, res.Lake, demoQuery)
			rows, err := wh.DB().QueryContext(cmd.Context(), demoQuery)
			if err != nil {
				return fmt.Errorf("example query: %w", err)
			}
			defer rows.Close()
			if err := printRows(g.stdout, rows); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "\ndashboard: sepipe dashboard --out %s   (then open http://127.0.0.1:8787/)\n", shellQuote(out))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "./sepipe-demo", "output folder")
	cmd.Flags().IntVar(&users, "users", 500, "users in the fake tenant (about 12 userCourseProgress rows each)")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the fake tenant's data")
	cmd.Flags().BoolVar(&shape, "shape-variants", false, "make some of the fake's assets send a field as another JSON type; the warehouse widens the column (off by default)")
	mf.addBatch(cmd)
	cmd.Flags().IntVar(&days, "days", 3, "days of history to build: one run per day, the tenant's clock advancing a day between them")
	return cmd
}
