package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
)

// DemoConfig sizes the demo.
type DemoConfig struct {
	Out    string
	Users  int
	Seed   int64
	Days   int // snapshot days of history to build, ending today (default 3)
	Logger *slog.Logger
	// Progress, if set, is passed to every run.
	Progress Progress
	// Now is today (default time.Now).
	Now func() time.Time
}

// DemoResult is what the demo did.
type DemoResult struct {
	URL  string   // the fake tenant's base URL (closed when Demo returns)
	Runs []Result // one per snapshot day, oldest first
}

// Demo starts the fake service on loopback and syncs its tenant into
// cfg.Out as a real sync would, one run per day for cfg.Days days (the
// tenant's clock advancing a day between runs), so the lake holds a short
// history. Every report object and every collection is synced.
func Demo(ctx context.Context, cfg DemoConfig) (*DemoResult, error) {
	if cfg.Users < 1 {
		return nil, fmt.Errorf("demo: users must be at least 1, got %d", cfg.Users)
	}
	if cfg.Days <= 0 {
		cfg.Days = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	today := cfg.Now().UTC()
	start := today.Add(-time.Duration(cfg.Days-1) * 24 * time.Hour)
	srv := servicetest.NewServer(servicetest.WithUsers(cfg.Users), servicetest.WithSeed(cfg.Seed),
		servicetest.WithNow(servicetest.DefaultNow.Add(start.Sub(today))))
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
	client, err := extract.New(srv.URL, opts...)
	if err != nil {
		return nil, err
	}
	res := &DemoResult{URL: srv.URL}
	for d := 0; d < cfg.Days; d++ {
		if d > 0 {
			srv.Service.Advance(24 * time.Hour)
			if err := srv.Service.WaitDeliveries(ctx); err != nil {
				return nil, err
			}
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		r, err := Sync(ctx, client, Config{Out: cfg.Out, Logger: cfg.Logger, Progress: cfg.Progress,
			Collections: Collections, Now: func() time.Time { return day }})
		if err != nil {
			return nil, fmt.Errorf("demo day %s: %w", day.Format("2006-01-02"), err)
		}
		res.Runs = append(res.Runs, *r)
	}
	return res, nil
}
