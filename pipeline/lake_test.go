package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/lakeservers"
	"github.com/sepipe/sepipe/internal/longtest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// fileLake is an Iceberg lake on the local disk: a SQLite catalog and a
// file:// warehouse under dir.
func fileLake(dir string) *lakehouse.Config {
	return &lakehouse.Config{
		Catalog:   lakehouse.CatalogConfig{Type: lakehouse.CatalogSQL, Driver: lakehouse.DriverSQLite, URI: filepath.Join(dir, "catalog.db")},
		Warehouse: "file://" + filepath.Join(dir, "warehouse"),
	}
}

// lakeTables lists the tables of the lake's namespace.
func lakeTables(t *testing.T, lh *lakehouse.Lakehouse) []string {
	t.Helper()
	out, err := lh.Tables(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exportLakeTable reads a table's current snapshot through the catalog
// (iceberg-go's scan) and writes it to a Parquet file for DuckDB to
// compare; "" when the table has no snapshot.
func exportLakeTable(t *testing.T, lh *lakehouse.Lakehouse, stream, dir string) string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, "", stream)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.CurrentSnapshot() == nil {
		return ""
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scan %s: %v", stream, err)
	}
	defer at.Release()
	p := filepath.Join(dir, stream+".parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pqarrow.WriteTable(at, f, 64<<10, parquet.NewWriterProperties(parquet.WithAllocator(memory.DefaultAllocator)), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatalf("export %s: %v", stream, err)
	}
	return p
}

// localFile maps a file:// warehouse's data file location to its path.
func localFile(loc string) string { return strings.TrimPrefix(loc, "file://") }

// dataFiles lists the local paths of the data files of a table's current
// snapshot (iceberg-go plans them; no delete files, as sepipe writes
// none), for an independent reader: DuckDB's read_parquet.
func dataFiles(t *testing.T, lh *lakehouse.Lakehouse, stream string, local func(string) string) []string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), "", stream)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		if len(task.DeleteFiles) > 0 {
			t.Errorf("table %s: delete files %v", stream, task.DeleteFiles)
		}
		out = append(out, local(task.File.FilePath()))
	}
	return out
}

