package load_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// stageNamed writes one part file per group into run's staging of
// "thing": rows with the given ids, each named name; later groups are
// later files (read later).
func stageNamed(t *testing.T, lake load.Lake, run string, groups ...map[string][]int) load.Table {
	t.Helper()
	dir := lake.StagingDir(run, "thing", "2026-11-23")
	var files []string
	var rows int64
	for i, g := range groups {
		w, err := load.NewParquetWriter(dir, "thing", schema(t), load.WithFileNumbers(i, len(groups)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := transform.NewDecoder(schema(t), transform.WithAllocator(memory.DefaultAllocator))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString(`{"results":[`)
		n := 0
		for name, ids := range g {
			for _, id := range ids {
				if n > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":%d,"name":%q}`, id, name)
				n++
			}
		}
		b.WriteString("]}")
		res, err := d.DecodePage(1, []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(res.Record); err != nil {
			t.Fatal(err)
		}
		res.Record.Release()
		d.Release()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files, rows = append(files, w.Files()...), rows+w.Rows()
	}
	return load.Table{Object: "thing", Schema: schema(t), Files: files, Rows: rows, Mode: load.Merge, PrimaryKey: []string{"id"}}
}

// stageJSON writes rows, JSON objects of fields fs, into one part file of
// run's staging of "thing", a merge stream on id.
func stageJSON(t *testing.T, lake load.Lake, run string, fs []service.Field, rows ...string) load.Table {
	t.Helper()
	sch := arrow.NewSchema(nil, nil) // no fields, which FromDescribe refuses
	if len(fs) > 0 {
		var err error
		if sch, err = schemas.FromDescribe("thing", fs); err != nil {
			t.Fatal(err)
		}
	}
	return stageSchema(t, lake, run, sch, rows...)
}

// stageSchema writes rows, JSON objects of schema sch, into one part file
// of run's staging of "thing", a merge stream on id.
func stageSchema(t *testing.T, lake load.Lake, run string, sch *arrow.Schema, rows ...string) load.Table {
	t.Helper()
	w, err := load.NewParquetWriter(lake.StagingDir(run, "thing", "2026-11-23"), "thing", sch)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(sch, transform.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	res, err := d.DecodePage(1, []byte(`{"results":[`+strings.Join(rows, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if err := w.Write(res.Record); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return load.Table{Object: "thing", Schema: sch, Files: w.Files(), Rows: w.Rows(), Mode: load.Merge, PrimaryKey: []string{"id"}}
}

// commitMerge commits run id of 2026-11-23 with tb alone.
func commitMerge(t *testing.T, wh *load.Warehouse, id string, tb load.Table) {
	t.Helper()
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-23"}
	if err := wh.Commit(context.Background(), run, []load.Table{tb}); err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
}

func ids(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestMergeUpsertsAndKeysReadTwice: a merge run replaces the rows of the
// keys it brings and adds new ones. Keys the staged rows hold once go in
// as they are; a key the staged rows hold twice goes in once, the row read
// last winning.
func TestMergeUpsertsAndKeysReadTwice(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	commit := func(id string, tb load.Table) { t.Helper(); commitMerge(t, wh, id, tb) }
	names := func() string {
		t.Helper()
		rows, err := wh.DB().Query(`SELECT id, name FROM thing ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var id int
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%d:%s ", id, name)
		}
		return strings.TrimSpace(b.String())
	}

	commit("r1", stageNamed(t, lake, "r1", map[string][]int{"a": ids(0, 5)}))
	// Keys 3..5 twice: in the first file as "b1", in the second as "b2".
	commit("r2", stageNamed(t, lake, "r2", map[string][]int{"b1": ids(3, 6)}, map[string][]int{"b2": ids(3, 5)}))
	if got, want := names(), "0:a 1:a 2:a 3:b2 4:b2 5:b2 6:b1"; got != want {
		t.Errorf("after a run that read keys twice: %s, want %s", got, want)
	}
	commit("r3", stageNamed(t, lake, "r3", map[string][]int{"c": {1, 7}}))
	if got, want := names(), "0:a 1:c 2:a 3:b2 4:b2 5:b2 6:b1 7:c"; got != want {
		t.Errorf("after a run with each key once: %s, want %s", got, want)
	}
}

// TestMergeCountsNewRows: a merge stream's new rows are the rows it
// inserted or changed: keys the table did not hold, and rows whose
// columns differ from the ones they replace; a key read twice counts once,
// as the row that won.
func TestMergeCountsNewRows(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	commit := func(id string, tb load.Table) int64 {
		t.Helper()
		var news int64
		tb.NewRows = &news
		commitMerge(t, wh, id, tb)
		return news
	}
	if got := commit("r1", stageNamed(t, lake, "r1", map[string][]int{"a": ids(0, 9)})); got != 10 {
		t.Errorf("first run: %d new rows, want all 10", got)
	}
	// 0..4 unchanged, 5..7 changed, 10 and 11 new keys.
	if got := commit("r2", stageNamed(t, lake, "r2", map[string][]int{"a": ids(0, 4), "b": ids(5, 7), "c": ids(10, 11)})); got != 5 {
		t.Errorf("second run: %d new rows, want 5 (3 changed, 2 new keys)", got)
	}
	// 3 and 4 read twice, the later read (their rows as held) winning; 5
	// as held; 9 changed.
	if got := commit("r3", stageNamed(t, lake, "r3", map[string][]int{"z": ids(3, 4)}, map[string][]int{"a": ids(3, 4), "b": {5}, "y": {9}})); got != 1 {
		t.Errorf("a run that read keys twice: %d new rows, want 1", got)
	}
	if got := commit("r4", stageNamed(t, lake, "r4", map[string][]int{"a": ids(0, 4), "b": ids(5, 7), "a ": {8}, "y": {9}, "c": ids(10, 11)})); got != 1 {
		t.Errorf("a run that changed one row: %d new rows, want 1", got)
	}
	if got := count(t, wh.DB(), `SELECT count(*) FROM thing`); got != 12 {
		t.Errorf("the table holds %d rows, want 12", got)
	}
}

// TestMergeNewRowsAfterAModeChange: a merge stream's new rows when it
// was not a merge stream before, or reloads everything: a replace
// stream's view of its history, an append stream's table that holds a key
// once a day, a full refresh. Each time the same rows again: none new.
func TestMergeNewRowsAfterAModeChange(t *testing.T) {
	t.Parallel()
	for _, before := range []load.WriteMode{load.Replace, load.Append, load.Merge} {
		t.Run(string(before), func(t *testing.T) {
			lake, wh := newWarehouse(t)
			days := 1
			if before == load.Append {
				days = 3
			}
			for i := 0; i < days; i++ {
				id := fmt.Sprintf("r%d", i)
				tb := stageNamed(t, lake, id, map[string][]int{"a": ids(0, 9)})
				tb.Mode = before
				now := time.Date(2026, 11, 20+i, 1, 0, 0, 0, time.UTC)
				run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: now.Format(time.DateOnly)}
				if err := wh.Commit(context.Background(), run, []load.Table{tb}); err != nil {
					t.Fatal(err)
				}
			}
			tb := stageNamed(t, lake, "merge", map[string][]int{"a": ids(0, 9)})
			tb.FullRefresh = before == load.Merge
			var news int64
			tb.NewRows = &news
			commitMerge(t, wh, "merge", tb)
			if news != 0 {
				t.Errorf("the same rows again: %d new rows, want 0", news)
			}
			if got := count(t, wh.DB(), `SELECT count(*) FROM thing`); got != 10 {
				t.Errorf("the table holds %d rows, want 10", got)
			}
		})
	}
}

// TestMergeWithAFieldCalledRowID: a field called rowId is what DuckDB's
// rowid names in its table; the merge does not take its values for row
// ids (the deletes then took every row whose rowId was 7, and the check
// failed the stream: "deleted 10 rows, 2 hold a key the run brings"), and
// replaces the rows of the keys it brings, counted or not. A field called
// fileName does not clash with the name of the file a row was read from,
// which picks each key's latest row when a key was read twice ("duplicate
// column name"), nor one called File_Row_Number with the row's number in
// its file ("not supported").
func TestMergeWithAFieldCalledRowID(t *testing.T) {
	t.Parallel()
	fs := []service.Field{{ID: "id", Type: "int"}, {ID: "name", Type: "string"}, {ID: "rowId", Type: "int"}, {ID: "fileName", Type: "string"}, {ID: "File_Row_Number", Type: "int"}}
	var day1 []string
	for i := 0; i < 10; i++ {
		day1 = append(day1, fmt.Sprintf(`{"id":%d,"name":"a","rowId":7,"fileName":"z.pdf"}`, i))
	}
	for _, c := range []struct {
		name   string
		day2   []string
		count  bool
		want   string
		news   int64
		cursor string
	}{
		{"counted", []string{`{"id":3,"name":"b","rowId":7}`, `{"id":4,"name":"a","rowId":7,"fileName":"z.pdf"}`, `{"id":10,"name":"c","rowId":null}`},
			true, "0:a 1:a 2:a 3:b 4:a 5:a 6:a 7:a 8:a 9:a 10:c", 2, ""},
		{"not counted", []string{`{"id":3,"name":"b","rowId":7}`, `{"id":10,"name":"c","rowId":null}`},
			false, "0:a 1:a 2:a 3:b 4:a 5:a 6:a 7:a 8:a 9:a 10:c", 0, ""},
		// Keys 3 and 5 read more than once: the row read last wins.
		{"a key read twice", []string{`{"id":3,"name":"x","fileName":"a.pdf","File_Row_Number":1}`, `{"id":5,"name":"y"}`, `{"id":3,"name":"w"}`,
			`{"id":5,"name":"v","File_Row_Number":7}`, `{"id":3,"name":"b","fileName":"b.pdf"}`, `{"id":4,"name":"a","rowId":7,"fileName":"z.pdf"}`},
			true, "0:a 1:a 2:a 3:b 4:a 5:v 6:a 7:a 8:a 9:a", 2, ""},
		// With a cursor the latest cursor wins, a null one last.
		{"a key read twice, with a cursor", []string{`{"id":3,"name":"x","rowId":9}`, `{"id":5,"name":"v","rowId":1}`, `{"id":3,"name":"b","rowId":2}`, `{"id":5,"name":"y"}`},
			true, "0:a 1:a 2:a 3:x 4:a 5:v 6:a 7:a 8:a 9:a", 2, "rowId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lake, wh := newWarehouse(t)
			commitMerge(t, wh, "r1", stageJSON(t, lake, "r1", fs, day1...))
			tb := stageJSON(t, lake, "r2", fs, c.day2...)
			tb.Cursor = c.cursor
			var news int64
			if c.count {
				tb.NewRows = &news
			}
			commitMerge(t, wh, "r2", tb)
			if news != c.news {
				t.Errorf("%d new rows, want %d", news, c.news)
			}
			var got string
			if err := wh.DB().QueryRow(`SELECT string_agg(id || ':' || name, ' ' ORDER BY id) FROM thing`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("the table holds %s, want %s", got, c.want)
			}
		})
	}
}

// openSmall opens a working database under a small memory limit on the
// given threads, whatever the machine (what DuckDB's statements need
// depends on them), with opts besides, and gives a reading of its current
// limit.
func openSmall(t *testing.T, limit string, threads int, opts ...load.OpenOption) (load.Lake, *load.Warehouse, func() string) {
	t.Helper()
	lake := load.Lake{Root: t.TempDir()}
	wh, err := load.OpenState(context.Background(), lake, append([]load.OpenOption{load.WithMemoryLimit(limit), load.WithThreads(threads)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return lake, wh, func() string {
		t.Helper()
		var s string
		if err := wh.DB().QueryRow(`SELECT current_setting('memory_limit')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestMergeMakesRoomForItsDeletes: merges over a table of a million rows
// under a small configured memory limit, on two threads: one that brings
// every key again (DuckDB's delete of them by one join failed under
// 64 MB) and two that bring one key in 100 each, whose deletes pin every
// vector of the table until the next checkpoint ("could not allocate
// block" under 16 MB without the raise; load's TestDeleteOld has the rule,
// TestDeletePinsOutliveTheRun what outlives a run). The limit keeps room
// for the pins only.
func TestMergeMakesRoomForItsDeletes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("merges over a million rows")
	}
	lake, wh, limit := openSmall(t, "16MB", 2)
	configured := limit()
	const n = 1_000_000
	var spread []int
	for i := 0; i < 2*n; i += 100 {
		spread = append(spread, i)
	}
	commitMerge(t, wh, "r1", stageNamed(t, lake, "r1", map[string][]int{"a": ids(0, n-1)}))
	// The second run's new rows are counted in the join that finds the
	// rows it replaces, under that join's room: half of them changed.
	r2 := stageNamed(t, lake, "r2", map[string][]int{"a": ids(0, n/2-1), "b": ids(n/2, n-1)})
	var news int64
	r2.NewRows = &news
	commitMerge(t, wh, "r2", r2)
	if news != n/2 {
		t.Errorf("the second run: %d new rows, want %d", news, n/2)
	}
	commitMerge(t, wh, "r3", stageNamed(t, lake, "r3", map[string][]int{"c": spread}))
	// What r3's deletes pinned outlives its commit until a checkpoint; a
	// second such merge makes room beside it.
	var again []int
	for i := 50; i < n; i += 100 {
		again = append(again, i)
	}
	commitMerge(t, wh, "r4", stageNamed(t, lake, "r4", map[string][]int{"d": again}))
	// The limit stays raised by the two merges' pins only: each deletes in
	// part (at most) the table's 489 vectors and two more, 20 KiB each.
	if got, most := load.SizeBytes(strings.ReplaceAll(limit(), " ", "")), load.SizeBytes(strings.ReplaceAll(configured, " ", ""))+2*491*20<<10+1<<20; got > most {
		t.Errorf("after the merges the limit is %d, want at most the configured %s and the pins, %d", got, configured, most)
	}
	for _, c := range []struct {
		q    string
		want int64
	}{
		{`SELECT count(*) FROM thing`, n + n/100},
		{`SELECT count(*) FROM thing WHERE name = 'b'`, n/2 - n/100},
		{`SELECT count(*) FROM thing WHERE name = 'a'`, n/2 - n/100},
		{`SELECT count(*) FROM thing WHERE name = 'c'`, 2 * n / 100},
		{`SELECT count(*) FROM thing WHERE name = 'c' AND id % 100 <> 0`, 0},
		{`SELECT count(*) FROM thing WHERE name = 'd' AND id % 100 = 50`, n / 100},
	} {
		if got := count(t, wh.DB(), c.q); got != c.want {
			t.Errorf("%s: %d, want %d", c.q, got, c.want)
		}
	}
}

// TestMergeMakesRoomForItsKeyCheck: a merge of three million rows keyed
// on two text columns, under a small configured limit on two threads.
// Its check for repeated keys counts distinct hashes of the keys under
// the room keyCheckBytes gives it (without it the count fails under
// 16 MB, "could not allocate block", and so did a count grouped by the
// keys themselves); the limit is the configured one after the run.
func TestMergeMakesRoomForItsKeyCheck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("merges three million rows")
	}
	lake, wh, limit := openSmall(t, "16MB", 2)
	configured := limit()
	const n = 3_000_000
	tb := stageWide(t, lake, "r1", 0, n)
	tb.Mode, tb.PrimaryKey = load.Merge, []string{"name", "status"}
	commitMerge(t, wh, "r1", tb)
	if got := limit(); got != configured {
		t.Errorf("after the merge the limit is %s, want the configured %s", got, configured)
	}
	if got := count(t, wh.DB(), `SELECT count(*) FROM thing`); got != n {
		t.Errorf("the table holds %d rows, want %d", got, n)
	}
	if got, want := count(t, wh.DB(), `SELECT sum(id) FROM thing`), int64(n)*(n-1)/2; got != want {
		t.Errorf("the table's ids add up to %d, want %d (each row once)", got, want)
	}
}

// stageWide writes n rows with ids from, in no order, into one Parquet
// file of DuckDB's in run's staging of "thing": names of some 19 bytes
// and statuses of some 10, text that does not repeat.
func stageWide(t *testing.T, lake load.Lake, run string, from, n int) load.Table {
	t.Helper()
	dir := lake.StagingDir(run, "thing", "2026-11-23")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "part-00000.parquet")
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := fmt.Sprintf(`COPY (SELECT i::BIGINT AS id, 'learner-' || i::VARCHAR || '-' || md5(i::VARCHAR)[1:6] AS name,
		0.5::DOUBLE AS pct, 'course-' || (i %% 1000)::VARCHAR AS status, TIMESTAMPTZ '2026-11-23 00:00:00+00' AS at
		FROM range(%d, %d) r(i) ORDER BY hash(i)) TO %s (FORMAT parquet)`, from, from+n, load.Literal(file))
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
	return load.Table{Object: "thing", Schema: schema(t), Files: []string{file}, Rows: int64(n)}
}

// TestCountNewMakesRoom: a replace stream's second day of a million rows,
// 1,000 of them new, counted against the first under a configured limit
// of 16 MB on one thread. The count (an EXCEPT ALL of the rows' hashes)
// runs under the room countBytes gives it (without it the count fails);
// the limit is the configured one after the runs. On two threads the
// count runs on one, and the two come back after it.
func TestCountNewMakesRoom(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("counts a million rows against a million")
	}
	runs := func(t *testing.T, lake load.Lake, wh *load.Warehouse, n int) {
		t.Helper()
		for i, day := range []string{"2026-11-23", "2026-11-24"} {
			id := fmt.Sprintf("r%d", i+1)
			tb := stageWide(t, lake, id, i*1000, n)
			var news int64
			tb.NewRows = &news
			now := time.Date(2026, 11, 23+i, 1, 0, 0, 0, time.UTC)
			run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
			if err := wh.Commit(context.Background(), run, []load.Table{tb}); err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			if want := []int64{int64(n), 1000}[i]; news != want {
				t.Errorf("run %s: %d new rows, want %d", id, news, want)
			}
		}
		if got := count(t, wh.DB(), `SELECT count(*) FROM thing`); got != int64(n) {
			t.Errorf("the table holds %d rows, want %d", got, n)
		}
	}
	lake, wh, limit := openSmall(t, "16MB", 1)
	configured := limit()
	runs(t, lake, wh, 1_000_000)
	if got := limit(); got != configured {
		t.Errorf("after the runs the limit is %s, want the configured %s", got, configured)
	}
	lake, wh, _ = openSmall(t, "64MB", 2)
	runs(t, lake, wh, 10_000)
	if got := count(t, wh.DB(), `SELECT current_setting('threads')`); got != 2 {
		t.Errorf("after the runs DuckDB has %d threads, want the configured 2", got)
	}
}
