package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// columnChunk is what the format decides of one column of one row group.
type columnChunk struct {
	rows        int64
	compression string
	stats, dict bool
}

// fileFormat reads, per row group, the rows and each column's chunk (by
// name; columns named in skip are left out).
func fileFormat(t *testing.T, path string, skip ...string) []map[string]columnChunk {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	var out []map[string]columnChunk
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		m := map[string]columnChunk{}
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			name := md.Schema.Column(c).Name()
			if slices.Contains(skip, name) {
				continue
			}
			stats, _ := cc.StatsSet()
			m[name] = columnChunk{rows: rg.NumRows(), compression: cc.Compression().String(), stats: stats, dict: cc.HasDictionaryPage()}
		}
		out = append(out, m)
	}
	return out
}

// TestLakeWritersShareTheParquetFormat writes the same batches through
// the local lake's writer (load.ParquetWriter) and the Iceberg lake's
// (lakehouse.StageWriter) and requires the same Parquet format of both,
// row group by row group and column by column: row group lengths (cut
// by rows and bytes), compression, statistics and dictionaries, and the
// rule for a huge value, in a JSON column too. They kept copies of the
// rules that had drifted (issue 41): row groups of 61,440 rows in one and
// 122,880 without a byte bound in the other, a huge text column
// uncompressed in one and zstd in the other, and load's huge-value test saw
// plain strings only (lakefile owns them now).
func TestLakeWritersShareTheParquetFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fields := []service.Field{{ID: "id", Type: service.TypeInt}, {ID: "name", Type: service.TypeString},
		{ID: "status", Type: service.TypePicklist, Options: []string{"A", "B"}}, {ID: "at", Type: service.TypeDate},
		{ID: "score", Type: service.TypeFloat}, {ID: "ok", Type: service.TypeBool}, {ID: "doc", Type: service.TypeJSON}}
	s, err := schemas.ForCollection("conform", fields)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := transform.NewDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	page := func(from, n int, doc string) arrow.RecordBatch {
		var b strings.Builder
		b.WriteString(`{"results":[`)
		for i := from; i < from+n; i++ {
			if i > from {
				b.WriteByte(',')
			}
			d := `{"n":` + fmt.Sprint(i) + `}`
			if i == from && doc != "" {
				d = doc
			}
			fmt.Fprintf(&b, `{"id":%d,"name":"learner %d","status":"%s","at":"2026-01-02T03:04:05Z","score":%d.5,"ok":%v,"doc":%s}`,
				i, i, []string{"A", "B"}[i%2], i%100, i%3 == 0, d)
		}
		b.WriteString(`]}`)
		res, err := dec.DecodePage(1, []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return res.Record
	}
	huge := `{"blob":"` + strings.Repeat("x", 2<<20) + `"}` // a JSON value of 2 MiB
	batches := []arrow.RecordBatch{page(0, 40_000, ""), page(40_000, 40_000, ""), page(80_000, 3, huge), page(80_003, 10, "")}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()

	dir := t.TempDir()
	pw, err := load.NewParquetWriter(filepath.Join(dir, "local"), "conform", s, load.WithRowsPerFile(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	lh, err := lakehouse.Open(ctx, *fileLake(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	sw, err := lh.NewStageWriter(ctx, lakehouse.TableSpec{Stream: "conform", Schema: s, Mode: lakehouse.Append}, lakehouse.Run{ID: "20261123T000000Z-0000abcd", Day: "2026-11-23"})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := pw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := sw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	in := sw.Intent()
	local, iceberg := pw.Files(), in.Files
	if len(local) != 3 || len(iceberg) != 3 {
		t.Fatalf("files: local %v, iceberg %v; want three each: before, the huge batch, after", local, iceberg)
	}
	for i := range local {
		a := fileFormat(t, local[i])
		b := fileFormat(t, strings.TrimPrefix(iceberg[i], "file://"), lakefile.DayColumn, lakefile.ColRunID)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("file %d differs:\n local   %v\n iceberg %v", i, a, b)
		}
		for g, rg := range a {
			for col, cc := range rg {
				if cc.rows > lakefile.RowGroupRows {
					t.Errorf("file %d row group %d: %d rows, more than %d", i, g, cc.rows, lakefile.RowGroupRows)
				}
				hugeCol := i == 1 && col == "doc"
				if (cc.compression == "UNCOMPRESSED") != hugeCol || cc.stats == hugeCol || hugeCol && cc.dict {
					t.Errorf("file %d row group %d column %s (huge %v): %+v", i, g, col, hugeCol, cc)
				}
			}
		}
	}
	_ = sw.Abort()
	_ = os.RemoveAll(dir)
}