// sameLakeAsWarehouse requires every Iceberg table to hold what the
// warehouse of out holds, row for row (EXCEPT ALL both ways, so no row is
// missing or doubled) and day for day: a replace or append stream's table
// equals its history table (every day's rows), a merge stream's table
// equals the warehouse's table. Each table is read through the catalog
// (iceberg-go's scan) and, when local maps data file locations to paths,
// by DuckDB's own Parquet reader over the current snapshot's data files.
// It returns the rows compared per table.
func sameLakeAsWarehouse(t *testing.T, out string, lc *lakehouse.Config, modes map[string]load.WriteMode, local func(string) string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	lh, err := lakehouse.Open(ctx, *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	db := warehousetest.Open(t, out)
	var whTables []string
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_catalog = 'warehouse' AND NOT starts_with(table_name, '_sepipe') AND NOT ends_with(table_name, '_history') AND NOT ends_with(table_name, '_versions') AND table_name <> ? ORDER BY 1`, load.EventsTable)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		whTables = append(whTables, n)
	}
	rows.Close()
	got := lakeTables(t, lh)
	if fmt.Sprint(got) != fmt.Sprint(whTables) {
		t.Fatalf("lake tables %v, warehouse tables %v", got, whTables)
	}
	dir := t.TempDir()
	counts := map[string]int64{}
	for _, tb := range got {
		wh, whDay := "warehouse.main."+load.Ident(load.HistoryTable(tb)), "snapshot_date"
		if modes[tb] == load.Merge {
			wh, whDay = "warehouse.main."+load.Ident(tb), load.ColSnapshotDate
		}
		p := exportLakeTable(t, lh, tb, dir)
		if p == "" { // no run committed a row: no snapshot
			if n := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+wh); n != 0 {
				t.Errorf("lake table %s has no snapshot; the warehouse has %d rows", tb, n)
			}
			counts[tb] = 0
			continue
		}
		lake := "read_parquet(" + load.Literal(p) + ")"
		var lakeSel, whSel []string
		cols, err := db.Query(`SELECT column_name FROM (DESCRIBE SELECT * FROM ` + lake + `) ORDER BY column_name`)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var c string
			cols.Scan(&c)
			if c == load.ColRunID {
				continue
			}
			w := c
			if c == lakehouse.DayColumn {
				w = whDay
			}
			lakeSel = append(lakeSel, "CAST("+load.Ident(c)+" AS VARCHAR)")
			whSel = append(whSel, "CAST("+load.Ident(w)+" AS VARCHAR)")
		}
		cols.Close()
		b := fmt.Sprintf("SELECT %s FROM %s", strings.Join(whSel, ", "), wh)
		sources := []string{lake}
		if local != nil {
			var files []string
			for _, f := range dataFiles(t, lh, tb, local) {
				files = append(files, load.Literal(f))
			}
			sources = append(sources, "read_parquet(["+strings.Join(files, ", ")+"], union_by_name = true)")
		}
		for _, src := range sources {
			a := fmt.Sprintf("SELECT %s FROM %s", strings.Join(lakeSel, ", "), src)
			for _, q := range []string{a + " EXCEPT ALL " + b, b + " EXCEPT ALL " + a} {
				if n := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM ("+q+")"); n != 0 {
					t.Errorf("table %s: %d rows differ between the Iceberg lake and the warehouse (%s)", tb, n, q)
				}
			}
		}
		perDay := func(from, day string) string {
			return warehousetest.Scalar[string](t, db, fmt.Sprintf("SELECT coalesce(string_agg(d || ':' || n, ',' ORDER BY d), '') FROM (SELECT CAST(%s AS VARCHAR) d, count(*) n FROM %s GROUP BY 1)", load.Ident(day), from))
		}
		if l, w := perDay(lake, lakehouse.DayColumn), perDay(wh, whDay); l != w {
			t.Errorf("table %s: rows per day %s in the lake, %s in the warehouse", tb, l, w)
		}
		counts[tb] = warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+lake)
	}
	// None left unsettled; one discarded (a rebuild superseded it) shows
	// in the rows compared above, if the table lacks it.
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM warehouse._sepipe_lake_intents WHERE status = 'recorded'`); n != 0 {
		t.Errorf("%d lake intents are recorded and not settled", n)
	}
	return counts
}

// lakeStreams: one stream of each mode (the rest replace).
var lakeStreams = map[string]pipeline.StreamConfig{
	"userCourseProgress": {Mode: load.Merge, PrimaryKey: []string{"userId", "courseId"}, Cursor: "lastModifiedDate", Lookback: time.Hour},
	"course":             {Mode: load.Append},
}

func lakeModes() map[string]load.WriteMode {
	m := map[string]load.WriteMode{}
	for k, v := range lakeStreams {
		m[k] = v.Mode
	}
	return m
}

// syncDays syncs days daily runs of a tenant that changes day by day
// into out and lc.
func syncDays(t *testing.T, out string, lc *lakehouse.Config, days int) {
	t.Helper()
	for d := range days {
		_, c := dayFake(t, d)
		_, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc,
			Now: clock(day1.Add(time.Duration(d) * 24 * time.Hour))})
		if err != nil {
			t.Fatalf("day %d: %v", d+1, err)
		}
	}
}

