package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
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

func newDemoCmd(g *globals) *cobra.Command {
	var (
		out   string
		users int
		seed  int64
	)
	cmd := &cobra.Command{
		Use:   "demo [--out DIR] [--users N]",
		Short: "Sync a built-in fake tenant end to end and show the result",
		Long: `Demo starts sepipe's fake of the service on a loopback port, syncs every
report object into DIR exactly as 'sepipe sync' would a real tenant, then
prints each table's row count and the result of an example query.

Open the result with any DuckDB client, e.g.:
  duckdb DIR/warehouse.duckdb "SELECT * FROM course LIMIT 5"`,
		Example: `  sepipe demo
  sepipe demo --out /tmp/demo --users 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if users < 1 {
				return usagef("--users must be at least 1, got %d", users)
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			srv := servicetest.NewServer(servicetest.WithUsers(users), servicetest.WithSeed(seed))
			defer srv.Close()
			fmt.Fprintf(g.stdout, "fake tenant at %s (%d users, seed %d)\n", srv.URL, users, seed)
			client, err := extract.New(srv.URL,
				extract.WithAccessToken(srv.Service.AccessToken()),
				extract.WithAPIToken(srv.Service.APIToken()),
				extract.WithHTTPClient(srv.Client()),
				extract.WithRateLimit(0, 0), // loopback: no budget needed
				extract.WithLogger(log),
			)
			if err != nil {
				return err
			}
			res, err := pipeline.Sync(cmd.Context(), client, pipeline.Config{Out: out, Logger: log, Collections: pipeline.Collections})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "\nrun %s, snapshot %s\n\n", res.RunID, res.SnapshotDate)
			printSummary(g.stdout, res)

			wh, err := load.OpenWarehouse(cmd.Context(), res.Warehouse)
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
			return printRows(g.stdout, rows)
		},
	}
	cmd.Flags().StringVar(&out, "out", "./sepipe-demo", "output folder")
	cmd.Flags().IntVar(&users, "users", 500, "users in the fake tenant (about 12 userCourseProgress rows each)")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the fake tenant's data")
	return cmd
}
