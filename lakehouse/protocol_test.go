package lakehouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/sepipe/sepipe/internal/lakeservers"
)

// TestConcurrentWriterConflict: between A's plan and A's commit, a second
// writer (another Lakehouse on the same catalog, as another machine)
// commits to the same table. A's first attempt fails on the stale parent;
// A loads the table again, plans its merge again on top of B's snapshot
// and commits. Both snapshots are in the log and the rows are what the two
// merges in that order make.
func TestConcurrentWriterConflict(t *testing.T) {
	ctx := context.Background()
	cfg := sqliteConfig(t.TempDir())
	a := open(t, cfg)
	b := open(t, cfg)
	spec := TableSpec{Stream: "users", Schema: testSchema(), Mode: Merge, PrimaryKey: []string{"id"}}

	base := makeRows(0, 20, "base")
	stageCommit(t, a, spec, Run{ID: "run-0", Day: days[0]}, base)

	aRows := makeRows(10, 20, "a") // ids 10..29
	bRows := makeRows(15, 20, "b") // ids 15..34, overlapping both
	rdr := reader(t, a.mem, aRows, 8)
	defer rdr.Release()
	inA, err := a.Stage(ctx, spec, Run{ID: "run-a", Day: days[1]}, rdr)
	if err != nil {
		t.Fatal(err)
	}
	var bCommitted bool
	a.beforeCommit = func(ident table.Identifier, attempt int) {
		if attempt == 1 {
			stageCommit(t, b, spec, Run{ID: "run-b", Day: days[1]}, bRows)
			bCommitted = true
		}
	}
	res, err := a.Commit(ctx, inA)
	if err != nil {
		t.Fatal(err)
	}
	if !bCommitted || res.Attempts != 2 || res.Already {
		t.Fatalf("commit result %+v (second writer committed: %v); want 2 attempts", res, bCommitted)
	}
	if got, want := runSummaries(t, a, "", "users"), []string{"run-0", "run-b", "run-a"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot log %v, want %v", got, want)
	}
	want := map[int64]row{}
	for _, r := range stamped(base, days[0], "run-0") {
		want[r.ID] = r
	}
	for _, r := range stamped(bRows, days[1], "run-b") {
		want[r.ID] = r
	}
	for _, r := range stamped(aRows, days[1], "run-a") {
		want[r.ID] = r
	}
	var wl []row
	for _, r := range want {
		wl = append(wl, r)
	}
	sameRows(t, "after the conflict", readTable(t, a, "", "users"), wl)

	// Committing the intent again is a no-op.
	res, err = b.Commit(ctx, inA)
	if err != nil || !res.Already {
		t.Fatalf("second commit of run-a: %+v, %v; want Already", res, err)
	}
	sameRows(t, "after a repeated commit", readTable(t, a, "", "users"), wl)
}