// TestSyncIntoIceberg syncs three days of the fake into an Iceberg lake
// (a SQLite catalog; a local warehouse, and one on a real S3 server,
// versitygw) and reads every table back through the catalog: each holds
// the warehouse's rows, every day, none twice. A rerun of the last day
// changes nothing.
func TestSyncIntoIceberg(t *testing.T) {
	run := func(t *testing.T, lc *lakehouse.Config, local func(string) string) {
		out := t.TempDir()
		syncDays(t, out, lc, 3)
		counts := sameLakeAsWarehouse(t, out, lc, lakeModes(), local)
		if len(counts) < 3 {
			t.Fatalf("only %d tables: %v", len(counts), counts)
		}
		t.Logf("rows per table: %v", counts)
		// A same-day rerun replaces the day (merge: upserts the same keys).
		_, c := dayFake(t, 2)
		if _, err := pipeline.Sync(context.Background(), c,
			pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day1.Add(48*time.Hour + time.Hour))}); err != nil {
			t.Fatal(err)
		}
		again := sameLakeAsWarehouse(t, out, lc, lakeModes(), local)
		if fmt.Sprint(again) != fmt.Sprint(counts) {
			t.Errorf("after a same-day rerun: %v, want %v", again, counts)
		}
	}
	t.Run("file", func(t *testing.T) { run(t, fileLake(t.TempDir()), localFile) })
	t.Run("s3", func(t *testing.T) {
		lc, local, s3 := s3Lake(t)
		run(t, lc, local)
		if objs := s3.Objects(t, "lake", "sepipe"); len(objs) == 0 {
			t.Error("nothing in the bucket")
		}
	})
}

// s3Lake is an Iceberg lake on a real S3 server (versitygw, bucket lake):
// a SQLite catalog and the warehouse s3://lake/sepipe, and what maps a
// data file's location to its path (the server's POSIX backend holds
// bucket/key as a file).
func s3Lake(t *testing.T) (*lakehouse.Config, func(string) string, *lakeservers.S3) {
	t.Helper()
	s3 := lakeservers.StartS3(t)
	s3.CreateBucket(t, "lake")
	lc := &lakehouse.Config{
		Catalog:   lakehouse.CatalogConfig{Type: lakehouse.CatalogSQL, Driver: lakehouse.DriverSQLite, URI: filepath.Join(t.TempDir(), "catalog.db")},
		Warehouse: "s3://lake/sepipe",
		S3:        lakehouse.S3Config{Endpoint: s3.Endpoint, Region: s3.Region},
	}
	return lc, func(loc string) string { return filepath.Join(s3.Dir, strings.TrimPrefix(loc, "s3://")) }, s3
}

// icebergKillPoints maps each point TestKilledRunsRecoverIceberg kills a
// run at to whether the killed run had committed there.
func icebergKillPoints() map[string]bool {
	return map[string]bool{
		faults.LakeStaged.For("course"): false, faults.Committed.For(""): true,
		faults.LakeCommitted.For("course"): true, faults.LakeCommitted.For("userCourseProgress"): true,
	}
}

