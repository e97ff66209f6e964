package load

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/schemas"
)

// TestDeleteOld: a merge's deletes take the old version of every key the
// run brings, whatever its share of the table, in batches of row ids; the
// load raises a configured memory limit, on top of it, by what they pin
// (vectorDeleteBytes for each vector they may delete some but not all
// rows of), which outlives the transaction until a checkpoint, and for
// the join that finds them.
func TestDeleteOld(t *testing.T) {
	t.Parallel()
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
	limit := func(db querier) int64 { t.Helper(); return memoryLimitOf(t, db) }
	configured := limit(w.db) // the huge values' 80 MiB, more than 64 MB
	vectors := int64(n+2047) / 2048
	for _, tc := range []struct {
		table, from string
		brought     int64 // the run's rows: the join's room
		deleted     int64
		batches     int
		partial     int64 // vectors counted as deleted in part
	}{
		{"empty_one", "spread", 3000, 0, 0, 0},
		{"held", "new_keys", 100, 0, 0, 0},
		// All but the first three blocks of 2,048 ids and 7 ids of the
		// fourth, in twelve ranges of 2^17 ids (the first, short one
		// does not take the second's ids): the fourth block and the last,
		// shorter one (its 864 ids, all deleted, are fewer than 2,048)
		// are deleted in part, each a run of its own, and the blocks
		// between are one run deleted whole.
		{"held", "every_key", n, n - 3*2048 - 7, 12, 2 + 2 + 2},
		// A few ids in every block: one run of blocks deleted in part.
		{"held", "spread", 3000, n / 500, 1, vectors + 1},
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
			pinsBefore := w.deletePins
			st, err := deleteOld(ctx, r.tx, Table{Object: tc.table, Rows: tc.brought}, tc.from, []string{Ident("id")}, nil, 8, &r.room)
			if err != nil {
				t.Fatal(err)
			}
			var left, kept int64
			if err := r.tx.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE id NOT IN (SELECT id FROM "+tc.from+")) FROM "+tc.table).Scan(&left, &kept); err != nil {
				t.Fatal(err)
			}
			if before-left != tc.deleted || st.deleted != tc.deleted || kept != left || st.batches != tc.batches {
				t.Errorf("deleted %d rows (says %d, in %d batches) and kept %d of %d without a key brought, want %d deleted in %d batches and every other kept",
					before-left, st.deleted, st.batches, kept, left, tc.deleted, tc.batches)
			}
			// The join runs with room for the huge values and itself, on
			// a table that holds rows, beside what earlier deletes pin.
			wantJoin := ""
			if before > 0 {
				wantJoin = mib(80<<20 + joinBytes(before, tc.brought, 8) + pinsBefore)
			}
			if st.joinLimit != wantJoin {
				t.Errorf("the join ran under %q, want %q", st.joinLimit, wantJoin)
			}
			// The deletes' pins stay on top of the configured limit, after
			// the transaction too (until a checkpoint).
			if st.pinned != tc.partial*vectorDeleteBytes || w.deletePins != pinsBefore+st.pinned {
				t.Errorf("pinned %d (warehouse: %d after %d), want %d vectors' %d", st.pinned, w.deletePins, pinsBefore, tc.partial, tc.partial*vectorDeleteBytes)
			}
			want := configured + w.deletePins
			if got := limit(r.tx); got < want || got > want+1<<20 {
				t.Errorf("limit %d, want %d: the configured %d and the deletes' pins", got, want, configured)
			}
			if err := r.Rollback(); err != nil {
				t.Fatal(err)
			}
			if got := limit(w.db); got < want || got > want+1<<20 || r.room.raised {
				t.Errorf("after the transaction the limit is %d (raised %v), want %d: the configured %d and the pins still held", got, r.room.raised, want, configured)
			}
		})
	}
}

