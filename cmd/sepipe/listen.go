package main

import (
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/webhooks"
)

func init() { register(newListenCmd) }

// defaultListenAddr is where listen receives without --addr or
// webhooks.listen: not the dashboard's 127.0.0.1:8787, so both run on
// one host without flags.
const defaultListenAddr = "127.0.0.1:8090"

func newListenCmd(g *globals) *cobra.Command {
	var (
		cfg     webhooks.ListenConfig
		secrets []string
		f       folderFlags
		mf      metricsFlags
	)
	cmd := &cobra.Command{
		Use:   "listen --addr HOST:PORT --out DIR",
		Short: "Receive webhook events and land them in the warehouse",
		Long: `Listen receives the service's webhook deliveries on --addr, by POST (the
event as JSON body) or GET (the event as query parameters), on any path.
Each delivery must carry a valid X-Service-Signature-V1 made with one of the
signing secrets, and an X-Service-Signature-Timestamp within 5 minutes of
now. Answers: 200 stored (or already stored: redeliveries are not stored
twice), 401 bad or missing signature, 400 stale timestamp or malformed
event, 413 larger than --max-body (at most 63 MiB: an event is spooled as
one record of at most 64 MiB), 405 another method, 503 not stored (the
service retries).

The signature and timestamp headers are checked before a body is read. The
bodies held at once are bounded by --max-bytes-in-flight (default 64 MiB),
of which one source address may hold --max-bytes-per-source (a quarter): a
delivery that finds no room within 5 s is answered 503 with Retry-After, as
is one whose body arrives slower than 10 s plus a second per 256 KiB.

An event is written to the spool DIR/.sepipe/events and fsynced before the
200, then loaded into sepipe's working database, table events, in small
batches, and published to DIR/warehouse.duckdb at most every
--publish-interval (webhooks.publish_interval, default 10s), and at least
ten times as long as the last publish took (a publish copies the whole
warehouse: 1 to 2 s a gigabyte): a new reader connection sees an
event within about that time. Readers holding
warehouse.duckdb never block it, and 'sepipe sync' can run on the same folder
at the same time. If the process dies, the next 'sepipe listen' replays the
spool. SIGTERM or Ctrl-C stops accepting, loads and publishes what is spooled
and exits 0.

Secrets come from --secret (repeatable), SEPIPE_WEBHOOK_SECRET
(comma-separated) and the config's webhooks.secrets (each "${VAR}"); all
of them are accepted at once, for rotation. Prefer the environment: flags
show in the process list. --addr and --out default to the config's
webhooks.listen and output.dir (127.0.0.1:8090 and ./sepipe-data without
them; the dashboard's default is 127.0.0.1:8787).

The subscription column holds the ?subscription= value of the delivery URL
(add it to the URL you subscribe); the service sends no header naming it.`,
		Example: `  export SEPIPE_WEBHOOK_SECRET=...
  sepipe listen --addr 0.0.0.0:8090 --out ./sepipe-data
  sepipe webhooks create --base-url https://acme.example.com --name lms \
      --url 'https://hooks.example.com/sepipe?subscription=lms' --types COURSE_COMPLETED`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			conf, out, err := f.load(cmd)
			if err != nil {
				return err
			}
			cfg.Out = out
			if !fl.Changed("addr") && conf.Webhooks.Listen != "" {
				cfg.Addr = conf.Webhooks.Listen
			}
			if !fl.Changed("publish-interval") && conf.Webhooks.PublishInterval != 0 {
				cfg.PublishInterval = time.Duration(conf.Webhooks.PublishInterval)
			}
			all := secrets
			all = append(all, strings.Split(os.Getenv("SEPIPE_WEBHOOK_SECRET"), ",")...)
			listed, err := conf.webhookSecrets()
			if err != nil {
				return err
			}
			all = append(all, listed...)
			for _, s := range all {
				if s = strings.TrimSpace(s); s != "" && !slices.Contains(cfg.Secrets, s) {
					cfg.Secrets = append(cfg.Secrets, s)
				}
			}
			if len(cfg.Secrets) == 0 {
				return usagef("no signing secret: export SEPIPE_WEBHOOK_SECRET (the signing secret 'sepipe webhooks create' printed), list it in the config's webhooks.secrets, or pass --secret")
			}
			if cfg.Addr == "" {
				return usagef("--addr is required (HOST:PORT, e.g. %s)", defaultListenAddr)
			}
			if err := webhooks.CheckMaxBody(cfg.MaxBody); err != nil {
				return usagef("--max-body: %w", err)
			}
			if cfg.MaxBytesInFlight == 0 {
				cfg.MaxBytesInFlight = max(webhooks.DefaultBodyBudget, 4*cfg.MaxBody)
			}
			if cfg.MaxBytesPerSource == 0 {
				cfg.MaxBytesPerSource = webhooks.DefaultSourceShare(cfg.MaxBytesInFlight, cfg.MaxBody)
			}
			if err := webhooks.CheckBodyBudget(cfg.MaxBytesInFlight, cfg.MaxBytesPerSource, cfg.MaxBody); err != nil {
				return usagef("--max-bytes-in-flight, --max-bytes-per-source: %w", err)
			}
			if cfg.BatchSize < 1 || cfg.BatchInterval <= 0 || cfg.PublishInterval <= 0 {
				return usagef("--batch-size, --batch-interval and --publish-interval (webhooks.publish_interval) must be positive")
			}
			mc, err := mf.resolve(cmd, conf)
			if err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			m := monitor.New(conf.tenant)
			cfg.Observer, cfg.State = m, &webhooks.ListenState{}
			m.Listen(cfg.State)
			mon := monitor.Handler(m, cfg.State.Ready)
			if mc.Addr == "" {
				cfg.Wrap = monitor.Beside(mon)
			} else {
				stop, err := serveMonitor(cmd.Context(), mc.Addr, mon, log)
				if err != nil {
					return err
				}
				defer stop() //nolint:errcheck // closing
			}
			if cfg.Listener, err = listenOn(cfg.Addr); err != nil {
				return err
			}
			// Listen closes it once it serves; not when it fails before
			// (another listener holds the spool).
			defer cfg.Listener.Close()
			return webhooks.Listen(cmd.Context(), cfg)
		},
	}
	f.add(cmd, defaultOut, "output folder holding warehouse.duckdb (and the spool in .sepipe/events)")
	cmd.Flags().StringVar(&cfg.Addr, "addr", defaultListenAddr, "HOST:PORT to listen on; overrides webhooks.listen")
	cmd.Flags().StringArrayVar(&secrets, "secret", nil, "signing secret (repeatable), besides SEPIPE_WEBHOOK_SECRET and webhooks.secrets")
	cmd.Flags().Int64Var(&cfg.MaxBody, "max-body", webhooks.DefaultMaxDeliveryBody, "largest delivery accepted, bytes (at most 63 MiB)")
	cmd.Flags().Int64Var(&cfg.MaxBytesInFlight, "max-bytes-in-flight", 0, "delivery bytes held at once across all connections (default 64 MiB, or 4 x --max-body when more); more waits, then gets 503")
	cmd.Flags().Int64Var(&cfg.MaxBytesPerSource, "max-bytes-per-source", 0, "delivery bytes one source address may hold at once (default a quarter of --max-bytes-in-flight, at least --max-body); behind a proxy, set it to --max-bytes-in-flight")
	cmd.Flags().IntVar(&cfg.BatchSize, "batch-size", 500, "load as soon as this many events wait")
	cmd.Flags().DurationVar(&cfg.BatchInterval, "batch-interval", time.Second, "load waiting events at least this often")
	cmd.Flags().DurationVar(&cfg.PublishInterval, "publish-interval", 10*time.Second, "publish loaded events to warehouse.duckdb at most this often; overrides webhooks.publish_interval")
	mf.addServe(cmd, "default: on --addr, beside the deliveries")
	return cmd
}
