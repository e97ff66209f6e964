package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/dbtgen"
	"github.com/sepipe/sepipe/load"
)

func init() { register(newDBTSourcesCmd) }

func newDBTSourcesCmd(g *globals) *cobra.Command {
	var (
		f       runFlags
		outFile string
		demo    bool
	)
	cmd := &cobra.Command{
		Use:   "dbt-sources [--base-url URL | --demo] [--out-file PATH]",
		Short: "Write the dbt sources.yml of the warehouse from the service's /describe",
		Long: `dbt-sources describes every report object of the tenant and writes the dbt
sources.yml of the warehouse sepipe builds: each object's table and its
<object>_history and <object>_versions with columns, DuckDB types and descriptions (the
service's display names) and tests (unique and not_null on keys,
accepted_values from picklist options, relationships between objects), then
the collections, the webhook events table and sepipe's bookkeeping tables.
Rerun it when the service's schema changes, then 'dbt build'.

The tenant and its credentials are the sync's: --base-url or the config's
service.tenant_url (./sepipe.yaml when it exists, or --config), the OAuth
access token from SEPIPE_ACCESS_TOKEN (or the variable the config names, or
its OAuth client). --demo describes sepipe's built-in fake instead of a
tenant. --out-file - writes to stdout.`,
		Example: `  export SEPIPE_ACCESS_TOKEN=...
  sepipe dbt-sources --base-url https://acme.example.com
  sepipe dbt-sources --demo --out-file dbt/models/staging/sources.yml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var client *extract.Client
			var dc dbtgen.Config // the config's append streams (their key is unique per day), the schedule's freshness
			switch {
			case demo && (cmd.Flags().Changed("base-url") || cmd.Flags().Changed("config")):
				return usagef("--demo excludes --base-url and --config")
			case demo:
				log, err := g.logger()
				if err != nil {
					return err
				}
				srv := servicetest.NewServer()
				defer srv.Close()
				if client, err = extract.New(srv.URL, extract.WithLogger(log),
					extract.WithAccessToken(srv.Service.AccessToken()), extract.WithHTTPClient(srv.Client())); err != nil {
					return err
				}
			default:
				c, _, cl, err := f.connect(cmd, g, true)
				if err != nil {
					return err
				}
				client = cl
				for _, id := range sortedKeys(c.Streams) {
					if c.Streams[id].pipeline().Mode == load.Append {
						dc.Append = append(dc.Append, id)
					}
				}
				if c.Schedule.Cron != "" {
					if dc.WarnAfter, err = scheduleMaxAge(c); err != nil {
						return err
					}
				}
			}
			if outFile == "-" {
				b, err := dbtgen.Sources(cmd.Context(), client, dc)
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(b)
				return err
			}
			if err := dbtgen.WriteSources(cmd.Context(), client, outFile, dc); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s\n", outFile)
			return nil
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&demo, "demo", false, "describe sepipe's built-in fake tenant instead of a real one")
	cmd.Flags().StringVar(&outFile, "out-file", "dbt/models/staging/sources.yml", "file to write; - for stdout")
	return cmd
}
