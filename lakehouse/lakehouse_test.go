package lakehouse

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/sepipe/sepipe/internal/lakeservers"
)

var days = []string{"2024-05-01", "2024-05-02", "2024-05-03"}

// threeDays writes three days into a replace, an append and a merge
// table (day 2 is synced twice: the rerun replaces the day's rows of the
// replace and append tables, and merges again), reads every table back
// through the catalog after each run and compares it row for row with a
// model of what was written.
func threeDays(t *testing.T, l *Lakehouse) {
	ctx := context.Background()
	specs := map[Mode]TableSpec{
		Replace: {Stream: "courses", Schema: testSchema(), Mode: Replace, PrimaryKey: []string{"id"}},
		Append:  {Stream: "events", Schema: testSchema(), Mode: Append},
		Merge:   {Stream: "users", Schema: testSchema(), Mode: Merge, PrimaryKey: []string{"id"}},
	}
	replaceWant := map[string][]row{} // by day
	appendWant := map[string][]row{}  // by day
	mergeWant := map[int64]row{}      // by key
	var runs []string
	type sync struct{ day, run string }
	var syncs []sync
	for i, d := range days {
		syncs = append(syncs, sync{d, fmt.Sprintf("run-%d", i+1)})
		if i == 1 {
			syncs = append(syncs, sync{d, "run-2b"}) // a rerun of day 2
		}
	}
	for n, s := range syncs {
		run := Run{ID: s.run, Day: s.day}
		runs = append(runs, s.run)
		// replace: 40 rows, different each sync
		rr := makeRows(int64(n*10), 40, s.run)
		stageCommit(t, l, specs[Replace], run, rr)
		replaceWant[s.day] = stamped(rr, s.day, s.run)
		// append: 25 new event rows per sync
		ar := makeRows(int64(1000+n*25), 25, s.run)
		stageCommit(t, l, specs[Append], run, ar)
		appendWant[s.day] = stamped(ar, s.day, s.run)
		// merge: ids overlap the earlier syncs' (updates) and add new ones
		mr := makeRows(int64(n*15), 30, s.run)
		stageCommit(t, l, specs[Merge], run, mr)
		for _, r := range stamped(mr, s.day, s.run) {
			mergeWant[r.ID] = r
		}

		flat := func(m map[string][]row) []row {
			var out []row
			for _, d := range slices.Sorted(mapsKeys(m)) {
				out = append(out, m[d]...)
			}
			return out
		}
		sameRows(t, "replace table after "+s.run, readTable(t, l, "", "courses"), flat(replaceWant))
		sameRows(t, "append table after "+s.run, readTable(t, l, "", "events"), flat(appendWant))
		var mw []row
		for _, id := range slices.Sorted(mapsKeys(mergeWant)) {
			mw = append(mw, mergeWant[id])
		}
		sameRows(t, "merge table after "+s.run, readTable(t, l, "", "users"), mw)
	}
	// One snapshot per commit, each carrying its run id.
	for _, stream := range []string{"courses", "events", "users"} {
		if got := runSummaries(t, l, "", stream); !slices.Equal(got, runs) {
			t.Errorf("%s: snapshots carry runs %v, want %v", stream, got, runs)
		}
	}
	// The merge table holds each key once.
	seen := map[int64]bool{}
	for _, r := range readTable(t, l, "", "users") {
		if seen[r.ID] {
			t.Fatalf("merge table holds id %d twice", r.ID)
		}
		seen[r.ID] = true
	}
	// A replace partition's rerun removed the first run's files.
	tbl, err := l.LoadTable(ctx, "", "courses")
	if err != nil {
		t.Fatal(err)
	}
	if s := tbl.CurrentSnapshot(); s.Summary.Operation != "overwrite" && s.Summary.Operation != "append" {
		t.Errorf("replace table's last operation is %s", s.Summary.Operation)
	}
}

func mapsKeys[K cmp.Ordered, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestThreeDaysSQLiteFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	l := open(t, sqliteConfig(t.TempDir()), WithAllocator(mem), WithRowsPerFile(16))
	threeDays(t, l)
}

