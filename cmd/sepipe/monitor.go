package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// MetricsConfig is where a command's metrics go (docs/operations.md). Each
// is overridden by its flag.
type MetricsConfig struct {
	// Addr is HOST:PORT on which schedule serves /metrics, /healthz and
	// /readyz; listen and dashboard serve them there instead of on their
	// own listener.
	Addr string `yaml:"addr"`
	// File is where sync (and demo) write the run's metrics in
	// Prometheus's text format, for the node exporter's textfile
	// collector: a name ending in .prom, in a folder that exists.
	File string `yaml:"file"`
	// Pushgateway is the Pushgateway sync (and demo) push the run's
	// metrics to, an http(s) URL without a credential.
	Pushgateway string `yaml:"pushgateway"`
}

// metricsFlags are the flags of MetricsConfig: --metrics-addr of the
// long-lived commands, --metrics-file and --pushgateway of a one-shot run.
type metricsFlags struct{ addr, file, pushgateway string }

// addServe registers --metrics-addr; own says where the metrics are
// served without it.
func (f *metricsFlags) addServe(cmd *cobra.Command, own string) {
	cmd.Flags().StringVar(&f.addr, "metrics-addr", "", "HOST:PORT to serve /metrics, /healthz and /readyz on ("+own+"); overrides metrics.addr")
}

// addBatch registers --metrics-file and --pushgateway.
func (f *metricsFlags) addBatch(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.file, "metrics-file", "", "write the run's metrics to this file (*.prom) for the node exporter's textfile collector; overrides metrics.file")
	cmd.Flags().StringVar(&f.pushgateway, "pushgateway", "", "push the run's metrics to this Pushgateway (http://host:9091); overrides metrics.pushgateway")
}

// resolve is the metrics config of a command: the config's metrics block,
// each key overridden by its flag when given, checked (a bad value is a
// usage error naming the flag or the key).
func (f *metricsFlags) resolve(cmd *cobra.Command, c *Config) (MetricsConfig, error) {
	m := c.Metrics
	fl := cmd.Flags()
	for _, s := range []struct {
		flag, key string
		from      string
		to        *string
		check     func(string) error
	}{
		{"metrics-addr", "metrics.addr", f.addr, &m.Addr, checkMetricsAddr},
		{"metrics-file", "metrics.file", f.file, &m.File, checkMetricsFile},
		{"pushgateway", "metrics.pushgateway", f.pushgateway, &m.Pushgateway, monitor.CheckPushgateway},
	} {
		given := fl.Lookup(s.flag) != nil && fl.Changed(s.flag)
		if given {
			*s.to = s.from
		}
		if *s.to == "" {
			continue
		}
		if err := s.check(*s.to); err != nil {
			if given {
				return m, usagef("--%s %v", s.flag, err)
			}
			return m, c.errf(s.key, "%v", err)
		}
	}
	return m, nil
}

// checkMetricsAddr refuses an address that is not HOST:PORT.
func checkMetricsAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q: want HOST:PORT, such as 0.0.0.0:9464", addr)
	}
	return nil
}

// checkMetricsFile refuses a metrics file the textfile collector would not
// read (a name not ending in .prom) or that cannot be written (its
// folder does not exist): found at the start, not after a night's run.
func checkMetricsFile(path string) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("%q: the node exporter's textfile collector reads only files named *.prom", path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("%q: its folder %s does not exist", path, filepath.Dir(path))
	}
	return nil
}

// runStatus is how a run that ended with err is counted: as its exit code
// says (outcome).
func runStatus(err error) monitor.RunStatus {
	if err == nil {
		return monitor.Succeeded
	}
	if code, _ := outcome(err); code == exitPartial {
		return monitor.Partial
	}
	return monitor.Failed
}

// observeRun records a run in m: how it ended (err), its result, each
// stream's last commit as the published warehouse of out holds it and the
// quota client last saw. A warehouse it cannot read is logged: the
// run's own metrics are recorded without it.
func observeRun(ctx context.Context, m *monitor.Metrics, log *slog.Logger, out string, client *extract.Client, res *pipeline.Result, err error) {
	// A run a second signal cancelled is recorded too.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fresh, ferr := freshness(ctx, out)
	if ferr != nil && !errors.Is(ferr, load.ErrNoWarehouse) {
		log.Warn("metrics: cannot read the streams' last commits", "error", ferr)
	}
	var quota extract.Quota
	if client != nil {
		quota = client.Quota()
	}
	m.Run(runStatus(err), res, fresh, quota, time.Now())
}

// freshness reads each stream's last commit from the published warehouse
// of out.
func freshness(ctx context.Context, out string) ([]load.StreamFreshness, error) {
	wh, err := load.OpenReadOnly(ctx, load.Lake{Root: out}.WarehousePath())
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	return wh.Freshness(ctx)
}

// reportRun writes the run's metrics to the metrics file and pushes them
// to the Pushgateway, as mc says; a failure of either is logged, never
// the run's: the data is committed whatever the monitoring's fate (and
// the metrics' absence is what the alerts see).
func reportRun(ctx context.Context, m *monitor.Metrics, mc MetricsConfig, tenant string, log *slog.Logger) {
	if mc.File != "" {
		if err := m.WriteFile(mc.File); err != nil {
			log.Error("metrics: not written", "error", err)
		}
	}
	if mc.Pushgateway != "" {
		grouping := map[string]string{}
		if tenant != "" {
			grouping["tenant"] = tenant
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := m.Push(pctx, mc.Pushgateway, grouping); err != nil {
			log.Error("metrics: not pushed", "error", err)
		}
	}
}

// serveMonitor serves the metrics and probes of a long-lived command on
// addr until ctx is done; its error (the address is taken) ends the
// command.
func serveMonitor(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (func() error, error) {
	ln, err := listenOn(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("serving metrics and probes", "addr", ln.Addr().String())
	return func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // closing
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, nil
}

// outputReady is why a command that writes out cannot now: the folder
// cannot be written, or its working database cannot be opened for a run
// (another program holds it for writing; another sepipe process, a sync
// or a listener's batch, is not a cause).
func outputReady(ctx context.Context, out string) []string {
	var causes []string
	if err := os.MkdirAll(out, 0o755); err != nil {
		causes = append(causes, fmt.Sprintf("the output folder %s cannot be created: %v", out, unwrapPathError(err)))
	} else if err := load.CheckDirWritable(out); err != nil {
		causes = append(causes, fmt.Sprintf("the output folder %s cannot be written: %v", out, unwrapPathError(err)))
	}
	if err := load.ProbeState(ctx, load.Lake{Root: out}); err != nil && !errors.Is(err, load.ErrHeldBySepipe) {
		causes = append(causes, fmt.Sprintf("the working database cannot be opened for a run: %v", err))
	}
	return causes
}