// TestConcurrentAppendsDifferentDays: two writers append different days
// to one table at once; every commit lands once.
func TestConcurrentAppendsDifferentDays(t *testing.T) {
	ctx := context.Background()
	cfg := sqliteConfig(t.TempDir())
	spec := TableSpec{Stream: "events", Schema: testSchema(), Mode: Append}
	a, b := open(t, cfg), open(t, cfg)
	// create the table first, so both writers stage against one
	first := stageCommit(t, a, spec, Run{ID: "run-0", Day: "2024-04-30"}, makeRows(0, 5, "zero"))
	_ = first
	var want []row
	want = append(want, stamped(makeRows(0, 5, "zero"), "2024-04-30", "run-0")...)
	errc := make(chan error, 2)
	for i, l := range []*Lakehouse{a, b} {
		day := days[i]
		run := Run{ID: "run-" + day, Day: day}
		rows := makeRows(int64(100*(i+1)), 30, run.ID)
		want = append(want, stamped(rows, day, run.ID)...)
		go func() {
			rdr := reader(t, l.mem, rows, 10)
			defer rdr.Release()
			in, err := l.Stage(ctx, spec, run, rdr)
			if err == nil {
				_, err = l.Commit(ctx, in)
			}
			errc <- err
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	sameRows(t, "two writers", readTable(t, a, "", "events"), want)
	if n := len(runSummaries(t, a, "", "events")); n != 3 {
		t.Fatalf("%d snapshots, want 3", n)
	}
}

// TestReconcile covers the crashes of the run protocol (stage -> record
// intent -> commit -> mark): a crash before the commit (Reconcile commits
// the recorded intent), after the commit and before the mark (Reconcile
// finds the run's snapshot: nothing twice), and an intent whose files
// were removed (Discard).
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	cfg := sqliteConfig(t.TempDir())
	spec := TableSpec{Stream: "courses", Schema: testSchema(), Mode: Replace}
	l := open(t, cfg)
	stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, makeRows(0, 10, "one"))

	// Crash between stage and commit: a new process reconciles the intent.
	rows2 := makeRows(0, 12, "two")
	rdr := reader(t, l.mem, rows2, 5)
	in2, err := l.Stage(ctx, spec, Run{ID: "run-2", Day: days[1]}, rdr)
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	after := open(t, cfg) // the process after the crash
	rec, err := after.Reconcile(ctx, in2)
	if err != nil || rec.Status != CommittedNow {
		t.Fatalf("reconcile of an uncommitted intent: %+v, %v; want %s", rec, err, CommittedNow)
	}
	// Again (the mark was lost once more): nothing to do.
	rec, err = after.Reconcile(ctx, in2)
	if err != nil || rec.Status != Committed {
		t.Fatalf("second reconcile: %+v, %v; want %s", rec, err, Committed)
	}

	// Crash after commit, before the caller marked it.
	rows3 := makeRows(50, 8, "three")
	in3 := stageCommit(t, l, spec, Run{ID: "run-3", Day: days[2]}, rows3)
	rec, err = after.Reconcile(ctx, in3)
	if err != nil || rec.Status != Committed {
		t.Fatalf("reconcile of a committed intent: %+v, %v; want %s", rec, err, Committed)
	}
	want := append(append(stamped(makeRows(0, 10, "one"), days[0], "run-1"),
		stamped(rows2, days[1], "run-2")...), stamped(rows3, days[2], "run-3")...)
	sameRows(t, "after reconciling", readTable(t, after, "", "courses"), want)
	if got := runSummaries(t, after, "", "courses"); !slices.Equal(got, []string{"run-1", "run-2", "run-3"}) {
		t.Fatalf("snapshot log %v", got)
	}

	// An intent whose files are gone must be discarded.
	rdr = reader(t, l.mem, makeRows(0, 3, "lost"), 5)
	in4, err := l.Stage(ctx, spec, Run{ID: "run-4", Day: days[2]}, rdr)
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(trimFile(in4.Files[0])); err != nil {
		t.Fatal(err)
	}
	rec, err = after.Reconcile(ctx, in4)
	if err != nil || rec.Status != Discard {
		t.Fatalf("reconcile with a file gone: %+v, %v; want %s", rec, err, Discard)
	}
	if err := after.Discard(ctx, in4); err != nil {
		t.Fatal(err)
	}
	// Discard refuses a committed run.
	if err := after.Discard(ctx, in3); err == nil {
		t.Fatal("Discard of a committed intent succeeded")
	}
	sameRows(t, "after discarding", readTable(t, after, "", "courses"), want)
}

