package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/load"
)

func init() { register(newVersionCmd) }

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sepipe's version and the versions of its engines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "sepipe %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(g.stdout, "  warehouse file format: DuckDB storage_compatibility_version %s (opens in DuckDB 1.0 and later)\n", load.StorageVersion)
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					switch d.Path {
					case "github.com/duckdb/duckdb-go/v2", "github.com/apache/arrow-go/v18":
						fmt.Fprintf(g.stdout, "  %s %s\n", d.Path, d.Version)
					}
				}
			}
			return nil
		},
	}
}
