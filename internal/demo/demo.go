package demo

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/webhooks"
)

// Config sizes the demo.
type Config struct {
	Out   string
	Users int
	Seed  int64
	Days  int // snapshot days of history to build, ending today (0: the default 3)
	// ShapeVariants makes some of the fake's assets send a field as
	// another JSON type (servicetest.WithShapeVariants).
	ShapeVariants bool
	Logger        *slog.Logger
	// Progress, if set, is passed to every run.
	Progress pipeline.Progress
	// Now is today (default time.Now).
	Now func() time.Time
	// Requests, if set, is told of every request the demo's client sends
	// (sepipe's metrics).
	Requests extract.RequestObserver
	// Ran, if set, is called after each day's run with its result.
	Ran func(*pipeline.Result)
}

// Result is what the demo did.
type Result struct {
	URL  string            // the fake tenant's base URL (closed when Demo returns)
	Runs []pipeline.Result // one per snapshot day, oldest first
}

// Run starts the fake service on loopback and syncs its tenant into
// cfg.Out as a real sync would, one run per day for cfg.Days days (the
// tenant's clock advancing a day between runs), so the lake holds a short
// history. Every report object and every collection is synced.
//
// The demo also shows the event side: it subscribes a receiver (webhooks.Listen, on
// a loopback port) to COURSE_COMPLETED and shared-space-created, and while
// the tenant's day passes it shares a few assets; the fake delivers signed
// events, the receiver lands them in the events table, and the next sync
// brings in the subscription and its delivery log. The receiver runs only
// while the day passes, never during a sync, so the two never write the
// warehouse at once.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Users < 1 {
		return nil, fmt.Errorf("demo: users must be at least 1, got %d", cfg.Users)
	}
	if cfg.Days < 0 {
		return nil, fmt.Errorf("demo: days must be at least 1 (or 0 for the default 3), got %d", cfg.Days)
	}
	if cfg.Days == 0 {
		cfg.Days = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	today := cfg.Now().UTC()
	start := today.Add(-time.Duration(cfg.Days-1) * 24 * time.Hour)
	sopts := []servicetest.Option{servicetest.WithUsers(cfg.Users), servicetest.WithSeed(cfg.Seed),
		servicetest.WithNow(start.Truncate(time.Second))} // the tenant's clock runs with the snapshot days
	if cfg.ShapeVariants {
		sopts = append(sopts, servicetest.WithShapeVariants())
	}
	srv := servicetest.NewServer(sopts...)
	defer srv.Close()
	opts := []extract.Option{
		extract.WithAccessToken(srv.Service.AccessToken()),
		extract.WithAPIToken(srv.Service.APIToken()),
		extract.WithHTTPClient(srv.Client()),
		extract.WithRateLimit(0, 0), // loopback: no budget needed
	}
	if cfg.Logger != nil {
		opts = append(opts, extract.WithLogger(cfg.Logger))
	}
	if cfg.Requests != nil {
		opts = append(opts, extract.WithRequestObserver(cfg.Requests))
	}
	client, err := extract.New(srv.URL, opts...)
	if err != nil {
		return nil, err
	}
	res := &Result{URL: srv.URL}
	act, err := newActivity(ctx, client, cfg)
	if err != nil {
		return nil, err
	}
	for d := 0; d < cfg.Days; d++ {
		if d > 0 {
			if err := act.passDay(ctx, srv.Service); err != nil {
				return nil, fmt.Errorf("demo: webhook activity: %w", err)
			}
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		// NEW rows counted as sepipe sync counts them: the demo's summary
		// shows what each day brought.
		r, err := pipeline.Sync(ctx, client, pipeline.Config{Out: cfg.Out, Logger: cfg.Logger, Progress: cfg.Progress,
			Now: func() time.Time { return day }, CountNewRows: true})
		if err != nil {
			return nil, fmt.Errorf("demo day %s: %w", day.Format("2006-01-02"), err)
		}
		res.Runs = append(res.Runs, *r)
		if cfg.Ran != nil {
			cfg.Ran(r)
		}
	}
	return res, nil
}

// activity is the demo's webhook side: a subscription to a local
// receiver, and shares to produce events.
type activity struct {
	client *extract.Client
	cfg    Config
	addr   string
	secret string
	assets []string
	shares int
}

func newActivity(ctx context.Context, c *extract.Client, cfg Config) (*activity, error) {
	// Reserve a loopback port for the receiver; each day's Listen reuses it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	sub, err := c.CreateSubscription(ctx, extract.SubscriptionRequest{
		Name: "sepipe demo receiver", URL: "http://" + addr + "/events?subscription=demo", Method: "POST",
		Types: []string{servicetest.EventCourseCompleted, servicetest.EventSharedSpaceCreated},
	})
	if err != nil {
		return nil, fmt.Errorf("demo: subscribe the receiver: %w", err)
	}
	assets, _, _, err := pipeline.ListIDs(ctx, c, extract.V3List("assets"), 50)
	if err != nil {
		return nil, fmt.Errorf("demo: list assets: %w", err)
	}
	return &activity{client: c, cfg: cfg, addr: addr, secret: sub.SignatureKey.Reveal(), assets: assets}, nil
}

// passDay runs the receiver while the tenant's clock moves a day and a few
// assets are shared, until every delivery is done and every event landed.
func (a *activity) passDay(ctx context.Context, svc *servicetest.Service) error {
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- webhooks.Listen(lctx, webhooks.ListenConfig{Addr: a.addr, Out: a.cfg.Out, Secrets: []string{a.secret}, Logger: a.cfg.Logger,
			Ready: func(net.Addr) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		return err
	}
	for i := 0; i < 3 && len(a.assets) > 0; i++ {
		a.shares++
		n := 1 + a.shares%4
		ids := make([]string, 0, n)
		for j := 0; j < n; j++ {
			ids = append(ids, a.assets[(a.shares*7+j)%len(a.assets)])
		}
		if _, err := a.client.CreateShare(ctx, extract.ShareRequest{Title: fmt.Sprintf("Demo share %d", a.shares), Assets: ids, Origin: "sepipe-demo"}); err != nil {
			return err
		}
	}
	svc.Advance(24 * time.Hour)
	if err := svc.WaitDeliveries(ctx); err != nil {
		return err
	}
	stop()
	return <-done
}