// TestSchemaEvolution: across runs a column widens (int -> long, float ->
// double) and new columns appear; every field keeps its id, new fields get
// new ids; rows of earlier runs read back with the new schema; a change
// Iceberg cannot express is a *SchemaChangeError.
func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	l := open(t, sqliteConfig(t.TempDir()))
	mem := memory.DefaultAllocator
	schema := func(idType, scoreType arrow.DataType, extra bool) *arrow.Schema {
		fs := []arrow.Field{{Name: "id", Type: idType, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}
		if scoreType != nil {
			fs = append(fs, arrow.Field{Name: "score", Type: scoreType, Nullable: true})
		}
		if extra {
			fs = append(fs, arrow.Field{Name: "team", Type: picklist, Nullable: true})
		}
		return arrow.NewSchema(fs, nil)
	}
	write := func(s *arrow.Schema, run string, day string, ids ...int64) {
		t.Helper()
		b := array.NewRecordBuilder(mem, s)
		defer b.Release()
		for _, id := range ids {
			switch fb := b.Field(0).(type) {
			case *array.Int32Builder:
				fb.Append(int32(id))
			case *array.Int64Builder:
				fb.Append(id)
			}
			b.Field(1).(*array.StringBuilder).Append(run)
			if s.NumFields() > 2 {
				switch fb := b.Field(2).(type) {
				case *array.Float32Builder:
					fb.Append(float32(id) / 2)
				case *array.Float64Builder:
					fb.Append(float64(id) / 2)
				}
			}
			if s.NumFields() > 3 {
				_ = b.Field(3).(*array.BinaryDictionaryBuilder).AppendString("t")
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		rdr, _ := array.NewRecordReader(s, []arrow.RecordBatch{rec})
		defer rdr.Release()
		spec := TableSpec{Stream: "evolving", Schema: s, Mode: Append}
		in, err := l.Stage(ctx, spec, Run{ID: run, Day: day}, rdr)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		if _, err := l.Commit(ctx, in); err != nil {
			t.Fatalf("%s: %v", run, err)
		}
	}
	ids := func() map[string]int {
		tbl, err := l.LoadTable(ctx, "", "evolving")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, f := range tbl.Schema().Fields() {
			out[f.Name+":"+f.Type.String()] = f.ID
		}
		return out
	}
	write(schema(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float32, false), "run-1", days[0], 1, 2)
	v1 := ids()
	write(schema(arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float32, true), "run-2", days[1], 3)
	write(schema(arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, true), "run-3", days[2], 4)
	v3 := ids()
	// A later run without the new columns, and with an int id again: the
	// table keeps long; the values are cast up.
	write(schema(arrow.PrimitiveTypes.Int32, nil, false), "run-4", "2024-05-04", 5)

	if v1["id:int"] == 0 || v1["id:int"] != v3["id:long"] || v1["score:float"] != v3["score:double"] || v1["name:string"] != v3["name:string"] {
		t.Fatalf("field ids moved: before %v, after %v", v1, v3)
	}
	maxOld := 0
	for _, id := range v1 {
		maxOld = max(maxOld, id)
	}
	if v3["team:string"] <= maxOld {
		t.Fatalf("new field team got id %d, not above the old ones (%v)", v3["team:string"], v1)
	}
	got := readTable(t, l, "", "evolving")
	slices.SortFunc(got, func(a, b row) int { return int(a.ID - b.ID) })
	if len(got) != 5 {
		t.Fatalf("read %d rows, want 5: %v", len(got), got)
	}
	for _, r := range got {
		wantScore := float64(r.ID) / 2
		if r.ID == 5 {
			wantScore = 0 // null: run-4 had no score
		}
		wantName := map[int64]string{1: "run-1", 2: "run-1", 3: "run-2", 4: "run-3", 5: "run-4"}[r.ID]
		if r.Score != wantScore || r.Name != wantName {
			t.Errorf("row %+v", r)
		}
		if wantTeam := r.ID == 3 || r.ID == 4; (r.Team == "t") != wantTeam {
			t.Errorf("row %d team %q", r.ID, r.Team)
		}
	}

	// long -> string is no Iceberg promotion.
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	_, err := l.NewStageWriter(ctx, TableSpec{Stream: "evolving", Schema: bad, Mode: Append}, Run{ID: "run-5", Day: days[0]})
	var sce *SchemaChangeError
	if !errors.As(err, &sce) || sce.Column != "id" || sce.From != "long" || sce.To != "string" {
		t.Fatalf("long -> string: %v; want a *SchemaChangeError for id", err)
	}
}

// TestExpire: after reruns have replaced a day several times, Expire keeps
// the current snapshot only, deletes the data files no snapshot needs any
// more and the staged files of a run that never committed, and the table
// still reads back whole.
func TestExpire(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := open(t, sqliteConfig(dir))
	spec := TableSpec{Stream: "courses", Schema: testSchema(), Mode: Replace}
	var old []string
	var last []row
	for i := range 4 {
		run := Run{ID: "run-" + string(rune('a'+i)), Day: days[0]}
		rows := makeRows(int64(i*10), 10, run.ID)
		in := stageCommit(t, l, spec, run, rows)
		if i < 3 {
			old = append(old, in.Files...)
		}
		last = stamped(rows, days[0], run.ID)
	}
	// A run that staged and never committed.
	rdr := reader(t, l.mem, makeRows(0, 3, "orphan"), 3)
	orphan, err := l.Stage(ctx, spec, Run{ID: "run-x", Day: days[0]}, rdr)
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(slices.Clone(old), orphan.Files...) {
		if _, err := os.Stat(trimFile(p)); err != nil {
			t.Fatalf("before expiring: %v", err)
		}
	}
	time.Sleep(20 * time.Millisecond) // everything is now older than the cutoff
	res, err := l.Expire(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].SnapshotsBefore != 4 || res[0].SnapshotsAfter != 1 {
		t.Fatalf("expire result %+v; want 4 snapshots down to 1", res)
	}
	for _, p := range append(slices.Clone(old), orphan.Files...) {
		if _, err := os.Stat(trimFile(p)); !os.IsNotExist(err) {
			t.Errorf("%s survived expiry (%v)", p, err)
		}
	}
	if !slices.ContainsFunc(res[0].OrphanLocations, func(p string) bool { return trimFile(p) == trimFile(orphan.Files[0]) }) {
		t.Errorf("orphans removed %v, want the uncommitted run's file %s", res[0].OrphanLocations, orphan.Files[0])
	}
	sameRows(t, "after expiring", readTable(t, l, "", "courses"), last)
	// The expired runs' intents can no longer be proven uncommitted.
	rec, err := l.Reconcile(ctx, orphan)
	if err != nil || rec.Status != Discard {
		t.Fatalf("reconcile after expiry: %+v, %v; want %s", rec, err, Discard)
	}
}

// TestEmptyRuns: a run with no rows on a new day changes nothing; a rerun
// with no rows empties its day's partition of a replace table, in one
// snapshot carrying its run id.
func TestEmptyRuns(t *testing.T) {
	ctx := context.Background()
	l := open(t, sqliteConfig(t.TempDir()))
	spec := TableSpec{Stream: "courses", Schema: testSchema(), Mode: Replace}
	in := stageCommit(t, l, spec, Run{ID: "run-0", Day: days[0]}, nil)
	if len(in.Files) != 0 {
		t.Fatalf("an empty run staged files %v", in.Files)
	}
	if got := runSummaries(t, l, "", "courses"); len(got) != 0 {
		t.Fatalf("an empty run made snapshots %v", got)
	}
	rows := makeRows(0, 5, "one")
	stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, rows)
	stageCommit(t, l, spec, Run{ID: "run-2", Day: days[1]}, rows)
	stageCommit(t, l, spec, Run{ID: "run-3", Day: days[0]}, nil)
	sameRows(t, "after an empty rerun", readTable(t, l, "", "courses"), stamped(rows, days[1], "run-2"))
	if got := runSummaries(t, l, "", "courses"); !slices.Equal(got, []string{"run-1", "run-2", "run-3"}) {
		t.Fatalf("snapshot log %v", got)
	}
	_ = ctx
}

// TestRebuildReplacesEveryDay: a full refresh's intent (Rebuild) leaves
// the table holding the run's rows alone, every earlier day's gone, for
// append and merge tables; the commit survives its JSON and stays
// idempotent.
func TestRebuildReplacesEveryDay(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []Mode{Append, Merge} {
		t.Run(string(mode), func(t *testing.T) {
			l := open(t, sqliteConfig(t.TempDir()))
			spec := TableSpec{Stream: "events", Schema: testSchema(), Mode: mode}
			if mode == Merge {
				spec.PrimaryKey = []string{"id"}
			}
			stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, makeRows(0, 20, "one"))
			stageCommit(t, l, spec, Run{ID: "run-2", Day: days[1]}, makeRows(100, 20, "two"))

			rows := makeRows(0, 7, "three") // the service now has fewer rows
			rdr := reader(t, l.mem, rows, 3)
			defer rdr.Release()
			in, err := l.Stage(ctx, spec, Run{ID: "run-3", Day: days[2]}, rdr)
			if err != nil {
				t.Fatal(err)
			}
			in.Rebuild = true
			b, _ := json.Marshal(in)
			var back Intent
			if err := json.Unmarshal(b, &back); err != nil || !back.Rebuild {
				t.Fatalf("Rebuild did not survive JSON: %s", b)
			}
			for range 2 { // the second is a no-op: the run is in the log
				if _, err := l.Commit(ctx, back); err != nil {
					t.Fatal(err)
				}
			}
			sameRows(t, "rebuilt", readTable(t, l, "", "events"), stamped(rows, days[2], "run-3"))
		})
	}
}

