package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/dashboard"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/load"
)

func init() { register(newDashboardCmd) }

func newDashboardCmd(g *globals) *cobra.Command {
	var (
		f                             folderFlags
		mf                            metricsFlags
		addr, panelsDir, allowedHosts string
	)
	cmd := &cobra.Command{
		Use:   "dashboard [--out DIR] [--addr 127.0.0.1:8787]",
		Short: "Serve the enablement numbers as a web page over the warehouse",
		Long: `Dashboard serves a page over the published DIR/warehouse.duckdb: headline
numbers, completions over time, assignment status, overdue learners by team and
region, the curriculum funnel, engagement, the most viewed and shared assets,
webhook event activity and the pipeline's own health, with filters for date
range, team and region. It needs no network: the page is in the binary.

Each panel is a YAML file (name, title, question, sql, kind: number, line, bar or
table; x and y columns for charts). The built-in panels ship with sepipe; the
files of --panels-dir (dashboard.panels_dir) are read on every page load, and one
with a built-in's name replaces it (two of them with one name are an error). A panel whose SQL fails shows its error in
place. Each request opens the warehouse read-only and closes it again, so an
open dashboard never blocks a sync or listen.

There is no login. The dashboard answers only requests addressed to localhost,
an IP address or the host of --addr: a web page that points its own name at
127.0.0.1 (DNS rebinding) is refused (421). Behind a proxy that serves it under
another name, list that name in --allowed-hosts (dashboard.allowed_hosts). See
docs/dashboard.md.`,
		Example: `  sepipe dashboard --out ./sepipe-demo
  sepipe dashboard --out ./sepipe-data --addr 0.0.0.0:8787 --panels-dir ./panels`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			conf, out, err := f.load(cmd)
			if err != nil {
				return err
			}
			if !fl.Changed("addr") && conf.Dashboard.Addr != "" {
				addr = conf.Dashboard.Addr
			}
			if !fl.Changed("panels-dir") && conf.Dashboard.PanelsDir != "" {
				panelsDir = conf.Dashboard.PanelsDir
			}
			hosts, err := dashboard.ParseAllowedHosts(allowedHosts)
			if err != nil {
				return usagef("--allowed-hosts: %v", err)
			}
			if !fl.Changed("allowed-hosts") {
				for i, h := range conf.Dashboard.AllowedHosts {
					n, err := dashboard.ParseAllowedHosts(h)
					if err != nil {
						return conf.errf(fmt.Sprintf("dashboard.allowed_hosts[%d]", i), "%v", err)
					}
					hosts = append(hosts, n...)
				}
			}
			if _, err := dashboard.Panels(panelsDir); err != nil {
				return usagef("%v", err)
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			mc, err := mf.resolve(cmd, conf)
			if err != nil {
				return err
			}
			mon := monitor.Handler(monitor.New(conf.tenant), func(ctx context.Context) []string { return dashboardReady(ctx, out) })
			dc := dashboard.Config{Out: out, PanelsDir: panelsDir, Logger: log, Addr: addr, AllowedHosts: hosts}
			if mc.Addr == "" {
				dc.Wrap = monitor.Beside(mon)
			}
			ln, err := listenOn(addr)
			if err != nil {
				return err
			}
			if mc.Addr != "" {
				stop, err := serveMonitor(cmd.Context(), mc.Addr, mon, log)
				if err != nil {
					ln.Close()
					return err
				}
				defer stop() //nolint:errcheck // closing
			}
			srv := &http.Server{Handler: dashboard.Handler(dc), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(g.stdout, "dashboard of %s on http://%s/ (Ctrl-C stops it)\n", out, ln.Addr())
			return serve(cmd.Context(), srv, ln)
		},
	}
	f.add(cmd, "./sepipe-demo", "output folder holding warehouse.duckdb (default: the config's output.dir when there is a config, else ./sepipe-demo)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8787", "HOST:PORT to serve on; overrides dashboard.addr")
	cmd.Flags().StringVar(&panelsDir, "panels-dir", "", "folder of your own panel files (*.yaml); overrides dashboard.panels_dir")
	mf.addServe(cmd, "default: on --addr, beside the page")
	cmd.Flags().StringVar(&allowedHosts, "allowed-hosts", "", "host names to answer besides localhost, IP addresses and the --addr host, comma-separated (a proxy's name); overrides dashboard.allowed_hosts")
	return cmd
}

// dashboardReady is why the dashboard cannot show the numbers now (its
// readiness probe): the published warehouse does not exist yet, or
// cannot be opened for reading.
func dashboardReady(ctx context.Context, out string) []string {
	wh, err := load.OpenReadOnly(ctx, load.Lake{Root: out}.WarehousePath())
	if err != nil {
		return []string{fmt.Sprintf("the published warehouse cannot be read: %v", err)}
	}
	wh.Close()
	return nil
}
