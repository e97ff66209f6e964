package load

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoomForMerges: within the run's transaction the load raises a
// configured memory limit to what the run keeps pinned plus 48 bytes for
// every row its merges may delete, the fewer of the rows a merge brings
// and the rows its table holds; nothing for a table that is empty, a view,
// or replaced whole; and the commit gives the configured limit back.
func TestRoomForMerges(t *testing.T) {
	ctx := context.Background()
	w, err := OpenWarehouse(ctx, filepath.Join(t.TempDir(), "w.duckdb"), WithMemoryLimit("64MB"), WithPinnedBytes(40<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, q := range []string{
		`CREATE TABLE empty_one (id BIGINT)`,
		`CREATE TABLE held (id BIGINT)`,
		`INSERT INTO held SELECT range FROM range(1000000)`,
		`CREATE VIEW a_view AS SELECT * FROM held`,
	} {
		if _, err := w.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(db querier) int64 {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT current_setting('memory_limit')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return SizeBytes(strings.ReplaceAll(s, " ", ""))
	}
	configured := limit(w.db)
	merge := func(object string, rows int64) Table {
		return Table{Object: object, Mode: Merge, Rows: rows, Files: []string{"staged.parquet"}}
	}
	for _, tc := range []struct {
		name   string
		tables []Table
		want   int64 // 0: the configured limit
	}{
		{"first sync", []Table{merge("empty_one", 5_000_000)}, 0},
		{"a new table", []Table{merge("not_yet", 5_000_000)}, 0},
		{"a few rows over many", []Table{merge("held", 1000)}, 0}, // 40 MB + 48 kB < 64 MB
		{"a view", []Table{merge("a_view", 1_000_000)}, 0},
		{"full refresh", []Table{{Object: "held", Mode: Merge, Rows: 1_000_000, Files: []string{"x"}, FullRefresh: true}}, 0},
		{"many over many", []Table{merge("held", 5_000_000)}, 40<<20 + 1_000_000*mergeRowBytes},
		{"two merges", []Table{merge("held", 600_000), merge("held", 600_000)}, 40<<20 + 1_200_000*mergeRowBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := w.Begin(ctx, Run{ID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Rollback() //nolint:errcheck
			raised, err := r.roomForMerges(ctx, tc.tables)
			if err != nil {
				t.Fatal(err)
			}
			r.raised = raised
			got := limit(r.tx)
			switch {
			case tc.want == 0 && (raised || got != configured):
				t.Errorf("limit %d (raised %v), want the configured %d", got, raised, configured)
			case tc.want != 0 && (!raised || got < tc.want || got > tc.want+2<<20):
				t.Errorf("limit %d (raised %v), want %d", got, raised, tc.want)
			}
			if err := r.Rollback(); err != nil {
				t.Fatal(err)
			}
			if got := limit(w.db); got != configured {
				t.Errorf("after the transaction the limit is %d, want the configured %d back", got, configured)
			}
		})
	}
}

// TestLimitForHugePages: the configured memory limit, raised to what huge
// values keep pinned when that is more (pipeline's pinnedFor).
func TestLimitForHugePages(t *testing.T) {
	for _, tc := range []struct {
		configured string
		pinned     int64
		want       string
	}{
		{"64MB", 2 << 20, "64MB"},
		{"64MB", 1200 << 20, "1201MiB"},
		{"2GB", 1200 << 20, "2GB"}, // a larger setting is kept
		{"512MiB", 1200 << 20, "1201MiB"},
	} {
		if got := limitFor(tc.configured, tc.pinned); got != tc.want {
			t.Errorf("limitFor(%q, %d) = %q, want %q", tc.configured, tc.pinned, got, tc.want)
		}
	}
}
