package load_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/transform"
)

// fakeBatches decodes pages of the fake's userCourseProgress (1000 rows
// each) into record batches, and returns them with their schema and the
// pages' JSON size.
func fakeBatches(tb testing.TB, mem memory.Allocator, pages int) (*arrow.Schema, []arrow.RecordBatch, int64) {
	tb.Helper()
	srv := servicetest.NewServer(servicetest.WithUsers(pages*1000/12 + 1))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithRateLimit(0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	const object = "userCourseProgress"
	fs, err := c.Describe(ctx, object)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := schemas.FromDescribe(object, fs)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := transform.NewDecoder(s, transform.WithAllocator(mem))
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Release()
	var recs []arrow.RecordBatch
	var size int64
	for n := 1; n <= pages; n++ {
		p, err := c.QueryPage(ctx, object, extract.Query{Page: n, ResultsPerPage: 1000})
		if err != nil {
			tb.Fatal(err)
		}
		res, err := d.DecodePage(n, p.Body)
		if err != nil {
			tb.Fatal(err)
		}
		size += int64(len(p.Body))
		recs = append(recs, res.Record)
	}
	return s, recs, size
}

// TestParquetWriterBoundsFiles: rows are split across part files and row
// groups as configured, and nothing leaks.
func TestParquetWriterBoundsFiles(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, recs, _ := fakeBatches(t, mem, 5)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	dir := t.TempDir()
	w, err := load.NewParquetWriter(dir, "userCourseProgress", s, load.WithParquetAllocator(mem),
		load.WithRowsPerFile(2000), load.WithRowGroupRows(1500))
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		rows += r.NumRows()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != rows {
		t.Errorf("rows = %d, want %d", w.Rows(), rows)
	}
	if got := len(w.Files()); got != 3 {
		t.Errorf("files = %d, want 3 (2000 rows each)", got)
	}
	for _, f := range w.Files() {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkParquetWriter measures writing decoded pages of the fake's
// largest object to Parquet. Bytes are the pages' JSON bytes, so MB/s
// compares with BenchmarkDecodePage and the end-to-end rate.
func BenchmarkParquetWriter(b *testing.B) {
	s, recs, size := fakeBatches(b, memory.DefaultAllocator, 200)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	dir := b.TempDir()
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := filepath.Join(dir, fmt.Sprint(i))
		i++
		w, err := load.NewParquetWriter(d, "userCourseProgress", s)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(d)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
