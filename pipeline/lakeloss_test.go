package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// TestLostIcebergDataFileFailsOnlyItsStream: one data file of an Iceberg
// merge table is lost (object storage loses objects to lifecycle rules and
// mistakes). Issue 40: the next sync exited 3 with "the next run finishes
// it" and its summary showed the stream ok; every later sync then failed
// whole at "settle the Iceberg commit", before anything else, so no stream
// of the tenant committed again, --full-refresh of the stream included,
// and nothing said how out. Now:
//
//   - the sync that meets the loss commits the warehouse, says the
//     stream's Iceberg commit failed (not ok), naming the lost file and the
//     way out;
//   - the next sync fails that stream alone (named, with the way out) and
//     commits the others, to the warehouse and the lake;
//   - a --full-refresh of the stream rebuilds its Iceberg table from the
//     run's rows exactly once, superseding the commits that could not be
//     made; the lake then equals the warehouse, and later syncs run clean.
//
// On a local warehouse (file://) and on a real S3 server (versitygw).
func TestLostIcebergDataFileFailsOnlyItsStream(t *testing.T) {
	run := func(t *testing.T, lc *lakehouse.Config, local func(string) string) {
		ctx := context.Background()
		out := t.TempDir()
		syncDays(t, out, lc, 1)
		lh, err := lakehouse.Open(ctx, *lc)
		if err != nil {
			t.Fatal(err)
		}
		files := dataFiles(t, lh, "userCourseProgress", local)
		lh.Close()
		if len(files) == 0 {
			t.Fatal("no data file in userCourseProgress's table")
		}
		for _, f := range files {
			if err := os.Rename(f, filepath.Join(t.TempDir(), filepath.Base(f))); err != nil {
				t.Fatal(err)
			}
		}
		day := func(d int) pipeline.Config {
			return pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day1.Add(time.Duration(d) * 24 * time.Hour))}
		}
		heal := "--full-refresh userCourseProgress"
		lost := filepath.Base(files[0])

		// Day 2: the warehouse commits; the stream's Iceberg commit cannot.
		_, c := dayFake(t, 1)
		res, err := pipeline.Sync(ctx, c, day(1))
		if err == nil || !errors.Is(err, lakehouse.ErrDataFileLost) || !strings.Contains(err.Error(), heal) || strings.Contains(err.Error(), "next run finishes") {
			t.Fatalf("day 2: %v\nwant the lost data file named, with %q, not 'the next run finishes it'", err, heal)
		}
		if res == nil {
			t.Fatal("day 2: no result for a run that committed")
		}
		for _, o := range res.Objects {
			switch {
			case o.Object == "userCourseProgress" && (o.LakeErr == nil || !errors.Is(o.LakeErr, lakehouse.ErrDataFileLost)):
				t.Errorf("day 2: userCourseProgress's result says its lake commit is %v, want the loss", o.LakeErr)
			case o.Object != "userCourseProgress" && (o.Err != nil || o.LakeErr != nil):
				t.Errorf("day 2: stream %s: %v / %v", o.Object, o.Err, o.LakeErr)
			}
		}
		if !strings.Contains(err.Error(), lost) {
			t.Errorf("day 2: the error does not name the lost file %s: %v", lost, err)
		}

		// Day 3: only that stream fails; the others commit everywhere.
		_, c = dayFake(t, 2)
		res, err = pipeline.Sync(ctx, c, day(2))
		var re *pipeline.RunError
		if !errors.As(err, &re) || !re.Partial || len(re.Failed) != 1 || re.Failed[0].Object != "userCourseProgress" ||
			!errors.Is(err, lakehouse.ErrDataFileLost) || !strings.Contains(err.Error(), heal) {
			t.Fatalf("day 3: %v\nwant a partial run, userCourseProgress alone failed, the loss named with %q", err, heal)
		}
		if re.Failed[0].Mendable() {
			t.Error("day 3: a lost file is mendable by a retry, it says; a person must rebuild the table")
		}
		committed := 0
		for _, o := range res.Objects {
			if o.Object != "userCourseProgress" && o.Err == nil && o.LakeErr == nil {
				committed++
			}
		}
		if committed < 4 {
			t.Errorf("day 3: %d streams committed beside the failed one: %+v", committed, res.Objects)
		}
		db := warehousetest.Open(t, out)
		if d := warehousetest.Scalar[string](t, db, `SELECT max(`+load.ColSnapshotDate+`)::VARCHAR FROM course`); d != "2026-11-25" {
			t.Errorf("day 3: course's last day %s, want 2026-11-25", d)
		}

		// The way out: a full refresh of the stream, then a plain night.
		_, c = dayFake(t, 3)
		cfg := day(3)
		cfg.FullRefresh = []string{"userCourseProgress"}
		if _, err := pipeline.Sync(ctx, c, cfg); err != nil {
			t.Fatalf("day 4, %s: %v", heal, err)
		}
		sameLakeAsWarehouse(t, out, lc, lakeModes(), local)
		_, c = dayFake(t, 4)
		if _, err := pipeline.Sync(ctx, c, day(4)); err != nil {
			t.Fatalf("day 5: %v", err)
		}
		sameLakeAsWarehouse(t, out, lc, lakeModes(), local)
		db = warehousetest.Open(t, out)
		if got := warehousetest.Scalar[string](t, db, `SELECT string_agg(status || ':' || coalesce(reason, ''), ';') FROM _sepipe_lake_intents WHERE status <> 'committed'`); !strings.Contains(got, "discarded:") || !strings.Contains(got, "superseded") {
			t.Errorf("the intents that could not be committed: %q, want them discarded as superseded by the rebuild", got)
		}
	}
	t.Run("file", func(t *testing.T) { run(t, fileLake(t.TempDir()), localFile) })
	t.Run("s3", func(t *testing.T) {
		lc, local, _ := s3Lake(t)
		run(t, lc, local)
	})
}