// TestTables: the stream names of a namespace's tables, sorted; none for a
// namespace no run has made.
func TestTables(t *testing.T) {
	l := open(t, sqliteConfig(t.TempDir()))
	for _, s := range []string{"users", "events"} {
		stageCommit(t, l, TableSpec{Stream: s, Schema: testSchema(), Mode: Append}, Run{ID: "run-1", Day: days[0]}, makeRows(0, 3, "x"))
	}
	if got, err := l.Tables(context.Background(), ""); err != nil || !slices.Equal(got, []string{"events", "users"}) {
		t.Errorf("tables %v, %v", got, err)
	}
	if got, err := l.Tables(context.Background(), "nobody"); err != nil || got != nil {
		t.Errorf("tables of a namespace never made: %v, %v", got, err)
	}
}

// TestMergeCompositeKeyWithNUL pins that a composite key's rendering
// (keyOf) is unambiguous: keys ("x\x00y","z") and ("x","y\x00z") are two
// keys, so merging the second leaves the first's row (joined with a NUL
// they were one key, and the merge removed the other's row).
func TestMergeCompositeKeyWithNUL(t *testing.T) {
	ctx := context.Background()
	l := open(t, sqliteConfig(t.TempDir()))
	s := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	spec := TableSpec{Stream: "pairs", Schema: s, Mode: Merge, PrimaryKey: []string{"a", "b"}}
	write := func(run, day string, a, b []string, v []int64) {
		t.Helper()
		bld := array.NewRecordBuilder(l.mem, s)
		defer bld.Release()
		bld.Field(0).(*array.StringBuilder).AppendValues(a, nil)
		bld.Field(1).(*array.StringBuilder).AppendValues(b, nil)
		bld.Field(2).(*array.Int64Builder).AppendValues(v, nil)
		rec := bld.NewRecordBatch()
		defer rec.Release()
		rdr, _ := array.NewRecordReader(s, []arrow.RecordBatch{rec})
		defer rdr.Release()
		in, err := l.Stage(ctx, spec, Run{ID: run, Day: day}, rdr)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		if _, err := l.Commit(ctx, in); err != nil {
			t.Fatalf("%s: %v", run, err)
		}
	}
	write("run-1", days[0], []string{"x\x00y", "p"}, []string{"z", "q"}, []int64{1, 2})
	write("run-2", days[1], []string{"x"}, []string{"y\x00z"}, []int64{3})
	tbl, err := l.LoadTable(ctx, "", "pairs")
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	var vs []int64
	for _, ch := range at.Column(at.Schema().FieldIndices("v")[0]).Data().Chunks() {
		vs = append(vs, ch.(*array.Int64).Int64Values()...)
	}
	slices.Sort(vs)
	if !slices.Equal(vs, []int64{1, 2, 3}) {
		t.Fatalf("merge table holds the rows of v %v, want [1 2 3] (three distinct keys)", vs)
	}
}