// TestThreeDaysS3 is the same on a real S3 server (versitygw) through
// the SQLite catalog, credentials from the standard AWS environment.
func TestThreeDaysS3(t *testing.T) {
	s3 := lakeservers.StartS3(t)
	s3.CreateBucket(t, "lake")
	dir := t.TempDir()
	pathStyle := true
	cfg := sqliteConfig(dir)
	cfg.Warehouse = "s3://lake/sepipe"
	cfg.S3 = S3Config{Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: &pathStyle}
	l := open(t, cfg, WithRowsPerFile(16))
	threeDays(t, l)
	// Every file the tables reference is an object of the bucket.
	objects := map[string]bool{}
	for _, o := range s3.Objects(t, "lake", "sepipe") {
		objects["s3://lake/"+o] = true
	}
	for _, stream := range []string{"courses", "events", "users"} {
		tbl, err := l.LoadTable(context.Background(), "", stream)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := tbl.Scan().PlanFiles(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if p := task.File.FilePath(); !objects[p] {
				t.Errorf("%s references %s, which is not an object of the bucket", stream, p)
			}
		}
	}
	objs := s3.Objects(t, "lake", "sepipe")
	var data int
	for _, o := range objs {
		if slices.Contains([]string{".parquet"}, o[len(o)-8:]) {
			data++
		}
	}
	if data == 0 {
		t.Fatalf("no data files in the bucket: %v", objs)
	}
	t.Logf("%d objects in the bucket, %d parquet", len(objs), data)
}

// TestSQLiteCatalogPathIsTheFileOpened pins that the SQLite catalog is
// the file catalog.uri names, whatever its path holds: Validate accepts a
// plain path with '#' or '%', and SQLite's URI reading cut the path at
// '#' and decoded %XX, so another file was opened silently (sqliteFileURI).
func TestSQLiteCatalogPathIsTheFileOpened(t *testing.T) {
	for _, name := range []string{filepath.Join("lake#1", "catalog.db"), filepath.Join("100%41 b", "catalog.db")} {
		dir := t.TempDir()
		cfg := sqliteConfig(dir)
		cfg.Catalog.URI = filepath.Join(dir, name)
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("catalog.uri %s: %v", cfg.Catalog.URI, err)
		}
		l := open(t, cfg)
		stageCommit(t, l, TableSpec{Stream: "events", Schema: testSchema(), Mode: Append}, Run{ID: "run-1", Day: days[0]}, makeRows(0, 3, "x"))
		var files []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(p, "warehouse") {
				files = append(files, strings.TrimPrefix(p, dir))
			}
			return nil
		})
		fi, err := os.Stat(cfg.Catalog.URI)
		if err != nil || fi.Size() == 0 {
			t.Fatalf("catalog.uri %s is not the catalog (%v); the folder holds %v", cfg.Catalog.URI, err, files)
		}
		db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(cfg.Catalog.URI)}).EscapedPath()+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = db.QueryRow(`SELECT count(*) FROM iceberg_tables WHERE table_name = 'events'`).Scan(&n)
		db.Close()
		if err != nil || n != 1 {
			t.Errorf("catalog.uri %s: its iceberg_tables lists events %d times (%v); the folder holds %v", cfg.Catalog.URI, n, err, files)
		}
	}
}

// TestDayPartitionWithAColumnNamedLikeIt pins that with partition: day
// the partition field's name is no column's (dayPartitionFor): it was
// <day column>_day, which Iceberg refused for a stream with a field of
// that name, so the stream never got a table. The table takes a run and
// reads back.
func TestDayPartitionWithAColumnNamedLikeIt(t *testing.T) {
	cfg := sqliteConfig(t.TempDir())
	cfg.Partition = PartitionDay
	l := open(t, cfg)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "snapshot_date_day", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ctx := context.Background()
	w, err := l.NewStageWriter(ctx, TableSpec{Stream: "t", Schema: s, Mode: Append}, Run{ID: "run-1", Day: days[0]})
	if err != nil {
		t.Fatalf("stage a stream with a field snapshot_date_day: %v", err)
	}
	bld := array.NewRecordBuilder(l.mem, s)
	defer bld.Release()
	bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	bld.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, w.Intent()); err != nil {
		t.Fatal(err)
	}
	tbl, err := l.LoadTable(ctx, "", "t")
	if err != nil {
		t.Fatal(err)
	}
	if spec := tbl.Spec(); spec.Field(0).Name != "_snapshot_date_day" {
		f := spec.Field(0)
		t.Errorf("partition field %q, want _snapshot_date_day", f.Name)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	if at.NumRows() != 2 {
		t.Errorf("the table holds %d rows, want 2", at.NumRows())
	}
}