// TestKilledRunsRecoverIceberg kills the second of three daily runs that
// also commit to an Iceberg lake (SQLite catalog, local warehouse) at the
// lake's points of the run protocol: after a stream's Iceberg files are
// staged (nothing recorded: the run never happened), after the
// warehouse's transaction recorded the intents (the next run commits
// them), and between a stream's Iceberg commit and its mark (the next run
// finds the run id in the snapshot log and only marks it). After the
// third run the warehouse equals that of the clean sequence with or
// without run 2, and every Iceberg table equals the warehouse: no run is
// lost or committed twice.
func TestKilledRunsRecoverIceberg(t *testing.T) {
	longtest.Skip(t, "spawns processes")
	_, c1 := dayFake(t, 0)
	srv2, c2 := dayFake(t, 1)
	_, c3 := dayFake(t, 2)
	day2, day3 := day1.Add(24*time.Hour), day1.Add(48*time.Hour)
	sync := func(c *extract.Client, out string, lc *lakehouse.Config, day time.Time) {
		t.Helper()
		cfg := killConfig(out, day)
		cfg.Iceberg = lc
		if _, err := pipeline.Sync(context.Background(), c, cfg); err != nil {
			t.Fatal(err)
		}
	}
	modes := map[string]load.WriteMode{}
	for k, v := range killStreams {
		modes[k] = v.Mode
	}
	withRun2, withoutRun2 := t.TempDir(), t.TempDir()
	sync(c1, withRun2, nil, day1)
	sync(c1, withoutRun2, nil, day1)
	sync(c2, withRun2, nil, day2)
	sync(c3, withRun2, nil, day3)
	sync(c3, withoutRun2, nil, day3)

	for at, committed := range icebergKillPoints() {
		t.Run(strings.ReplaceAll(at, " ", "-"), func(t *testing.T) {
			out, lakeDir := t.TempDir(), t.TempDir()
			lc := fileLake(lakeDir)
			sync(c1, out, lc, day1)
			before := committedRuns(t, out)
			cmd := startChild(t, srv2.URL, out, at, day2, "SEPIPE_ICEBERG_DIR="+lakeDir)
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("child was not killed at %q: %v", at, err)
			}
			if got := committedRuns(t, out) > before; got != committed {
				t.Fatalf("killed at %q: committed = %v, want %v", at, got, committed)
			}
			recorded := recordedIntents(t, out)
			switch {
			case !committed && recorded != 0:
				t.Errorf("killed before the commit: %d intents recorded", recorded)
			case committed && recorded == 0:
				t.Errorf("killed at %q after the commit: no intent left to settle", at)
			}
			sync(c3, out, lc, day3)
			if committed {
				sameOutput(t, withRun2, out)
			} else {
				sameOutput(t, withoutRun2, out)
			}
			sameLakeAsWarehouse(t, out, lc, modes, localFile)
			// Each run is one snapshot per table: a run committed twice
			// would be two.
			lh, err := lakehouse.Open(context.Background(), *lc)
			if err != nil {
				t.Fatal(err)
			}
			defer lh.Close()
			for _, tb := range lakeTables(t, lh) {
				tbl, err := lh.LoadTable(context.Background(), "", tb)
				if err != nil {
					t.Fatal(err)
				}
				runs := map[string]int{}
				for _, s := range tbl.Metadata().Snapshots() {
					if s.Summary != nil {
						runs[s.Summary.Properties["sepipe.run-id"]]++
					}
				}
				want := 2
				if committed {
					want = 3
				}
				for run, n := range runs {
					if n != 1 {
						t.Errorf("table %s: run %s has %d snapshots", tb, run, n)
					}
				}
				if len(runs) != want && len(runs) != 0 {
					t.Errorf("table %s: snapshots of %d runs, want %d", tb, len(runs), want)
				}
			}
		})
	}
}

// recordedIntents counts the lake intents of out's working database that
// are recorded and not marked.
func recordedIntents(t *testing.T, out string) int64 {
	t.Helper()
	return warehousetest.StateScalar[int64](t, out, `SELECT count(*) FROM _sepipe_lake_intents WHERE status = 'recorded'`)
}

// TestIcebergSchemaChange: the describe changes between two days: a new
// column of userCourseProgress (Iceberg adds it) and course.durationMinutes
// from int to float, which the warehouse widens under the evolve contract
// but an Iceberg table cannot (long to double is no Iceberg promotion).
// The run fails that stream alone, naming it and the column; every other
// stream commits to both, and the lake still equals the warehouse.
func TestIcebergSchemaChange(t *testing.T) {
	out, lc := t.TempDir(), fileLake(t.TempDir())
	syncDays(t, out, lc, 1)
	s := servicetest.NewServer(servicetest.WithUsers(120), servicetest.WithSchemaDrift(true),
		servicetest.WithNow(servicetest.DefaultNow.Add(24*time.Hour)))
	defer s.Close()
	_, err := pipeline.Sync(context.Background(), client(t, s.URL, s.Service.AccessToken(), extract.WithPageSize(200)),
		pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day1.Add(24 * time.Hour))})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Failed) != 1 {
		t.Fatalf("err = %v, want a partial run with one stream failed", err)
	}
	var sc *lakehouse.SchemaChangeError
	if f := re.Failed[0]; f.Object != "course" || !errors.As(f, &sc) || sc.Column != "durationMinutes" ||
		!strings.Contains(f.Error(), `"course"`) || !strings.Contains(f.Error(), "durationMinutes") {
		t.Fatalf("failed stream: %v (%#v), want course failing on durationMinutes", re.Failed[0], sc)
	}
	sameLakeAsWarehouse(t, out, lc, lakeModes(), localFile)
	lh, err := lakehouse.Open(context.Background(), *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	tbl, err := lh.LoadTable(context.Background(), "", "userCourseProgress")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.Schema().FindFieldByName("certificateId"); !ok {
		t.Errorf("userCourseProgress lacks the new column: %v", tbl.Schema())
	}
}

