package load_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// TestLoadNeverGuessesFromPaths: sepipe's own reads of its staged files
// take no column from the path. A field called snapshot_date, and one named
// like a key=value folder of the output path, keep the values the service
// sent.
func TestLoadNeverGuessesFromPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "region=emea", "out")
	lake := load.Lake{Root: root}
	if err := lake.CheckWritable(); err != nil {
		t.Fatal(err)
	}
	fields := []service.Field{{ID: "id", Type: "int"}, {ID: "snapshot_date", Type: "string"}, {ID: "region", Type: "string"}}
	s, err := schemas.FromDescribe("odd", fields)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	res, err := d.DecodePage(1, []byte(`{"results":[{"id":1,"snapshot_date":"the service's own","region":"apac"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := load.NewParquetWriter(lake.StagingDir("r1", "odd", "2026-11-23"), "odd", s, load.WithParquetAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(res.Record); err != nil {
		t.Fatal(err)
	}
	res.Record.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wh, err := load.OpenWarehouse(ctx, lake.WarehousePath())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	tb := load.Table{Object: "odd", Schema: s, Files: w.Files(), Rows: w.Rows()}
	var fresh int64
	tb.NewRows = &fresh
	if err := wh.Commit(ctx, load.Run{ID: "r1", Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-23"}, []load.Table{tb}); err != nil {
		t.Fatal(err)
	}
	var sd, region string
	if err := wh.DB().QueryRow(`SELECT snapshot_date, region FROM odd`).Scan(&sd, &region); err != nil {
		t.Fatal(err)
	}
	if sd != "the service's own" || region != "apac" {
		t.Fatalf("snapshot_date %q, region %q: DuckDB took them from the path", sd, region)
	}
	if fresh != 1 {
		t.Fatalf("new rows %d, want 1", fresh)
	}
}

// TestHugeTextGetsNoStatistics: a batch holding a text value of a
// megabyte or more is a part file of its own, whose huge column is
// written without statistics, dictionary or compression (they would copy
// the value), as the Iceberg lake's writer writes it (lakefile); the
// batches around it share files as usual; the rows all read back.
func TestHugeTextGetsNoStatistics(t *testing.T) {
	t.Parallel()
	fields := []service.Field{{ID: "id", Type: "int"}, {ID: "blob", Type: "string"}}
	s, err := schemas.FromDescribe("big", fields)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	w, err := load.NewParquetWriter(t.TempDir(), "big", s)
	if err != nil {
		t.Fatal(err)
	}
	for i, blob := range []string{"small", strings.Repeat("x", 2<<20), strings.Repeat("y", 3<<20)} {
		res, err := d.DecodePage(i+1, []byte(fmt.Sprintf(`{"results":[{"id":%d,"blob":"%s"}]}`, i, blob)))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(res.Record); err != nil {
			t.Fatal(err)
		}
		res.Record.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.Files()) != 3 || w.Rows() != 3 {
		t.Fatalf("files %v, rows %d: want the small batch's file and one for each huge batch", w.Files(), w.Rows())
	}
	for i, p := range w.Files() {
		rdr, err := file.OpenParquetFile(p, false)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := rdr.MetaData().RowGroup(0).ColumnChunk(1)
		if err != nil {
			t.Fatal(err)
		}
		stats, _ := cc.StatsSet()
		if huge := i > 0; stats == huge || cc.HasDictionaryPage() == huge || (cc.Compression() == compress.Codecs.Uncompressed) != huge {
			t.Errorf("file %d (huge %v): statistics %v, dictionary %v, compression %v", i, huge, stats, cc.HasDictionaryPage(), cc.Compression())
		}
		rdr.Close()
	}
}