// TestDayColumnBesideAFieldNamedLikeItInAnotherCase pins that a stream
// with a field Snapshot_Date gets the day column _sepipe_snapshot_date, as
// a field snapshot_date does and as the warehouse's history table does
// (DuckDB ignores case): the table had both Snapshot_Date and
// snapshot_date, which engines that ignore case (Spark, Trino) cannot
// tell apart.
func TestDayColumnBesideAFieldNamedLikeItInAnotherCase(t *testing.T) {
	l := open(t, sqliteConfig(t.TempDir()))
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "Snapshot_Date", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ctx := context.Background()
	w, err := l.NewStageWriter(ctx, TableSpec{Stream: "t", Schema: s, Mode: Append}, Run{ID: "run-1", Day: days[0]})
	if err != nil {
		t.Fatal(err)
	}
	bld := array.NewRecordBuilder(l.mem, s)
	defer bld.Release()
	bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	bld.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := w.Intent()
	if in.DayColumn != DayColumnAlt {
		t.Errorf("the intent's day column is %q, want %q", in.DayColumn, DayColumnAlt)
	}
	if _, err := l.Commit(ctx, in); err != nil {
		t.Fatal(err)
	}
	tbl, err := l.LoadTable(ctx, "", "t")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, f := range tbl.Schema().Fields() {
		if other, ok := seen[strings.ToLower(f.Name)]; ok {
			t.Errorf("the table has columns %q and %q, equal ignoring case", other, f.Name)
		}
		seen[strings.ToLower(f.Name)] = f.Name
	}
	at, err := tbl.Scan(table.WithSelectedFields("Snapshot_Date", DayColumnAlt)).ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	if at.NumRows() != 2 {
		t.Errorf("the table holds %d rows, want 2", at.NumRows())
	}
}

// TestWarehouseWithHashOrQueryIsRefused pins that a warehouse location
// holding '#' or '?' is refused, naming warehouse. Validate accepted
// file:///srv/lake#1, and iceberg-go reads file locations as URLs, cutting
// the path there: every metadata and data file of every table was written
// to the one file /srv/lake (the commit then failed with a nil pointer
// dereference); engines cut s3:// locations alike (Java's S3URI drops
// the query and fragment). Other odd paths stay accepted and are used.
func TestWarehouseWithHashOrQueryIsRefused(t *testing.T) {
	for _, wh := range []string{"lake#1", "lake?x=1"} {
		for _, loc := range []string{"file://" + filepath.Join(t.TempDir(), wh), "s3://bucket/" + wh} {
			cfg := sqliteConfig(t.TempDir())
			cfg.Warehouse = loc
			cfg.SetDefaults()
			var ce *ConfigError
			if err := cfg.Validate(); !errors.As(err, &ce) || ce.Key != "warehouse" {
				t.Errorf("warehouse %s: Validate says %v, want a *ConfigError naming warehouse", loc, err)
			}
			if l, err := Open(context.Background(), cfg); err == nil {
				l.Close()
				t.Errorf("warehouse %s: Open accepts it", loc)
			}
		}
	}
	dir := t.TempDir()
	cfg := sqliteConfig(dir)
	cfg.Warehouse = "file://" + filepath.Join(dir, "my lake, 1")
	l := open(t, cfg)
	stageCommit(t, l, TableSpec{Stream: "events", Schema: testSchema(), Mode: Append}, Run{ID: "run-1", Day: days[0]}, makeRows(0, 3, "x"))
	if got := readTable(t, l, "", "events"); len(got) != 3 {
		t.Errorf("warehouse %s: the table reads %d rows, want 3", cfg.Warehouse, len(got))
	}
	if _, err := os.Stat(filepath.Join(dir, "my lake, 1", "sepipe.db", "events", "metadata")); err != nil {
		t.Errorf("warehouse %s: the table is not in its folder: %v", cfg.Warehouse, err)
	}
}