// TestLimitForHugePages: the configured memory limit, raised to what huge
// values keep pinned when that is more (pipeline's pinnedFor).
func TestLimitForHugePages(t *testing.T) {
	t.Parallel()
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

// TestDeletePinsOutliveTheRun: what a merge's deletes pin outlives the
// commit until a checkpoint (DuckDB frees it then, not before), so the
// warehouse keeps room for it after the run: a second run on the same
// warehouse, deleting as many again, failed under the configured limit
// while the first run's pins were held ("failed to pin block"). The
// publish's checkpoint frees them.
func TestDeletePinsOutliveTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := Lake{Root: t.TempDir()}
	w, err := OpenState(ctx, lake, WithMemoryLimit("24MB"), WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 3_000_000 // 1,465 vectors: 25 MiB pinned by a delete in each
	for _, q := range []string{
		fmt.Sprintf(`CREATE TABLE a AS SELECT range AS id FROM range(%d)`, n),
		fmt.Sprintf(`CREATE TABLE b AS SELECT range AS id FROM range(%d)`, n),
		fmt.Sprintf(`CREATE TABLE spread AS SELECT range AS id FROM range(0, %d, 1000)`, n),
	} {
		if _, err := w.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	limit := func() int64 { t.Helper(); return memoryLimitOf(t, w.db) }
	configured := limit()
	var pins int64
	for i, table := range []string{"a", "b"} {
		run := Run{ID: fmt.Sprintf("r%d", i+1), Status: "succeeded"}
		r, err := w.Begin(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		st, err := deleteOld(ctx, r.tx, Table{Object: table, Rows: n / 1000}, "spread", []string{Ident("id")}, nil, 8, &r.room)
		if err != nil {
			r.Rollback() //nolint:errcheck
			t.Fatalf("run %d: %v", i+1, err)
		}
		if st.deleted != n/1000 || st.pinned < 1465*vectorDeleteBytes {
			t.Errorf("run %d deleted %d rows pinning %d bytes, want %d rows and 1,465 vectors' pins", i+1, st.deleted, st.pinned, n/1000)
		}
		if _, err := r.tx.ExecContext(ctx, "INSERT INTO "+table+" SELECT range FROM range(10000000, 10200000)"); err != nil {
			r.Rollback() //nolint:errcheck
			t.Fatalf("run %d: insert after the deletes: %v", i+1, err)
		}
		if err := r.Commit(ctx, run, nil); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		pins += st.pinned
		if got := limit(); w.deletePins != pins || got < configured+pins || got > configured+pins+1<<20 {
			t.Errorf("after run %d the limit is %d with %d bytes counted pinned, want the configured %d and %d", i+1, got, w.deletePins, configured, pins)
		}
	}
	if err := w.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if w.deletePins != 0 {
		t.Errorf("after the publish's checkpoint %d bytes are counted pinned, want none", w.deletePins)
	}
}

// TestMergeKeepsOthersOfALargeTable: a merge whose deletes would pin more
// than the rule allows (loadRoom.rebuild; here past 1 MiB) copies the
// table's other rows into a new table instead, which pins nothing: one key
// in 1,000 of a table of 3 M rows, where the deletes would pin 29 MiB, and
// again on the new table. Nothing else of the table changes: its rows, its
// columns' comments, a view of it; its name needs quoting.
func TestMergeKeepsOthersOfALargeTable(t *testing.T) {
	if testing.Short() {
		t.Skip("merges over 3 M rows")
	}
	ctx := context.Background()
	lake := Lake{Root: t.TempDir()}
	w, err := OpenState(ctx, lake, WithMemoryLimit("64MB"), WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.rebuildOver = 1 << 20
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: arrow.NewMetadata([]string{schemas.MetaDisplayName}, []string{"The name"})},
	}, nil)
	const n = 3_000_000
	const object = "My-thing"
	stage := func(run, q string, rows int64) Table {
		t.Helper()
		f := filepath.Join(t.TempDir(), run+".parquet")
		if _, err := w.db.ExecContext(ctx, "COPY ("+q+") TO "+Literal(f)+" (FORMAT parquet)"); err != nil {
			t.Fatal(err)
		}
		return Table{Object: object, Schema: schema, Files: []string{f}, Rows: rows, Mode: Merge, PrimaryKey: []string{"id"}}
	}
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	commit := func(id string, tb Table) {
		t.Helper()
		run := Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-26"}
		if err := w.Commit(ctx, run, []Table{tb}); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		if w.deletePins != 0 {
			t.Errorf("run %s counts %d bytes pinned, want none: it keeps the other rows instead", id, w.deletePins)
		}
	}
	commit("r1", stage("r1", fmt.Sprintf("SELECT range AS id, 'a' AS name FROM range(%d)", n), n))
	for _, q := range []string{
		`CREATE VIEW named_b AS SELECT id FROM "My-thing" WHERE name = 'b'`,
		`COMMENT ON COLUMN "My-thing"._sepipe_run_id IS 'the run'`, // a column the schema does not name
	} {
		if _, err := w.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	commit("r2", stage("r2", fmt.Sprintf("SELECT range AS id, 'b' AS name FROM range(0, %d, 1000)", n), n/1000))
	commit("r3", stage("r3", fmt.Sprintf("SELECT range AS id, 'c' AS name FROM range(500, %d, 1000)", n), n/1000))
	for _, c := range []struct {
		q    string
		want int64
	}{
		{`SELECT count(*) FROM "My-thing"`, n},
		{`SELECT count(DISTINCT id) FROM "My-thing"`, n},
		{`SELECT count(*) FROM "My-thing" WHERE name = 'b' AND id % 1000 = 0 AND _sepipe_run_id = 'r2'`, n / 1000},
		{`SELECT count(*) FROM "My-thing" WHERE name = 'c' AND id % 1000 = 500 AND _sepipe_run_id = 'r3'`, n / 1000},
		{`SELECT count(*) FROM "My-thing" WHERE name = 'a' AND id % 1000 NOT IN (0, 500)`, n - 2*n/1000},
		{`SELECT count(*) FROM named_b`, n / 1000},
		{`SELECT count(*) FROM duckdb_columns() WHERE table_name = 'My-thing' AND column_name = 'name' AND comment = 'The name'`, 1},
		{`SELECT count(*) FROM duckdb_columns() WHERE table_name = 'My-thing' AND column_name = '_sepipe_run_id' AND comment = 'the run'`, 1},
		{`SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_sepipe_rebuild%'`, 0},
	} {
		var got int64
		if err := w.db.QueryRowContext(ctx, c.q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.q, got, c.want)
		}
	}
}

// TestRebuildRule: a merge keeps a table's other rows instead of deleting
// only when its deletes, with what earlier ones pin, would pass the limit
// and touch most of the table's vectors.
func TestRebuildRule(t *testing.T) {
	t.Parallel()
	w := &Warehouse{memoryLimit: "64MB"} // 256 MiB: more than four times 61 MiB
	d := &loadRoom{w: w}
	vectors := func(rows int64) int64 { return rows / 2048 }
	for _, tc := range []struct {
		name          string
		earlier       int64
		partial, held int64
		want          bool
	}{
		{"5 M rows changed all over", 0, vectors(5e6), 5e6, false},   // 48 MiB pinned
		{"30 M rows changed all over", 0, vectors(30e6), 30e6, true}, // 286 MiB
		{"a few changes over 500 M rows", 0, 13_200, 500e6, false},   // 258 MiB, but 5 % of the vectors
		{"after earlier merges' pins", 220 << 20, vectors(5e6), 5e6, true},
	} {
		w.deletePins = tc.earlier
		if got := d.rebuild(tc.partial, tc.held); got != tc.want {
			t.Errorf("%s: rebuild = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestWrittenRoom: the room for the tables a run has written counts each
// stream once, at its most tables and columns (a stream loaded early
// into its history, then committed as a merge into two tables), never
// less, and reset forgets it.
func TestWrittenRoom(t *testing.T) {
	t.Parallel()
	d := &loadRoom{w: &Warehouse{memoryLimit: "64MB"}}
	steps := []struct {
		object       string
		tables, cols int
		want         int64 // writtenSum after the step
	}{
		{"a", 1, 17, writtenBytes(17)},                      // loaded early: its history
		{"a", 1, 17, writtenBytes(17)},                      // another of its files
		{"b", 1, 62, writtenBytes(17) + writtenBytes(62)},   // a second stream
		{"a", 2, 18, 2*writtenBytes(18) + writtenBytes(62)}, // a committed as a merge
		{"b", 1, 40, 2*writtenBytes(18) + writtenBytes(62)}, // fewer columns: no less
	}
	for i, s := range steps {
		d.writes(s.object, s.tables, s.cols)
		if d.writtenSum != s.want {
			t.Errorf("step %d (%s, %d tables of %d columns): %d bytes, want %d", i, s.object, s.tables, s.cols, d.writtenSum, s.want)
		}
	}
	if writtenBytes(62) != 62<<16 {
		t.Errorf("writtenBytes(62) = %d, want 64 KiB a column", writtenBytes(62))
	}
	if err := d.reset(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if d.writtenSum != 0 || len(d.written) != 0 || d.committing {
		t.Errorf("after reset: %d bytes for %d streams (committing %v), want none", d.writtenSum, len(d.written), d.committing)
	}
}

// memoryLimitOf is DuckDB's memory limit on db's connection, in bytes.
func memoryLimitOf(t *testing.T, db querier) int64 {
	t.Helper()
	var s string
	if err := db.QueryRowContext(context.Background(), `SELECT current_setting('memory_limit')`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return SizeBytes(strings.ReplaceAll(s, " ", ""))
}

// TestThreadsFollowTheLimit: under a memory limit a load gets a thread
// for each threadBytes of it, at least two and at most one a processor,
// not DuckDB's default of one a processor (on eight threads a replace
// stream of 300,000 rows failed its load under the default 64 MB). An
// explicit number of threads wins; without a limit DuckDB decides.
func TestThreadsFollowTheLimit(t *testing.T) {
	ctx := context.Background()
	defer func(f func() int) { numCPU = f }(numCPU)
	numCPU = func() int { return 16 }
	threads := func(w *Warehouse) int {
		t.Helper()
		var n int
		if err := w.db.QueryRowContext(ctx, `SELECT current_setting('threads')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var defaultThreads int
	for _, c := range []struct {
		opts []OpenOption
		want int // 0: DuckDB's default
	}{
		{[]OpenOption{WithMemoryLimit("64MB")}, 2},
		{[]OpenOption{WithMemoryLimit("16MB")}, 2},
		{[]OpenOption{WithMemoryLimit("128MB")}, 3},
		{[]OpenOption{WithMemoryLimit("256MiB")}, 8},
		{[]OpenOption{WithMemoryLimit("4GB")}, 16},
		{[]OpenOption{WithMemoryLimit("4G")}, 16}, // DuckDB's reading of it: 3.7 GiB
		{[]OpenOption{WithMemoryLimit("none")}, 0},
		{[]OpenOption{WithMemoryLimit("64MB"), WithThreads(1)}, 1},
		{[]OpenOption{WithMemoryLimit("64MB"), WithThreads(5)}, 5},
		{nil, 0},
	} {
		w, err := OpenWarehouse(ctx, filepath.Join(t.TempDir(), "w.duckdb"), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		got := threads(w)
		w.Close()
		if c.want == 0 {
			if defaultThreads != 0 && got != defaultThreads {
				t.Errorf("without a limit, %d threads once and %d once", defaultThreads, got)
			}
			defaultThreads = got
			continue
		}
		if got != c.want {
			t.Errorf("%d options (limit %q): %d threads, want %d", len(c.opts), w.memoryLimit, got, c.want)
		}
	}
	// A connection configured again (the early load's, on one thread,
	// then the commit's) follows its last limit.
	w, err := OpenWarehouse(ctx, filepath.Join(t.TempDir(), "w.duckdb"), WithMemoryLimit("64MB"), WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, c := range []struct {
		limit string
		want  int
	}{{"256MiB", 8}, {"none", defaultThreads}, {"64MB", 2}} {
		if err := w.configure(ctx, openOptions{memoryLimit: c.limit}); err != nil {
			t.Fatal(err)
		}
		if got := threads(w); got != c.want {
			t.Errorf("configured again with %q: %d threads, want %d", c.limit, got, c.want)
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var duckdb int
	if err := db.QueryRowContext(ctx, `SELECT current_setting('threads')`).Scan(&duckdb); err != nil {
		t.Fatal(err)
	}
	if defaultThreads != duckdb {
		t.Errorf("without a limit: %d threads, want DuckDB's default, %d", defaultThreads, duckdb)
	}
}

// TestJoinRoomCoversTheMeasuredNeeds: the room of a merge's join to find
// the rows it replaces (with the hashes that count its new rows) stays
// above what 20 M rows over 20 M needed on two threads, for keys of one
// number, of two text columns of 21 and 10 bytes, and of two resource ids
// of 32 characters (joinBytes' measurements), so that a change of the
// rule cannot fall below them unnoticed.
func TestJoinRoomCoversTheMeasuredNeeds(t *testing.T) {
	t.Parallel()
	text := arrow.Field{Name: "name", Type: arrow.BinaryTypes.String}
	num := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}
	const n = 20_000_000
	for _, c := range []struct {
		name      string
		keys      []arrow.Field
		textBytes float64
		passed    int64 // the smallest room it passed under, of those tried
	}{
		{"one number", []arrow.Field{num}, 0, 101 << 20}, // with the hashes; 64 MiB without
		{"two short texts", []arrow.Field{text, text}, 31, 150 << 20},
		{"two resource ids", []arrow.Field{text, text}, 64, 225 << 20},
	} {
		if got := joinBytes(n, n, keyWidth(c.keys, c.textBytes)); got < c.passed {
			t.Errorf("%s: room %d MiB, below the %d MiB it needed", c.name, got>>20, c.passed>>20)
		}
	}
}