// TestReconcileDiscardsAStagedFileCutShort: a run recorded its intent and
// died, and a staged file is empty or cut short (the machine went down
// before the OS wrote out a file the run had closed). Reconcile reported
// an error (parquet: file too small) on every call, so every later sync
// of the tenant failed while settling it; now the intent is Discard,
// naming the file, and Discard removes its files. The table is unchanged.
func TestReconcileDiscardsAStagedFileCutShort(t *testing.T) {
	ctx := context.Background()
	l := open(t, sqliteConfig(t.TempDir()))
	spec := TableSpec{Stream: "courses", Schema: testSchema(), Mode: Merge, PrimaryKey: []string{"id"}}
	want := stamped(makeRows(0, 10, "one"), days[0], "run-1")
	stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, makeRows(0, 10, "one"))
	for i, cut := range []func(int64) int64{func(int64) int64 { return 0 }, func(n int64) int64 { return n / 2 }, func(n int64) int64 { return n - 1 }} {
		rdr := reader(t, l.mem, makeRows(5, 10, "two"), 5)
		in, err := l.Stage(ctx, spec, Run{ID: fmt.Sprintf("run-cut-%d", i), Day: days[1]}, rdr)
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
		p := trimFile(in.Files[len(in.Files)-1])
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, cut(fi.Size())); err != nil {
			t.Fatal(err)
		}
		rec, err := l.Reconcile(ctx, in)
		if err != nil || rec.Status != Discard || !strings.Contains(rec.Reason, in.Files[len(in.Files)-1]) {
			t.Fatalf("reconcile with staged file cut to %d of %d bytes: %+v, %v; want %s naming the file", cut(fi.Size()), fi.Size(), rec, err, Discard)
		}
		if err := l.Discard(ctx, in); err != nil {
			t.Fatal(err)
		}
		for _, f := range in.Files {
			if _, err := os.Stat(trimFile(f)); !os.IsNotExist(err) {
				t.Errorf("discarded file %s is still there (%v)", f, err)
			}
		}
	}
	sameRows(t, "after discarding", readTable(t, l, "", "courses"), want)
}

