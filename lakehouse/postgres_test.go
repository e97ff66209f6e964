package lakehouse

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sepipe/sepipe/internal/lakeservers"
)

// TestPostgresCatalogTwoWriters: two writers with their own catalog
// objects (two machines sharing one PostgreSQL catalog and one warehouse)
// commit three days to different tables of one namespace at once; then a
// third catalog object reads both tables whole.
func TestPostgresCatalogTwoWriters(t *testing.T) {
	pg := lakeservers.StartPostgres(t)
	warehouse := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "warehouse"))
	cfg := Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, Driver: DriverPostgres, URI: pg.DSN},
		Warehouse: warehouse,
		Namespace: "tenant_a",
	}
	// The catalog's tables are created by the first Open.
	writers := []*Lakehouse{open(t, cfg), open(t, cfg)}
	streams := []string{"courses", "users"}
	want := make([][]row, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range writers {
		for d, day := range days {
			run := fmt.Sprintf("run-%d", d+1)
			rows := makeRows(int64(w*1000+d*100), 50, streams[w]+run)
			want[w] = append(want[w], stamped(rows, day, run)...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := writers[w]
			spec := TableSpec{Stream: streams[w], Schema: testSchema(), Mode: Append}
			for d, day := range days {
				run := Run{ID: fmt.Sprintf("run-%d", d+1), Day: day}
				rdr := reader(t, l.mem, want[w][d*50:(d+1)*50], 16)
				in, err := l.Stage(context.Background(), spec, run, rdr)
				rdr.Release()
				if err == nil {
					_, err = l.Commit(context.Background(), in)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	reader := open(t, cfg)
	for w, s := range streams {
		sameRows(t, s, readTable(t, reader, "tenant_a", s), want[w])
		if n := len(runSummaries(t, reader, "tenant_a", s)); n != 3 {
			t.Errorf("%s: %d snapshots, want 3", s, n)
		}
	}
	tables, err := reader.Tables(context.Background(), "tenant_a")
	if err != nil || len(tables) != 2 {
		t.Fatalf("namespace tenant_a lists %v (%v), want 2 tables", tables, err)
	}
}
