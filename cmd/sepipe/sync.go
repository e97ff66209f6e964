package main

import (
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
)

type syncFlags struct {
	baseURL     string
	out         string
	objects     []string
	concurrency int
	rate        float64
	pageSize    int
}

func init() { register(newSyncCmd) }

func newSyncCmd(g *globals) *cobra.Command {
	f := &syncFlags{}
	cmd := &cobra.Command{
		Use:   "sync --base-url URL [--out DIR]",
		Short: "Sync every report object of a tenant into Parquet and DuckDB",
		Long: `Sync reads every Coach report object of the tenant at --base-url (or the
ones named by --objects), derives each object's schema from /describe, and
writes DIR/lake/<object>/snapshot_date=<today>/part-*.parquet and the tables
of DIR/warehouse.duckdb. A rerun on the same day replaces that day's data.

The OAuth access token is read from the environment variable
SEPIPE_ACCESS_TOKEN; it is never taken from a flag, so it stays out of your
shell history and process list.`,
		Example: `  export SEPIPE_ACCESS_TOKEN=...
  sepipe sync --base-url https://acme.example.com --out ./warehouse
  sepipe sync --base-url http://127.0.0.1:8080 --objects course,user`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.baseURL == "" {
				return usagef("--base-url is required (the tenant's URL, e.g. https://acme.example.com)")
			}
			token := os.Getenv("SEPIPE_ACCESS_TOKEN")
			if token == "" {
				return usagef("SEPIPE_ACCESS_TOKEN is not set: export the tenant's OAuth access token first")
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			client, err := extract.New(f.baseURL,
				extract.WithAccessToken(token),
				extract.WithAPIToken(os.Getenv("SEPIPE_API_TOKEN")),
				extract.WithConcurrency(f.concurrency),
				extract.WithRateLimit(f.rate, max(1, int(f.rate))),
				extract.WithPageSize(f.pageSize),
				extract.WithLogger(log),
			)
			if err != nil {
				return usagef("--base-url: %v", err)
			}
			res, err := pipeline.Sync(cmd.Context(), client, pipeline.Config{Out: f.out, Objects: f.objects, Logger: log, Collections: collectionsFor(os.Getenv("SEPIPE_API_TOKEN") != "")})
			if res != nil {
				printSummary(g.stdout, res)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.baseURL, "base-url", "", "tenant URL (https://<subdomain>.<domain>)")
	cmd.Flags().StringVar(&f.out, "out", "./sepipe-data", "output folder for lake/ and warehouse.duckdb")
	cmd.Flags().StringSliceVar(&f.objects, "objects", nil, "comma-separated object ids to sync (default: all)")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 4, "page requests in flight per object")
	cmd.Flags().Float64Var(&f.rate, "rate", 10, "request budget, requests per second, shared by all workers")
	cmd.Flags().IntVar(&f.pageSize, "page-size", 1000, "rows per page requested")
	return cmd
}

// collectionsFor returns the collection streams a run can read: themes and
// assets with the access token, webhook subscriptions and delivery logs
// only with the developer API token.
func collectionsFor(haveAPIToken bool) []string {
	var out []string
	for _, c := range pipeline.Collections {
		if haveAPIToken || !slices.Contains(pipeline.WebhookCollections, c) {
			out = append(out, c)
		}
	}
	return out
}