// TestReconcileKeepsAnIntentWhoseFileCannotBeReadForNow: a staged file
// that is whole, whose reading fails for a moment (S3 answers 503 to the
// footer's read, as it does under load), is not proof that the file is
// cut short: Reconcile returns an error and the intent stays for the next
// run, which commits it. It said Discard (not readable Parquet), and the
// caller removed the run's files: the table lacked the run's rows.
func TestReconcileKeepsAnIntentWhoseFileCannotBeReadForNow(t *testing.T) {
	s3 := lakeservers.StartS3(t)
	s3.CreateBucket(t, "lake")
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	var failed atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Ranged reads of a data file but the 8 bytes of its tail: the
		// footer's read fails (every try of it).
		if failing.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, ".parquet") && r.Header.Get("Range") != "" {
			var from, to int64
			if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to); err != nil || to-from+1 != 8 {
				failed.Add(1)
				http.Error(w, "SlowDown", http.StatusServiceUnavailable)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	pathStyle := true
	cfg := sqliteConfig(t.TempDir())
	cfg.Warehouse = "s3://lake/sepipe"
	cfg.S3 = S3Config{Endpoint: srv.URL, Region: s3.Region, PathStyle: &pathStyle}
	l := open(t, cfg)
	ctx := context.Background()
	spec := TableSpec{Stream: "courses", Schema: testSchema(), Mode: Merge, PrimaryKey: []string{"id"}}
	stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, makeRows(0, 10, "one"))
	rdr := reader(t, l.mem, makeRows(5, 10, "two"), 5)
	in, err := l.Stage(ctx, spec, Run{ID: "run-2", Day: days[1]}, rdr)
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	rec, err := l.Reconcile(ctx, in)
	failing.Store(false)
	if failed.Load() == 0 {
		t.Fatal("no read of a staged file failed: the test did not test")
	}
	if err == nil {
		t.Fatalf("reconcile while S3 failed the staged file's reads: %+v, want an error (the intent kept for the next run)", rec)
	}
	rec, err = l.Reconcile(ctx, in)
	if err != nil || rec.Status != CommittedNow {
		t.Fatalf("reconcile once S3 answers: %+v, %v; want %s", rec, err, CommittedNow)
	}
	if got := readTable(t, l, "", "courses"); len(got) != 15 {
		t.Errorf("the table holds %d rows, want 15", len(got))
	}
}
