package load_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sepipe/sepipe/load"
)

// BenchmarkPublish measures a publish (copy of the working database,
// fsync, a read-only open of the copy, rename) for working databases of
// about 100 MB and 1 GB, and reports the file's size: the extra disk a
// publish needs at its peak is one more copy, and a reader holding the
// old file keeps a third until it reconnects.
//
//	go test -run '^$' -bench Publish -benchtime 3x ./load/
func BenchmarkPublish(b *testing.B) {
	for _, mb := range []int{100, 1000} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			ctx := context.Background()
			lake := load.Lake{Root: b.TempDir()}
			wh, err := load.OpenState(ctx, lake)
			if err != nil {
				b.Fatal(err)
			}
			// Text that compresses about as well as a warehouse's: ids,
			// names and dates that repeat with variation.
			rows := mb * 23_500
			if _, err := wh.DB().ExecContext(ctx, fmt.Sprintf(`CREATE TABLE t AS SELECT range AS id,
				md5(range::VARCHAR) || md5((range * 7)::VARCHAR) AS name, range %% 1000 AS grp,
				TIMESTAMPTZ '2026-01-01' + to_seconds(range) AS at, random() AS score
				FROM range(%d)`, rows)); err != nil {
				b.Fatal(err)
			}
			if err := wh.Publish(ctx); err != nil {
				b.Fatal(err)
			}
			wh.Close()
			fi, err := os.Stat(lake.WarehousePath())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			b.ResetTimer()
			for range b.N {
				// Forget the publish, as a change to the working database does.
				os.Remove(filepath.Join(lake.Root, ".sepipe", "published"))
				if err := load.PublishState(ctx, lake); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
			checkPublished(b, lake.WarehousePath(), rows)
		})
	}
}

func checkPublished(b *testing.B, path string, rows int) {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != rows {
		b.Fatalf("published copy: %d rows, %v; want %d", n, err, rows)
	}
}
