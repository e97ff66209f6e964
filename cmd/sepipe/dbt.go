package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/dbtgen"
)

func init() { register(newDBTSourcesCmd) }

func newDBTSourcesCmd(g *globals) *cobra.Command {
	var (
		baseURL, outFile string
		demo             bool
	)
	cmd := &cobra.Command{
		Use:   "dbt-sources [--base-url URL | --demo] [--out-file PATH]",
		Short: "Write the dbt sources.yml of the warehouse from the service's /describe",
		Long: `dbt-sources describes every report object of the tenant and writes the dbt
sources.yml of the warehouse sepipe builds: each object's table and its
<object>_history view with columns, DuckDB types and descriptions (the
service's display names) and tests (unique and not_null on keys,
accepted_values from picklist options, relationships between objects), then
the collections, the webhook events table and sepipe's bookkeeping tables.
Rerun it when the service's schema changes, then 'dbt build'.

The OAuth access token comes from SEPIPE_ACCESS_TOKEN. --demo describes
sepipe's built-in fake instead of a tenant. --out-file - writes to stdout.`,
		Example: `  export SEPIPE_ACCESS_TOKEN=...
  sepipe dbt-sources --base-url https://acme.example.com
  sepipe dbt-sources --demo --out-file dbt/models/staging/sources.yml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			opts := []extract.Option{extract.WithLogger(log)}
			switch {
			case demo && baseURL != "":
				return usagef("--demo and --base-url exclude each other")
			case demo:
				srv := servicetest.NewServer()
				defer srv.Close()
				baseURL = srv.URL
				opts = append(opts, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithHTTPClient(srv.Client()))
			case baseURL == "":
				return usagef("--base-url is required (the tenant's URL, e.g. https://acme.example.com), or --demo")
			default:
				token := os.Getenv("SEPIPE_ACCESS_TOKEN")
				if token == "" {
					return usagef("SEPIPE_ACCESS_TOKEN is not set: export the OAuth access token with Coach reporting access")
				}
				opts = append(opts, extract.WithAccessToken(token))
			}
			client, err := extract.New(baseURL, opts...)
			if err != nil {
				return usagef("--base-url: %v", err)
			}
			if outFile == "-" {
				b, err := dbtgen.Sources(cmd.Context(), client)
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(b)
				return err
			}
			if err := dbtgen.WriteSources(cmd.Context(), client, outFile); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s\n", outFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&baseURL, "base-url", "", "tenant URL (https://<subdomain>.<domain>)")
	cmd.Flags().BoolVar(&demo, "demo", false, "describe sepipe's built-in fake tenant instead of a real one")
	cmd.Flags().StringVar(&outFile, "out-file", "dbt/models/staging/sources.yml", "file to write; - for stdout")
	return cmd
}
