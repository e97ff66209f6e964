package load

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeleteOld: a merge's deletes take the old version of every key the
// run brings, whatever its share of the table, in batches of row ids; the
// load raises a configured memory limit, on top of it, by what they pin
// (vectorDeleteBytes for each vector they delete some but not all rows
// of), nothing for a table that is empty or replaced by whole vectors;
// the transaction's end gives the configured limit back.
func TestDeleteOld(t *testing.T) {
	ctx := context.Background()
	w, err := OpenWarehouse(ctx, filepath.Join(t.TempDir(), "w.duckdb"), WithMemoryLimit("64MB"), WithPinnedBytes(80<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 1_500_000 // 733 vectors, twelve batches of row ids
	for _, q := range []string{
		`CREATE TABLE empty_one (id BIGINT)`,
		`CREATE TABLE held (id BIGINT)`,
		fmt.Sprintf(`INSERT INTO held SELECT range FROM range(%d)`, n),
		`CREATE TABLE every_key AS SELECT range AS id FROM range(3 * 2048 + 7, ` + fmt.Sprint(n) + `)`,
		fmt.Sprintf(`CREATE TABLE spread AS SELECT range AS id FROM range(0, %d, 500)`, n),
		`CREATE TABLE new_keys AS SELECT range AS id FROM range(2000000, 2000100)`,
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
	configured := limit(w.db) // the pinned bytes' 80 MiB, more than 64 MB
	vectors := int64(n+2047) / 2048
	for _, tc := range []struct {
		table, from string
		deleted     int64
		partial     int64 // vectors deleted in part
	}{
		{"empty_one", "spread", 0, 0},
		{"held", "new_keys", 0, 0},
		// All but the first three vectors and 7 rows of the fourth: the
		// fourth and the last, shorter one (its 864 rows, all deleted,
		// are fewer than a vector's) are deleted in part.
		{"held", "every_key", n - 3*2048 - 7, 2},
		{"held", "spread", n / 500, vectors},
	} {
		t.Run(tc.table+"/"+tc.from, func(t *testing.T) {
			r, err := w.Begin(ctx, Run{ID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Rollback() //nolint:errcheck
			var before int64
			if err := r.tx.QueryRowContext(ctx, "SELECT count(*) FROM "+tc.table).Scan(&before); err != nil {
				t.Fatal(err)
			}
			if err := deleteOld(ctx, r.tx, Table{Object: tc.table}, tc.from, []string{"t.id = s.id"}, &r.room); err != nil {
				t.Fatal(err)
			}
			var left, kept int64
			if err := r.tx.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE id NOT IN (SELECT id FROM "+tc.from+")) FROM "+tc.table).Scan(&left, &kept); err != nil {
				t.Fatal(err)
			}
			if before-left != tc.deleted || kept != left {
				t.Errorf("deleted %d rows and kept %d of %d without a key brought, want %d deleted and every other kept", before-left, kept, left, tc.deleted)
			}
			want := configured + tc.partial*vectorDeleteBytes
			if got := limit(r.tx); got < want || got > want+1<<20 || r.room.raised != (tc.partial > 0) {
				t.Errorf("limit %d (raised %v), want %d: the configured %d and %d vectors deleted in part", got, r.room.raised, want, configured, tc.partial)
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