// TestCancelledRunLeavesNoIcebergFiles: a run cancelled after a stream's
// Iceberg files are staged removes them; no table holds a file of it.
func TestCancelledRunLeavesNoIcebergFiles(t *testing.T) {
	out, lakeDir := t.TempDir(), t.TempDir()
	lc := fileLake(lakeDir)
	s := servicetest.NewServer(servicetest.WithUsers(120))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	staged := &cancelAfter{object: "course", cancel: cancel}
	_, err := pipeline.Sync(ctx, client(t, s.URL, s.Service.AccessToken(), extract.WithPageSize(200)),
		pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day1), Progress: staged})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the run cancelled", err)
	}
	if !staged.done.Load() {
		t.Fatal("course was not staged before the cancel")
	}
	var files []string
	filepath.WalkDir(filepath.Join(lakeDir, "warehouse"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("a cancelled run left Iceberg data files: %v", files)
	}
	// The next run commits normally.
	syncDays(t, out, lc, 1)
	sameLakeAsWarehouse(t, out, lc, lakeModes(), localFile)
}

// cancelAfter cancels the run once object is staged.
type cancelAfter struct {
	object string
	cancel context.CancelFunc
	done   atomic.Bool
}

func (c *cancelAfter) ObjectStarted(string)           {}
func (c *cancelAfter) PageDone(string, int, int, int) {}
func (c *cancelAfter) ObjectDone(r pipeline.ObjectResult) {
	if r.Object == c.object && r.Err == nil {
		c.done.Store(true)
		c.cancel()
	}
}

