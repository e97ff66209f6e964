package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/bench"
)

// TestBenchSmoke runs every phase of Bench once on a small object, in this
// process: each phase sees every row, and the figures are filled in.
func TestBenchSmoke(t *testing.T) {
	res, err := bench.Run(context.Background(), bench.Config{Rows: 3000, Dir: t.TempDir(), PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows < 2000 || res.Pages < 4 || res.JSONBytes == 0 {
		t.Fatalf("object: %d rows, %d pages, %d bytes", res.Rows, res.Pages, res.JSONBytes)
	}
	for _, p := range []bench.PhaseResult{res.Sync, res.Fetch, res.ReadJSON} {
		if p.Rows != res.Rows || p.Duration <= 0 || p.PeakRSS <= 0 {
			t.Errorf("phase %s: %+v (object has %d rows)", p.Phase, p, res.Rows)
		}
	}
	if len(res.Runs) != 3 || res.SyncOverFetch() <= 0 || res.SyncOverReadJSON() <= 0 {
		t.Errorf("runs %d, ratios %.2f %.2f", len(res.Runs), res.SyncOverFetch(), res.SyncOverReadJSON())
	}
	if _, err := bench.Run(context.Background(), bench.Config{Rows: 10, Phases: []string{"nope"}}); err == nil {
		t.Error("an unknown phase must be refused")
	}
	if _, err := bench.Run(context.Background(), bench.Config{Rows: 10, Mode: "upsert"}); err == nil {
		t.Error("an unknown mode must be refused")
	}
}

// TestBenchMergeResync: a merge sync timed over a warehouse that already
// holds every row still sees every row, once.
func TestBenchMergeResync(t *testing.T) {
	res, err := bench.Run(context.Background(), bench.Config{Rows: 3000, Dir: t.TempDir(), PageSize: 500,
		Phases: []string{bench.PhaseSync}, Mode: "merge", Resync: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sync.Rows != res.Rows || res.Mode != "merge" || !res.Resync || len(res.Runs) != 1 {
		t.Errorf("merge resync: %+v (object has %d rows)", res.Sync, res.Rows)
	}
}

// A rate-limited run shorter than benchSteadyWindows windows is reported
// with the rows that would make it long enough; a long one is not.
func TestBenchRateLimitedHintsAtShortRuns(t *testing.T) {
	for _, c := range []struct {
		ideal time.Duration
		hint  string
	}{
		{5 * time.Second, "--rows 400000 gives about 20"},
		{20 * time.Second, ""},
	} {
		sync := bench.PhaseResult{Phase: bench.PhaseSync, Rows: 100_000, Requests: 100, Ideal: c.ideal, Duration: c.ideal + time.Second}
		var out strings.Builder
		printRateLimited(&out, &bench.Result{Rows: 100_000, RateLimit: 20, RateWindow: time.Second, Sync: sync, Runs: []bench.PhaseResult{sync}})
		if got := strings.Contains(out.String(), "--rows"); got != (c.hint != "") || !strings.Contains(out.String(), c.hint) {
			t.Errorf("ideal %s: want hint %q in:\n%s", c.ideal, c.hint, out.String())
		}
	}
}

// TestBenchNights: three nights of the demo's tenant, each reported as it
// ends: consecutive snapshot days, the run and its publish timed, the
// warehouse's size, and the history growing by a day's rows each night
// (every stream's table holds one day, its history every day so far).
// The command prints the same figures, a line a night, and the growth.
func TestBenchNights(t *testing.T) {
	var seen []bench.Night
	ns, err := bench.Nights(context.Background(), bench.NightsConfig{Nights: 3, Users: 30, Dir: t.TempDir(),
		Night: func(n bench.Night) { seen = append(seen, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 3 || len(seen) != 3 {
		t.Fatalf("%d nights, %d reported, want 3", len(ns), len(seen))
	}
	var history int64
	for i, n := range ns {
		day, err := time.Parse(time.DateOnly, n.SnapshotDate)
		if err != nil || n.Night != i+1 || n.Run <= 0 || n.Publish <= 0 || n.Publish > n.Run || n.WarehouseBytes <= 0 || n.StateBytes <= 0 {
			t.Errorf("night %d: %+v (%v)", i+1, n, err)
		}
		if i > 0 && !day.Equal(mustDay(t, ns[i-1].SnapshotDate).AddDate(0, 0, 1)) {
			t.Errorf("night %d on %s after %s", n.Night, n.SnapshotDate, ns[i-1].SnapshotDate)
		}
		history += n.Rows // a night's tables are what its history gains (the demo's streams are all replace)
		if n.HistoryRows != history {
			t.Errorf("night %d: %d history rows, want the %d rows of the nights' tables so far", n.Night, n.HistoryRows, history)
		}
		if n.Versions < n.Rows || n.Versions > history {
			t.Errorf("night %d: %d versions, want at least the %d rows of the night's tables and at most the history's %d", n.Night, n.Versions, n.Rows, history)
		}
	}
	code, out, errOut := runCLI(t, "bench", "--nights", "2", "--users", "20", "--log-level", "warn")
	if code != exitOK || strings.Count(out, "\n    ") < 2 || !strings.Contains(out, "WAREHOUSE MB") {
		t.Errorf("bench --nights: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "bench", "--nights", "0"); code != exitUsage || !strings.Contains(errOut, "--nights") {
		t.Errorf("bench --nights 0: exit %d %s", code, errOut)
	}
}

func mustDay(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
