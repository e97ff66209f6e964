package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// tree returns every file under dir with a hash of its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		io.Copy(h, f)
		out[p] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	return out
}

func TestPlanWritesNothingAndCountsRequests(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(30))
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken())
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "out")
	streams := map[string]pipeline.StreamConfig{"userCourseProgress": ucpMerge}
	cfg := pipeline.PlanConfig{Config: pipeline.Config{Out: out, Only: reportObjects, Streams: streams, Now: clock(day1)}, PageSize: 400} // the client helper reads 400 rows a page

	// Before the first sync: no warehouse, and the plan must not make one.
	p, err := pipeline.Plan(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("plan created the output folder: %v", err)
	}
	if p.HasWarehouse || len(p.Objects) != 5 {
		t.Fatalf("plan: has warehouse %v, objects %d", p.HasWarehouse, len(p.Objects))
	}
	want := 1
	for _, o := range p.Objects {
		if o.Err != nil || !o.NewTable || o.Replaces || o.Rows <= 0 {
			t.Errorf("%s: %+v", o.Object, o)
		}
		want += o.Requests
	}
	if p.Requests != want {
		t.Errorf("requests %d, sum %d", p.Requests, want)
	}

	// The estimate is what the sync then does (no retries on the fake).
	res, err := pipeline.Sync(ctx, c, cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range res.Objects {
		po := p.Objects[i]
		if po.Object != o.Object || po.Rows != o.Rows || po.Pages != o.Pages {
			t.Errorf("%s: plan rows %d pages %d, sync rows %d pages %d", o.Object, po.Rows, po.Pages, o.Rows, o.Pages)
		}
	}

	// After it: read-only, nothing changes; the same day's partitions
	// would be replaced; the incremental stream reads from its watermark.
	before := tree(t, out)
	srv.Service.Advance(24 * time.Hour)
	cfg.Now = clock(day1.Add(24 * time.Hour))
	p, err = pipeline.Plan(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasWarehouse {
		t.Error("plan did not see the warehouse")
	}
	for _, o := range p.Objects {
		if o.NewTable || o.Err != nil {
			t.Errorf("%s: %+v", o.Object, o)
		}
		if o.Object == "userCourseProgress" {
			if o.Since == "" || !o.Incremental || o.Mode != load.Merge {
				t.Errorf("incremental stream: %+v", o)
			}
			if o.Rows >= res.Objects[len(res.Objects)-1].Rows {
				t.Errorf("incremental plan reads %d rows, the full read had %d", o.Rows, res.Objects[len(res.Objects)-1].Rows)
			}
		}
	}
	cfg.Now = clock(day1)
	if p, err = pipeline.Plan(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Objects {
		if !o.Replaces {
			t.Errorf("%s: same-day partition not reported as replaced", o.Object)
		}
	}
	after := tree(t, out)
	if len(before) != len(after) {
		t.Errorf("plan changed the folder: %d files before, %d after", len(before), len(after))
	}
	for f, h := range before {
		if after[f] != h {
			t.Errorf("plan changed %s", f)
		}
	}

	// A bad filter is the object's failure, found before any data moves.
	cfg.Streams = map[string]pipeline.StreamConfig{"user": {Filters: []extract.Filter{extract.Eq("regin", "EMEA")}}}
	if p, err = pipeline.Plan(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Objects {
		if (o.Object == "user") != (o.Err != nil) {
			t.Errorf("%s: err %v", o.Object, o.Err)
		}
	}
}

// TestPlanPartitionOfSanitisedStream: for a stream whose id is not its
// table name (User beside user, x[1], q?y=1: the sync names them User_2,
// x_1__<hash>, q_y_1_<hash>), the plan must name the partition the sync
// writes, before the first sync (no warehouse: the names are new) and
// after it, and see that a same-day rerun replaces it.
func TestPlanPartitionOfSanitisedStream(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(20), servicetest.WithHostile())
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken())
	ctx := context.Background()
	out := t.TempDir()
	only := []string{"user", "User", "x[1]", "q?y=1"}
	before, err := pipeline.Plan(ctx, c, pipeline.PlanConfig{Config: pipeline.Config{Out: out, Only: only, Now: clock(day1)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Only: only, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]string{} // service id -> partition folder the sync wrote
	for _, o := range res.Objects {
		written[o.ServiceID] = filepath.Dir(o.Files[0])
	}
	for _, o := range before.Objects {
		if o.Partition != written[o.Object] || o.Replaces {
			t.Errorf("plan of %q before the sync: partition %q (replaces %v); the sync wrote %q", o.Object, o.Partition, o.Replaces, written[o.Object])
		}
	}
	p, err := pipeline.Plan(ctx, c, pipeline.PlanConfig{Config: pipeline.Config{Out: out, Only: only, Now: clock(day1)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Objects {
		if o.Partition != written[o.Object] || !o.Replaces {
			t.Errorf("plan of %q: partition %q (replaces %v); the sync wrote %q", o.Object, o.Partition, o.Replaces, written[o.Object])
		}
	}
	if len(p.Objects) != len(only) || len(before.Objects) != len(only) {
		t.Errorf("plans of %d and %d objects, want %d", len(before.Objects), len(p.Objects), len(only))
	}
}
