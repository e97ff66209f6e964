package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sepipe/sepipe/internal/demo"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// NightsConfig is a tenant synced night after night: the demo's fake
// tenant, its clock moving a day between runs (internal/demo), so that
// what a warehouse holds after many nights, and what each night costs,
// can be measured (issue 43).
type NightsConfig struct {
	Nights int   // runs, one a snapshot day (default 30)
	Users  int   // the fake tenant's users (default 10,000)
	Seed   int64 // of the fake tenant (default 1)
	// Dir is the output folder (default: a temporary folder, removed at
	// the end).
	Dir    string
	Logger *slog.Logger
	// Night, if set, is called with each night's figures as they come.
	Night func(Night)
}

// Night is what one night's run cost and left.
type Night struct {
	Night        int    // 1 for the first
	SnapshotDate string // its snapshot day
	// Run is the run's time (its steps: fetch, load, publish, Iceberg),
	// Publish the publish step's alone (the lake's partitions and the
	// warehouse copied and renamed).
	Run, Publish time.Duration
	// WarehouseBytes is the published warehouse's size after the run,
	// StateBytes the working database's.
	WarehouseBytes, StateBytes int64
	// HistoryRows is the rows every <stream>_history answers, Rows those
	// of the streams' own tables: what the warehouse holds of every day,
	// and of the last; Versions the rows of the <stream>_versions tables
	// that hold the histories (0 before issue 43).
	HistoryRows, Rows, Versions int64
}

// Nights runs cfg.Nights nightly syncs of the demo's tenant and returns
// each night's figures.
func Nights(ctx context.Context, cfg NightsConfig) ([]Night, error) {
	if cfg.Nights == 0 {
		cfg.Nights = 30
	}
	if cfg.Users == 0 {
		cfg.Users = 10_000
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Nights < 1 || cfg.Users < 1 {
		return nil, fmt.Errorf("bench: nights and users must be at least 1, got %d and %d", cfg.Nights, cfg.Users)
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "sepipe-bench-nights-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	lake := load.Lake{Root: dir}
	var nights []Night
	var failed error
	_, err := demo.Run(ctx, demo.Config{Out: dir, Users: cfg.Users, Seed: cfg.Seed, Days: cfg.Nights, Logger: cfg.Logger,
		Ran: func(r *pipeline.Result) {
			if failed != nil {
				return
			}
			n := Night{Night: len(nights) + 1, SnapshotDate: r.SnapshotDate, Publish: r.Steps[pipeline.StepPublish]}
			for _, d := range r.Steps {
				n.Run += d
			}
			n.WarehouseBytes, n.StateBytes = fileSize(lake.WarehousePath()), fileSize(lake.StatePath())
			if n.HistoryRows, n.Rows, n.Versions, failed = tableRows(ctx, lake.WarehousePath(), r); failed != nil {
				return
			}
			nights = append(nights, n)
			if cfg.Night != nil {
				cfg.Night(n)
			}
		}})
	if err == nil {
		err = failed
	}
	return nights, err
}

// tableRows counts the rows of the streams' histories, of their own
// tables and of their versions in the published warehouse.
func tableRows(ctx context.Context, path string, r *pipeline.Result) (history, rows, versions int64, err error) {
	wh, err := load.OpenReadOnly(ctx, path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer wh.Close()
	for _, o := range r.Objects {
		for _, t := range []struct {
			name string
			sum  *int64
		}{{o.Object, &rows}, {load.HistoryTable(o.Object), &history}, {load.VersionsTable(o.Object), &versions}} {
			var n int64
			if err := wh.DB().QueryRowContext(ctx, "SELECT count(*) FROM "+load.Ident(t.name)).Scan(&n); err != nil {
				return 0, 0, 0, fmt.Errorf("bench: count %s: %w", t.name, err)
			}
			*t.sum += n
		}
	}
	return history, rows, versions, nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
