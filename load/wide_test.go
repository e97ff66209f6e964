package load_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sepipe/sepipe/internal/longtest"
	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/load"
)

// wideSchema is an id and cols-1 text columns.
func wideSchema(cols int) *arrow.Schema {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for c := 1; c < cols; c++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("text%03d", c), Type: arrow.BinaryTypes.String, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// writeColumns writes n rows of s (wideSchema) with a ParquetWriter into
// dir, in batches of 1,000 as a sync decodes pages; each text value is
// width characters of base 36, different in every row and column (a batch
// of widths: the batches take them in turn).
func writeColumns(t *testing.T, dir string, s *arrow.Schema, n int, widths ...int) *load.ParquetWriter {
	t.Helper()
	w, err := load.NewParquetWriter(dir, "wide", s)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	var buf []byte
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		width := widths[i/1000%len(widths)]
		for c := 1; c < s.NumFields(); c++ {
			buf = buf[:0]
			for x := uint64(i)*1_000_003 + uint64(c)*7_919; len(buf) < width; x = x*6_364_136_223_846_793_005 + 1_442_695_040_888_963_407 {
				buf = strconv.AppendUint(buf, x>>20, 36)
			}
			b.Field(c).(*array.StringBuilder).BinaryBuilder.Append(buf[:width])
		}
		if (i+1)%1000 == 0 || i == n-1 {
			rec := b.NewRecordBatch()
			err := w.Write(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestParquetWriterBoundsRowGroupBytes: row groups of wide rows hold at
// most lakefile.RowGroupBytes of them, in lengths that still divide
// DuckDB's row group (every one of a file but its last, which holds no
// more); narrow rows keep row groups of 61,440. Batches of wide rows
// between narrow ones start a row group where the bytes would pass the
// bound, not only where the length would. A part file ends at
// load.DefaultFileBytes of rows (checked before each batch of 1,000) or
// at load.DefaultRowGroupRows rows, whichever comes first.
func TestParquetWriterBoundsRowGroupBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cols   int
		widths []int
		rows   int
		want   int64 // the row groups' length; 0: the bytes only
	}{
		// A row's bytes: 8 for the id, 4 and the text's for each text.
		{"narrow", 4, []int{8}, 130_000, load.DefaultRowGroupRows / 2}, // 44 bytes a row
		{"wide", 40, []int{60}, 40_000, 960},                           // 2,504 bytes a row: files of 27,000 and 13,000
		{"wider", 100, []int{200}, 3_000, 120},                         // 20,204 bytes a row
		{"widest", 4, []int{700 << 10}, 8, 1},                          // 2.1 MiB a row
		{"mixed", 40, []int{20, 20, 20, 6, 6, 6, 6, 6}, 80_000, 0},     // 944 and 398 bytes a row: 3,840 and 7,680 rows
	} {
		t.Run(c.name, func(t *testing.T) {
			w := writeColumns(t, t.TempDir(), wideSchema(c.cols), c.rows, c.widths...)
			var total int64
			rowBytes := func(row int64) int64 { // as written: 8 for the id, 4 and the text's for each text
				return 8 + int64(c.cols-1)*int64(4+c.widths[row/1000%int64(len(c.widths))])
			}
			for k, path := range w.Files() {
				f, err := file.OpenParquetFile(path, false)
				if err != nil {
					t.Fatal(err)
				}
				md := f.MetaData()
				var fileBytes, lastBatch int64
				for r := total; r < total+md.NumRows; r++ {
					fileBytes += rowBytes(r)
					if r%1000 == 0 {
						lastBatch = 0
					}
					lastBatch += rowBytes(r)
				}
				if fileBytes-lastBatch >= load.DefaultFileBytes {
					t.Errorf("%s: %d rows of %d bytes, a batch after %d bytes (the bound is %d)", path, md.NumRows, fileBytes, fileBytes-lastBatch, load.DefaultFileBytes)
				}
				if k < len(w.Files())-1 && fileBytes < load.DefaultFileBytes && md.NumRows < load.DefaultRowGroupRows {
					t.Errorf("%s: %d rows of %d bytes, and the next file started", path, md.NumRows, fileBytes)
				}
				for i := 0; i < md.NumRowGroups(); i++ {
					n := md.RowGroup(i).NumRows()
					var bytes int64
					for r := total; r < total+n; r++ {
						bytes += rowBytes(r)
					}
					total += n
					last := i == md.NumRowGroups()-1
					if c.want > 0 && (n > c.want || !last && n != c.want) {
						t.Errorf("%s: row group %d holds %d rows, want %d", path, i, n, c.want)
					}
					if bytes > lakefile.RowGroupBytes && n > 1 {
						t.Errorf("%s: row group %d holds %d rows of %d bytes, want at most %d bytes", path, i, n, bytes, lakefile.RowGroupBytes)
					}
				}
				f.Close()
			}
			if total != int64(c.rows) {
				t.Errorf("the files hold %d rows, want %d", total, c.rows)
			}
		})
	}
}

// TestWideTableLoadsUnderTheLimit: two streams of 60 columns (replace
// and merge), two days of 100,000 rows, load in one run each day under
// the default 64 MB on two threads, where DuckDB's insert needs more than
// that (it failed: "could not allocate block"), and so does the commit;
// and a stream loads while the run fetches, under the early load's
// 16 MiB on one thread; and six such streams commit in one run. Each
// load takes the threads and memory its columns need, and gives them
// back.
func TestWideTableLoadsUnderTheLimit(t *testing.T) {
	longtest.Skip(t, "loads 200,000 rows of 60 columns")
	const cols, rows = 60, 100_000
	ctx := context.Background()
	s := wideSchema(cols)
	stage := func(lake load.Lake, object, run, day string) load.Table {
		w := writeColumns(t, lake.StagingDir(run, object, day), s, rows, 12)
		return load.Table{Object: object, Schema: s, Files: w.Files(), Rows: rows, Mode: load.Replace}
	}
	settings := func(t *testing.T, db *sql.DB) (string, int64) {
		t.Helper()
		var limit string
		var threads int64
		if err := db.QueryRow(`SELECT current_setting('memory_limit'), current_setting('threads')`).Scan(&limit, &threads); err != nil {
			t.Fatal(err)
		}
		return limit, threads
	}
	t.Run("commit", func(t *testing.T) {
		lake, wh, _ := openSmall(t, "64MB", 2, load.WithRowsInAnyOrder())
		limit, threads := settings(t, wh.DB())
		for i, day := range []string{"2026-11-23", "2026-11-24"} {
			id := fmt.Sprintf("r%d", i+1)
			tb, merged := stage(lake, "wide", id, day), stage(lake, "wide_merged", id, day)
			merged.Mode, merged.PrimaryKey = load.Merge, []string{"id"}
			var news int64
			tb.NewRows = &news
			now := time.Date(2026, 11, 23+i, 1, 0, 0, 0, time.UTC)
			run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
			if err := wh.Commit(ctx, run, []load.Table{tb, merged}); err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			if want := []int64{rows, 0}[i]; news != want {
				t.Errorf("run %s: %d new rows, want %d", id, news, want)
			}
		}
		for q, want := range map[string]int64{
			`SELECT count(*) FROM wide_history`:        2 * rows,
			`SELECT count(*) FROM wide_merged_history`: 2 * rows,
			`SELECT count(*) FROM wide`:                rows,
			`SELECT count(*) FROM wide_merged`:         rows,
		} {
			if got := count(t, wh.DB(), q); got != want {
				t.Errorf("%s: %d, want %d", q, got, want)
			}
		}
		// The configured limit, and what the merge's deletes pin until the
		// publish's checkpoint (a few MiB), not the room of 100 MiB.
		if l, n := settings(t, wh.DB()); load.SizeBytes(l) > load.SizeBytes(limit)+8<<20 || n != threads {
			t.Errorf("after the runs: limit %s on %d threads, want the configured %s (and a few MiB) on %d", l, n, limit, threads)
		}
	})
	t.Run("many", func(t *testing.T) {
		// Six streams of 60 fields in one run, three of them merges: each
		// table written holds some of its columns until the commit, so
		// the room of the widest one failed the second day's commit
		// ("failed to pin block").
		const streams, rows = 6, 20_000
		lake, wh, _ := openSmall(t, "64MB", 2, load.WithRowsInAnyOrder())
		limit, threads := settings(t, wh.DB())
		for i, day := range []string{"2026-11-23", "2026-11-24"} {
			id := fmt.Sprintf("r%d", i+1)
			files := writeColumns(t, lake.StagingDir(id, "wide", day), s, rows, 12).Files() // every stream's
			var tables []load.Table
			for k := range streams {
				tb := load.Table{Object: fmt.Sprintf("wide%d", k), Schema: s, Files: files, Rows: rows, Mode: load.Replace}
				if k%2 == 1 {
					tb.Mode, tb.PrimaryKey = load.Merge, []string{"id"}
				}
				tables = append(tables, tb)
			}
			now := time.Date(2026, 11, 23+i, 1, 0, 0, 0, time.UTC)
			run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
			if err := wh.Commit(ctx, run, tables); err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
		}
		for k := range streams {
			if got := count(t, wh.DB(), fmt.Sprintf(`SELECT count(*) FROM wide%d_history`, k)); got != 2*rows {
				t.Errorf("wide%d_history: %d rows, want %d", k, got, 2*rows)
			}
			if got := count(t, wh.DB(), fmt.Sprintf(`SELECT count(*) FROM wide%d`, k)); got != rows {
				t.Errorf("wide%d: %d rows, want %d", k, got, rows)
			}
		}
		if l, n := settings(t, wh.DB()); load.SizeBytes(l) > load.SizeBytes(limit)+8<<20 || n != threads {
			t.Errorf("after the runs: limit %s on %d threads, want the configured %s (and a few MiB) on %d", l, n, limit, threads)
		}
	})
	t.Run("early", func(t *testing.T) {
		lake, wh, _ := openSmall(t, "16MiB", 1, load.WithRowsInAnyOrder())
		now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
		run := load.Run{ID: "r1", Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-23"}
		tb := stage(lake, "wide", run.ID, run.SnapshotDate)
		rl, err := wh.Begin(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		defer rl.Rollback() //nolint:errcheck // a no-op after the commit; before Close, which waits for the transaction
		for _, f := range tb.Files {
			if err := rl.LoadFiles(ctx, load.Table{Object: tb.Object, Schema: s, Files: []string{f}}); err != nil {
				t.Fatalf("load %s early: %v", f, err)
			}
		}
		if err := rl.Configure(ctx, load.WithMemoryLimit("64MB"), load.WithThreads(2), load.WithRowsInAnyOrder()); err != nil {
			t.Fatal(err)
		}
		if err := rl.Commit(ctx, run, []load.Table{tb}); err != nil {
			t.Fatal(err)
		}
		if got := rl.Loaded(tb.Object); got != len(tb.Files) {
			t.Errorf("%d files loaded early, want %d", got, len(tb.Files))
		}
		if got := count(t, wh.DB(), `SELECT count(*) FROM wide`); got != rows {
			t.Errorf("the table holds %d rows, want %d", got, rows)
		}
		if l, n := settings(t, wh.DB()); load.SizeBytes(l) > load.SizeBytes("64MB") || load.SizeBytes(l) < load.SizeBytes("63MB") || n != 2 {
			t.Errorf("after the run: limit %s on %d threads, want the configured 64MB on 2", l, n)
		}
	})
}
