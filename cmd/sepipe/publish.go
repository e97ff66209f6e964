package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/load"
)

func init() { register(newPublishCmd) }

func newPublishCmd(g *globals) *cobra.Command {
	var f folderFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish the output folder's working database as warehouse.duckdb",
		Long: `Publish copies sepipe's working database (DIR/.sepipe/state.duckdb) to a new
file and renames it over DIR/warehouse.duckdb, the file BI tools read. Every
sync and listen does this itself after each commit; run publish to finish a
publish that could not happen (a program held warehouse.duckdb open for
writing, or the process died mid-publish). It does nothing when the published
file is already current. Readers holding the old file keep it until they
reconnect. --out defaults to the config's output.dir, as the sync's.`,
		Example: `  sepipe publish --out ./sepipe-data`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := f.folder(cmd)
			if err != nil {
				return err
			}
			lake := load.Lake{Root: out}
			pending := lake.PublishPending()
			if err := load.PublishState(cmd.Context(), lake, load.WithLockWait(wait)); err != nil {
				return err
			}
			if pending {
				fmt.Fprintf(g.stdout, "published %s\n", lake.WarehousePath())
			} else {
				fmt.Fprintf(g.stdout, "%s is up to date\n", lake.WarehousePath())
			}
			return nil
		},
	}
	f.add(cmd, defaultOut, "output folder")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for a sync or listen holding the working database")
	return cmd
}
