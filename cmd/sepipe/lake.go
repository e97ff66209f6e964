package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/lakehouse"
)

func init() { register(newLakeCmd) }

func newLakeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lake",
		Short: "Maintain the Iceberg lake (output.lake.iceberg)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newLakeExpireCmd(g))
	return cmd
}

func newLakeExpireCmd(g *globals) *cobra.Command {
	var (
		config    string
		tenant    string
		olderThan string
	)
	cmd := &cobra.Command{
		Use:   "expire",
		Short: "Expire old Iceberg snapshots and remove the files nothing references",
		Long: `Expire expires, in every table of the Iceberg lake the config's
output.lake.iceberg names, the snapshots older than --older-than (each table's
current snapshot stays), deletes the manifests and data files only they
referenced, and removes files under the tables' folders that no snapshot
references and that are older than --older-than (files staged by runs that
never committed). Readers can no longer time-travel to an expired snapshot.

A sync settles the Iceberg commits a dead run left at its start, by the run ids
in the tables' snapshot logs; expiring erases those ids, so keep --older-than
far longer than a run can stay unsettled (days, not minutes).

With tenants (each in a namespace named after it) it expires every tenant's
tables, or only those of --tenant.`,
		Example: `  sepipe lake expire --older-than 90d
  sepipe lake expire --older-than 90d --tenant acme
  sepipe lake expire --config /etc/sepipe.yaml --older-than 30d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := ParseDuration(olderThan)
			if err != nil {
				return usagef("--older-than: %v", err)
			}
			if age <= 0 {
				return usagef("--older-than %s: want a positive age such as 90d", olderThan)
			}
			c, err := LoadConfig(config, cmd.Flags().Changed("config"))
			if err != nil {
				return err
			}
			if c.Output.Lake.Iceberg == nil {
				return usagef("the config has no output.lake.iceberg block: there is no Iceberg lake to expire")
			}
			if err := c.validateLake(); err != nil {
				return err
			}
			// With tenants: the one --tenant names, else every tenant's
			// namespace (one maintenance job for a shared catalog).
			namespaces := sortedKeys(c.Tenants)
			if tenant == "" && len(c.Tenants) > 0 {
				if err := c.validateTenants(); err != nil {
					return err
				}
			} else {
				if err := c.UseTenant(tenant); err != nil {
					return err
				}
				namespaces = []string{c.Output.Lake.Iceberg.Namespace}
			}
			lh, err := lakehouse.Open(cmd.Context(), *c.Output.Lake.Iceberg)
			if err != nil {
				return err
			}
			defer lh.Close()
			var expired []lakehouse.Expired
			for _, ns := range namespaces {
				e, nerr := lh.ExpireNamespace(cmd.Context(), ns, age)
				expired, err = append(expired, e...), errors.Join(err, nerr)
			}
			tw := tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tSNAPSHOTS BEFORE\tAFTER\tORPHAN FILES REMOVED")
			for _, e := range expired {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", cell(e.Table), e.SnapshotsBefore, e.SnapshotsAfter, e.OrphansRemoved)
			}
			tw.Flush()
			return err
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "config file (default ./sepipe.yaml when it exists)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "expire only this tenant's namespace (default: every tenant's, with tenants)")
	cmd.Flags().StringVar(&olderThan, "older-than", "", "expire snapshots older than this (e.g. 90d, 720h); required")
	_ = cmd.MarkFlagRequired("older-than")
	return cmd
}