// TestDeadRunIntentDiscarded: a run dies after recording its intents, and
// one of its staged files is lost before the next run. The next run
// commits the intents it can (Reconcile: CommittedNow) and discards the
// one it cannot: marked discarded with the reason, its other files
// removed, nothing of it in the table.
func TestDeadRunIntentDiscarded(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	out, lakeDir := t.TempDir(), t.TempDir()
	lc := fileLake(lakeDir)
	syncDays(t, out, lc, 1)
	s, _ := dayFake(t, 1)
	cmd := startChild(t, s.URL, out, faults.Committed.For(""), day1.Add(24*time.Hour), "SEPIPE_ICEBERG_DIR="+lakeDir)
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child was not killed")
	}
	wh, err := load.OpenReadOnly(context.Background(), load.Lake{Root: out}.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	var run, js string
	if err := wh.DB().QueryRow(`SELECT run_id, CAST(intent AS VARCHAR) FROM _sepipe_lake_intents WHERE stream = 'course' AND status = 'recorded'`).Scan(&run, &js); err != nil {
		t.Fatal(err)
	}
	wh.Close()
	var in lakehouse.Intent
	if err := json.Unmarshal([]byte(js), &in); err != nil || len(in.Files) == 0 {
		t.Fatalf("intent %s: %v", js, err)
	}
	if err := os.Remove(strings.TrimPrefix(in.Files[0], "file://")); err != nil {
		t.Fatal(err)
	}

	_, c3 := dayFake(t, 2)
	if _, err := pipeline.Sync(context.Background(), c3,
		pipeline.Config{Out: out, Streams: killStreams, Iceberg: lc, Now: clock(day1.Add(48 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	status := warehousetest.Scalar[string](t, db, `SELECT string_agg(stream || '=' || status, ',' ORDER BY stream) FROM _sepipe_lake_intents WHERE run_id = '`+run+`'`)
	if !strings.Contains(status, "course=discarded") || strings.Count(status, "=committed") != strings.Count(status, "=")-1 {
		t.Errorf("the dead run's intents: %s; want course discarded, the others committed", status)
	}
	if r := warehousetest.Scalar[string](t, db, `SELECT reason FROM _sepipe_lake_intents WHERE run_id = '`+run+`' AND stream = 'course'`); !strings.Contains(r, "gone") {
		t.Errorf("reason %q", r)
	}
	for _, f := range in.Files {
		if _, err := os.Stat(strings.TrimPrefix(f, "file://")); !os.IsNotExist(err) {
			t.Errorf("the discarded intent's file %s is still there (%v)", f, err)
		}
	}
	lh, err := lakehouse.Open(context.Background(), *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	tbl, err := lh.LoadTable(context.Background(), "", "course")
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		if snap.Summary != nil && snap.Summary.Properties["sepipe.run-id"] == run {
			t.Errorf("the discarded run has snapshot %d", snap.SnapshotID)
		}
	}
}

// TestHostileTenantIntoIceberg: the hostile tenant's streams (ids that are
// paths, SQL, reserved names; fields that collide by case; hostile
// values) sync into the Iceberg lake as into the warehouse, row for row.
func TestHostileTenantIntoIceberg(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(40), servicetest.WithHostile())
	defer srv.Close()
	out, lc := t.TempDir(), fileLake(t.TempDir())
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: out, Iceberg: lc, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	counts := sameLakeAsWarehouse(t, out, lc, nil, localFile)
	if len(counts) != len(res.Objects) {
		t.Errorf("%d lake tables for %d streams: %v", len(counts), len(res.Objects), counts)
	}
}

// TestIcebergCommitFailureIsPending: the warehouse's transaction commits,
// then the Iceberg commit of one stream fails (its staged files vanished
// in between). The run says so (ErrLakePending), the warehouse and the
// other streams' tables have the run, the failed intent stays recorded,
// and the next run settles it (discarded: it can never be committed).
func TestIcebergCommitFailureIsPending(t *testing.T) {
	out, lakeDir := t.TempDir(), t.TempDir()
	lc := fileLake(lakeDir)
	syncDays(t, out, lc, 1)
	day2 := day1.Add(24 * time.Hour)
	lost := filepath.Join(lakeDir, "warehouse", "sepipe.db", "course", "data", "snapshot_date="+day2.Format(time.DateOnly))
	faults.Set(func(point string) {
		if point == string(faults.Committed) {
			if err := os.RemoveAll(lost); err != nil {
				t.Error(err)
			}
		}
	})
	_, c2 := dayFake(t, 1)
	_, err := pipeline.Sync(context.Background(), c2,
		pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day2)})
	faults.Set(nil)
	if !errors.Is(err, pipeline.ErrLakePending) || !strings.Contains(err.Error(), "course") {
		t.Fatalf("err = %v, want ErrLakePending naming course", err)
	}
	if n := publishedRuns(t, out); n != 2 {
		t.Errorf("the published warehouse has %d runs, want 2", n)
	}
	if n := recordedIntents(t, out); n != 1 {
		t.Errorf("%d intents recorded, want course's", n)
	}
	_, c3 := dayFake(t, 2)
	if _, err := pipeline.Sync(context.Background(), c3,
		pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, Now: clock(day2.Add(24 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	if got := warehousetest.Scalar[string](t, db, `SELECT string_agg(stream || '=' || status, ',' ORDER BY stream) FROM _sepipe_lake_intents WHERE status <> 'committed'`); got != "course=discarded" {
		t.Errorf("intents not committed: %q, want course=discarded", got)
	}
	// course's table lacks day 2, which the run could not commit.
	lh, err := lakehouse.Open(context.Background(), *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	p := exportLakeTable(t, lh, "course", t.TempDir())
	days := warehousetest.Scalar[string](t, db, `SELECT string_agg(DISTINCT CAST(snapshot_date AS VARCHAR), ',' ORDER BY CAST(snapshot_date AS VARCHAR)) FROM read_parquet(`+load.Literal(p)+`)`)
	if days != "2026-11-23,2026-11-25" {
		t.Errorf("course's days in the lake: %s, want day 1 and 3", days)
	}
}

// BenchmarkSyncIceberg measures what the Iceberg lake adds to a sync: the
// fake's userCourseProgress (about 36 000 rows at 3 000 users) synced into
// the output folder alone, and into it and an Iceberg lake (SQLite
// catalog, local warehouse) beside it.
//
//	go test -run '^$' -bench SyncIceberg -benchtime 5x ./pipeline/
func BenchmarkSyncIceberg(b *testing.B) {
	srv := servicetest.NewServer(servicetest.WithUsers(3000))
	defer srv.Close()
	for _, withLake := range []bool{false, true} {
		b.Run(fmt.Sprintf("iceberg=%v", withLake), func(b *testing.B) {
			var rows int64
			for b.Loop() {
				c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithRateLimit(0, 0), extract.WithPageSize(1000))
				if err != nil {
					b.Fatal(err)
				}
				cfg := pipeline.Config{Out: b.TempDir(), Now: clock(day1), Only: []string{"userCourseProgress"}}
				if withLake {
					cfg.Iceberg = fileLake(b.TempDir())
				}
				res, err := pipeline.Sync(context.Background(), c, cfg)
				if err != nil {
					b.Fatal(err)
				}
				rows = res.Objects[0].Rows
			}
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

// TestTwoTenantsIntoOneCatalog: two tenants' runs, each with its own
// output folder and namespace (as `sepipe sync --tenant` makes them), run
// at the same time against one shared PostgreSQL catalog and one S3
// bucket. Each namespace ends up equal to its own tenant's warehouse, row
// for row and day for day, and the two tenants' data never mix.
func TestTwoTenantsIntoOneCatalog(t *testing.T) {
	pg := lakeservers.StartPostgres(t)
	s3 := lakeservers.StartS3(t)
	s3.CreateBucket(t, "lake")
	local := func(loc string) string { return filepath.Join(s3.Dir, strings.TrimPrefix(loc, "s3://")) }
	users := map[string]int{"acme": 120, "globex": 45}
	lakes, outs := map[string]*lakehouse.Config{}, map[string]string{}
	for name := range users {
		lakes[name] = &lakehouse.Config{
			Catalog:   lakehouse.CatalogConfig{Type: lakehouse.CatalogSQL, Driver: lakehouse.DriverPostgres, URI: pg.DSN},
			Warehouse: "s3://lake/sepipe",
			Namespace: name,
			S3:        lakehouse.S3Config{Endpoint: s3.Endpoint, Region: s3.Region},
		}
		outs[name] = t.TempDir()
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(users))
	for name, n := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range 2 {
				s := servicetest.NewServer(servicetest.WithUsers(n), servicetest.WithNow(servicetest.DefaultNow.Add(time.Duration(d)*24*time.Hour)))
				c, err := extract.New(s.URL, extract.WithAccessToken(s.Service.AccessToken()), extract.WithRateLimit(0, 0), extract.WithPageSize(200))
				if err == nil {
					_, err = pipeline.Sync(context.Background(), c, pipeline.Config{Out: outs[name], Streams: lakeStreams, Iceberg: lakes[name],
						Now: clock(day1.Add(time.Duration(d) * 24 * time.Hour))})
				}
				s.Close()
				if err != nil {
					errs <- fmt.Errorf("tenant %s, day %d: %w", name, d+1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	counts := map[string]map[string]int64{}
	for name := range users {
		counts[name] = sameLakeAsWarehouse(t, outs[name], lakes[name], lakeModes(), local)
	}
	if fmt.Sprint(counts["acme"]) == fmt.Sprint(counts["globex"]) {
		t.Errorf("the two tenants' namespaces hold the same rows: %v", counts)
	}
	t.Logf("rows per table: %v", counts)
}

// TestFullRefreshRebuildsIcebergTable: a full refresh of a merge stream
// rebuilds its warehouse table from the run's rows, and its Iceberg table
// with it: rows the service no longer has leave both.
func TestFullRefreshRebuildsIcebergTable(t *testing.T) {
	out, lc := t.TempDir(), fileLake(t.TempDir())
	syncDays(t, out, lc, 2)
	before := sameLakeAsWarehouse(t, out, lc, lakeModes(), localFile)
	// Day 3: the tenant has fewer users (and so fewer progress rows).
	s := servicetest.NewServer(servicetest.WithUsers(40), servicetest.WithNow(servicetest.DefaultNow.Add(48*time.Hour)))
	defer s.Close()
	if _, err := pipeline.Sync(context.Background(), client(t, s.URL, s.Service.AccessToken(), extract.WithPageSize(200)),
		pipeline.Config{Out: out, Streams: lakeStreams, Iceberg: lc, FullRefresh: []string{"userCourseProgress"},
			Now: clock(day1.Add(48 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	after := sameLakeAsWarehouse(t, out, lc, lakeModes(), localFile)
	if after["userCourseProgress"] >= before["userCourseProgress"] {
		t.Errorf("userCourseProgress: %d rows after the full refresh, %d before; want fewer", after["userCourseProgress"], before["userCourseProgress"])
	}
}

// TestModeChangeRebuildsIcebergTable: a stream become a merge stream
// (its warehouse table, a view before, starts afresh from the run's rows)
// has its Iceberg table rebuilt from those rows: the replace days' rows
// stayed beside them, keys repeated (found by review). A replace or append
// stream's Iceberg table is its history, every day, whatever its mode was:
// a change between them keeps the earlier days (a first fix rebuilt those
// too, losing them; found by review), as does an upgrade from a release
// whose replace streams had tables of their own.
func TestModeChangeRebuildsIcebergTable(t *testing.T) {
	merge := pipeline.StreamConfig{Mode: load.Merge, PrimaryKey: []string{"userId"}}
	for _, tc := range []struct {
		name         string
		before, then pipeline.StreamConfig
	}{
		{"replace to merge", pipeline.StreamConfig{}, merge},
		{"replace to append", pipeline.StreamConfig{}, pipeline.StreamConfig{Mode: load.Append}},
		{"append to replace", pipeline.StreamConfig{Mode: load.Append}, pipeline.StreamConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, lc := t.TempDir(), fileLake(t.TempDir())
			for i, step := range []struct {
				users int
				sc    pipeline.StreamConfig
			}{{40, tc.before}, {40, tc.before}, {30, tc.then}} {
				srv := servicetest.NewServer(servicetest.WithUsers(step.users))
				defer srv.Close()
				_, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()),
					pipeline.Config{Out: out, Only: []string{"user"}, Streams: map[string]pipeline.StreamConfig{"user": step.sc},
						Iceberg: lc, Now: clock(day1.Add(time.Duration(i) * 24 * time.Hour))})
				if err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
			}
			counts := sameLakeAsWarehouse(t, out, lc, map[string]load.WriteMode{"user": tc.then.Mode}, localFile)
			if tc.then.Mode == load.Merge && counts["user"] != 30 {
				t.Errorf("stream user, %s: %d rows in the Iceberg table, want the merge run's 30", tc.name, counts["user"])
			}
		})
	}
}

// TestUnwritableWarehouseFailsTheRunAtOnce: an S3 warehouse whose bucket
// does not exist (the catalog itself fine) fails the sync before it reads
// anything, with one error naming the warehouse, and leaves nothing in
// the catalog. Each stream's first write failed instead, one error per
// stream, after the catalog had been given the namespace.
func TestUnwritableWarehouseFailsTheRunAtOnce(t *testing.T) {
	s3 := lakeservers.StartS3(t)
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	lc := &lakehouse.Config{
		Catalog:   lakehouse.CatalogConfig{Type: lakehouse.CatalogSQL, Driver: lakehouse.DriverSQLite, URI: filepath.Join(t.TempDir(), "catalog.db")},
		Warehouse: "s3://nolake/sepipe",
		S3:        lakehouse.S3Config{Endpoint: s3.Endpoint, Region: s3.Region},
	}
	_, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: t.TempDir(), Iceberg: lc, Now: clock(day1)})
	if err == nil || !strings.Contains(err.Error(), "iceberg warehouse s3://nolake/sepipe") || !strings.Contains(err.Error(), "NoSuchBucket") ||
		strings.Count(err.Error(), "NoSuchBucket") != 1 {
		t.Fatalf("sync into a missing bucket: %v\nwant one error naming the warehouse and NoSuchBucket", err)
	}
	lh, err := lakehouse.Open(context.Background(), *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	if ok, err := lh.Catalog().CheckNamespaceExists(context.Background(), []string{lakehouse.DefaultNamespace}); ok || err != nil {
		t.Errorf("the failed sync left namespace %s in the catalog (%v)", lakehouse.DefaultNamespace, err)
	}
}
