package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/load"
)

func init() { register(newHistoryCmd) }

func newHistoryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Work on the warehouse's history of each stream",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newHistoryRebuildCmd(g))
	return cmd
}

func newHistoryRebuildCmd(g *globals) *cobra.Command {
	var f folderFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "rebuild [STREAM...]",
		Short: "Rebuild the warehouse's history of streams from the lake",
		Long: `Rebuild makes each stream's history in the warehouse (<stream>_versions, and
the view <stream>_history over it) again from the Parquet lake, which keeps
every day's partition as it was read: one read day per partition. Name streams
to rebuild only those; without names, every stream the warehouse keeps a
history of. It runs in one transaction (a process killed during it leaves the
history as it was) under the working database's lock, waiting for a sync or
listen that holds it, and publishes the warehouse when it is done. A stream
without a partition in the lake is an error naming it, and nothing changes.
--out defaults to the config's output.dir, as the sync's.`,
		Example: `  sepipe history rebuild --out ./sepipe-data
  sepipe history rebuild userCourseProgress --out ./sepipe-data`,
		RunE: func(cmd *cobra.Command, streams []string) error {
			out, err := f.folder(cmd)
			if err != nil {
				return err
			}
			lake := load.Lake{Root: out}
			if _, err := os.Stat(lake.StatePath()); errors.Is(err, fs.ErrNotExist) {
				if _, err := os.Stat(lake.WarehousePath()); err != nil {
					return fmt.Errorf("output folder %s: no history to rebuild (no sepipe run has written it): %w", out, load.ErrNoWarehouse)
				}
			}
			wh, err := load.OpenState(cmd.Context(), lake, load.WithLockWait(wait))
			if err != nil {
				return err
			}
			defer wh.Close()
			rebuilt, err := wh.RebuildHistory(cmd.Context(), streams...)
			if err != nil {
				return err
			}
			if err := wh.Publish(cmd.Context()); err != nil {
				return err
			}
			for _, r := range rebuilt {
				fmt.Fprintln(termSafe(g.stdout), r.String())
			}
			fmt.Fprintf(g.stdout, "published %s\n", lake.WarehousePath())
			return nil
		},
	}
	f.add(cmd, defaultOut, "output folder")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for a sync or listen holding the working database")
	return cmd
}
