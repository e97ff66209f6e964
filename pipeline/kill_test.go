package pipeline_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/longtest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// The kill tests run sync in a child process (this test binary, re-run
// with SEPIPE_KILL_CHILD set) and SIGKILL it, either at a named point of
// the run protocol or after a random delay.
func TestMain(m *testing.M) {
	if os.Getenv("SEPIPE_KILL_CHILD") != "" {
		os.Exit(childSync())
	}
	if os.Getenv("SEPIPE_READER_CHILD") != "" { // the BI tool of readers_test.go
		os.Exit(childReader())
	}
	os.Exit(m.Run())
}

// slowOthers delays every request but those naming its stream.
type slowOthers struct{ stream string }

func (s slowOthers) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, s.stream) {
		time.Sleep(150 * time.Millisecond)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// killStreams is the stream setup of the kill tests: one merge stream with
// a cursor (so state must move with its data), the rest replace.
var killStreams = map[string]pipeline.StreamConfig{
	"userCourseProgress": {Mode: load.Merge, PrimaryKey: []string{"userId", "courseId"}, Cursor: "lastModifiedDate", Lookback: time.Hour},
}

func killConfig(out string, day time.Time) pipeline.Config {
	return pipeline.Config{Out: out, Streams: killStreams, Now: clock(day)}
}

func childSync() int {
	at := os.Getenv("SEPIPE_CRASH_AT")
	committed := false
	faults.Set(func(point string) {
		committed = committed || point == string(faults.Committed)
		// The publish points come twice in a run (the start publishes what
		// an earlier run left, if anything): the named ones are the commit's.
		if point == at && (committed || (at != string(faults.PublishCopied) && at != string(faults.PublishRenamed))) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	opts := []extract.Option{extract.WithAccessToken(servicetest.DefaultAccessToken), extract.WithRateLimit(0, 0), extract.WithPageSize(200)}
	if at == faults.EarlyLoaded.For("userCourseProgress") {
		// The early load must load a file of the stream before the run's
		// fetch ends (the loader drops what it has not loaded then), and
		// the day's incremental read fills one file, finished with the
		// stream: the other streams' requests come slowly, so that the
		// fetch outlasts it whatever else the machine does (under the
		// whole suite the run once ended first: "child was not killed").
		opts = append(opts, extract.WithHTTPClient(&http.Client{Transport: slowOthers{"userCourseProgress"}}))
	}
	c, err := extract.New(os.Getenv("SEPIPE_URL"), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	day, err := time.Parse(time.RFC3339, os.Getenv("SEPIPE_NOW"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := killConfig(os.Getenv("SEPIPE_OUT"), day)
	if dir := os.Getenv("SEPIPE_ICEBERG_DIR"); dir != "" {
		cfg.Iceberg = fileLake(dir)
	}
	if _, err := pipeline.Sync(context.Background(), c, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startChild(t *testing.T, url, out, at string, day time.Time, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SEPIPE_KILL_CHILD=1", "SEPIPE_URL="+url, "SEPIPE_OUT="+out,
		"SEPIPE_CRASH_AT="+at, "SEPIPE_NOW="+day.Format(time.RFC3339))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sameOutput asserts that two output folders hold the same data: every
// object table row for row (sepipe's run ids aside), the incremental
// state, and the lake's partitions row for row; and that got has no
// leftovers of a dead run.
func sameOutput(t *testing.T, want, got string) {
	t.Helper()
	db := warehousetest.Open(t, got)
	if _, err := db.Exec("ATTACH " + load.Literal(filepath.Join(want, "warehouse.duckdb")) + " AS ref (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DETACH ref")
	tables := func(catalog string) []string {
		rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_catalog = ? AND NOT starts_with(table_name, '_sepipe') ORDER BY 1`, catalog)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			out = append(out, n)
		}
		return out
	}
	wantTables, gotTables := tables("ref"), tables("warehouse")
	if fmt.Sprint(wantTables) != fmt.Sprint(gotTables) {
		t.Fatalf("tables %v, want %v", gotTables, wantTables)
	}
	compared := map[string]string{} // table → the columns compared
	for _, tb := range wantTables {
		var cols []string
		rows, _ := db.Query(`SELECT column_name FROM duckdb_columns() WHERE database_name = 'ref' AND table_name = ? AND column_name <> ? ORDER BY column_index`, tb, load.ColRunID)
		for rows.Next() {
			var c string
			rows.Scan(&c)
			if l := strings.ToLower(c); strings.HasSuffix(l, "href") || strings.HasSuffix(l, "url") {
				continue // links: each fake puts its own address in them
			}
			if slices.ContainsFunc(load.VersionColumns, func(v load.VersionColumn) bool { return v.Run && strings.EqualFold(v.Name, c) }) {
				continue // the runs that opened and closed a version: the two folders' runs differ; its days and count are compared
			}
			cols = append(cols, load.Ident(c))
		}
		rows.Close()
		sel := strings.Join(cols, ", ")
		var lakeCols []string // the lake holds no bookkeeping columns
		for _, c := range cols {
			if !strings.HasPrefix(c, `"_sepipe`) {
				lakeCols = append(lakeCols, c)
			}
		}
		compared[tb] = strings.Join(lakeCols, ", ")
		a, b := "ref.main."+load.Ident(tb), "warehouse.main."+load.Ident(tb)
		for _, pair := range [][2]string{{a, b}, {b, a}} {
			q := fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s)", sel, pair[0], sel, pair[1])
			if n := warehousetest.Scalar[int64](t, db, q); n != 0 {
				t.Errorf("table %s: %d rows of %s are not in %s", tb, n, pair[0], pair[1])
			}
		}
	}
	stateQ := func(cat string) string {
		return warehousetest.Scalar[string](t, db, `SELECT coalesce(string_agg(stream || '=' || cursor_field || '@' || watermark, ',' ORDER BY stream), '') FROM `+cat+`._sepipe_state`)
	}
	if w, g := stateQ("ref"), stateQ("warehouse"); w != g {
		t.Errorf("state %q, want %q", g, w)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM warehouse._sepipe_runs WHERE status IN ('succeeded', 'partial') AND NOT published`); n != 0 {
		t.Errorf("%d committed runs are not published", n)
	}
	for _, tb := range wantTables {
		if strings.HasSuffix(tb, "_history") || strings.HasSuffix(tb, "_versions") || tb == load.EventsTable {
			continue // compared as tables above; the lake has the stream's folder (events: none, 'sepipe listen' loads them)
		}
		lw, lg := load.Lake{Root: want}, load.Lake{Root: got}
		pw, _ := lw.Partitions(tb)
		pg, _ := lg.Partitions(tb)
		if fmt.Sprint(pw) != fmt.Sprint(pg) {
			t.Errorf("lake %s: partitions %v, want %v", tb, pg, pw)
			continue
		}
		src := func(root string) string {
			return fmt.Sprintf("read_parquet(%s, hive_partitioning = true)", load.Literal(filepath.Join(root, "lake", tb, "*", "*.parquet")))
		}
		for _, pair := range [][2]string{{src(want), src(got)}, {src(got), src(want)}} {
			q := fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s)", compared[tb], pair[0], compared[tb], pair[1])
			if n := warehousetest.Scalar[int64](t, db, q); n != 0 {
				t.Errorf("lake %s: %d rows differ", tb, n)
			}
		}
		ents, _ := os.ReadDir(lg.ObjectDir(tb))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("lake %s: leftover %s", tb, e.Name())
			}
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(got, ".sepipe", "staging")); len(ents) != 0 {
		t.Errorf("staging left behind: %v", ents)
	}
}

// TestKilledRunsRecover kills the second of three daily runs at every
// named point of the run protocol and at random moments. The tenant changes
// between runs (three fakes at three clock readings), so a lost, doubled or
// unfinished run shows. After the third run the output must equal that of
// the clean sequence run1, run2, run3 when the killed run had committed,
// and of run1, run3 when it had not: the warehouse was as before the run or
// as after it, never between.
func TestKilledRunsRecover(t *testing.T) {
	longtest.Skip(t, "spawns many processes")
	_, c1 := dayFake(t, 0)
	srv2, c2 := dayFake(t, 1)
	_, c3 := dayFake(t, 2)
	day2, day3 := day1.Add(24*time.Hour), day1.Add(48*time.Hour)
	ctx := context.Background()
	sync := func(c *extract.Client, out string, day time.Time) {
		t.Helper()
		if _, err := pipeline.Sync(ctx, c, killConfig(out, day)); err != nil {
			t.Fatal(err)
		}
	}

	base, withRun2, withoutRun2 := t.TempDir(), t.TempDir(), t.TempDir()
	sync(c1, base, day1)
	copyDir(t, base, withRun2)
	copyDir(t, base, withoutRun2)
	t0 := time.Now()
	sync(c2, withRun2, day2)
	clean := time.Since(t0)
	sync(c3, withRun2, day3)
	sync(c3, withoutRun2, day3)

	setAside := faults.SetAside.For("course")
	named := killedRunNamed()
	rng := rand.New(rand.NewPCG(7, 11))
	cases := killedRunPoints()
	for i := 0; i < 12; i++ {
		cases = append(cases, "random")
	}
	for i, at := range cases {
		t.Run(fmt.Sprintf("%02d-%s", i, strings.ReplaceAll(at, " ", "-")), func(t *testing.T) {
			out := t.TempDir()
			copyDir(t, base, out)
			if at == setAside {
				// Setting aside needs a partition to replace: the killed run
				// is a same-day rerun of a clean run2, which must change
				// nothing when it completes and nothing when it dies.
				sync(c2, out, day2)
			}
			before := committedRuns(t, out)
			if at == "random" {
				// Child start-up costs about as much as a run; kill anywhere in it.
				delay := time.Duration(rng.Int64N(int64(3*clean + 100*time.Millisecond)))
				cmd := startChild(t, srv2.URL, out, "", day2)
				time.Sleep(delay)
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()
			} else {
				cmd := startChild(t, srv2.URL, out, at, day2)
				err := cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
					t.Fatalf("child was not killed at %q: %v", at, err)
				}
			}
			// Did the killed run commit? The working database says.
			committed := committedRuns(t, out) > before || at == setAside
			if want, ok := named[at]; ok && want != committed {
				t.Fatalf("killed at %q: committed = %v, want %v", at, committed, want)
			}
			// The published warehouse is whole: the one before the run, or,
			// once the rename is done, the one after it.
			pub := publishedRuns(t, out)
			switch {
			case at == faults.PublishRenamed.For("") && pub != before+1:
				t.Errorf("killed after the publish's rename: the published warehouse has %d runs, want %d", pub, before+1)
			case at != "random" && at != faults.PublishRenamed.For("") && at != setAside && pub != before:
				t.Errorf("killed at %q: the published warehouse has %d runs, want the %d before the run", at, pub, before)
			case pub != before && pub != before+1:
				t.Errorf("killed at %q: the published warehouse has %d runs, want %d or %d", at, pub, before, before+1)
			}
			sync(c3, out, day3)
			if committed {
				sameOutput(t, withRun2, out)
			} else {
				sameOutput(t, withoutRun2, out)
			}
		})
	}
}

// publishedRuns counts the succeeded runs in the published warehouse of
// out, which must open.
func publishedRuns(t *testing.T, out string) int64 {
	t.Helper()
	wh, err := load.OpenReadOnly(context.Background(), load.Lake{Root: out}.WarehousePath())
	if err != nil {
		t.Fatalf("the published warehouse does not open: %v", err)
	}
	defer wh.Close()
	return warehousetest.Scalar[int64](t, wh.DB(), `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`)
}

// committedRuns counts the succeeded runs the working database of out
// holds (committed; published or not).
func committedRuns(t *testing.T, out string) int64 {
	t.Helper()
	return warehousetest.StateScalar[int64](t, out, `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`)
}

// TestKillTestsCoverEveryPoint: every crash point of the run protocol is
// one the kill tests stop a process at (TestKilledRunsRecover's named
// points, TestListenKill9LosesNoAcknowledgedEvent's events loaded,
// TestHistoryMigratesFromDailyCopies's history migrated).
func TestKillTestsCoverEveryPoint(t *testing.T) {
	covered := map[faults.Point]bool{
		faults.EventsLoaded:    true, // webhooks/listen_test.go
		faults.HistoryMigrated: true, // versions_test.go, TestHistoryMigratesFromDailyCopies
	}
	for _, name := range append(killedRunPoints(), slices.Sorted(maps.Keys(icebergKillPoints()))...) {
		for _, p := range faults.All() {
			if name == string(p) || strings.HasPrefix(name, string(p)+" ") {
				covered[p] = true
			}
		}
	}
	for _, p := range faults.All() {
		if !covered[p] {
			t.Errorf("crash point %q is not one the kill tests stop at", p)
		}
	}
}

// killedRunNamed maps each point TestKilledRunsRecover kills a run at to
// whether the killed run had committed there.
func killedRunNamed() map[string]bool {
	return map[string]bool{
		faults.EarlyLoaded.For("userCourseProgress"): false, faults.Staged.For(""): false,
		faults.Committed.For(""): true, faults.SetAside.For("course"): true,
		faults.Published.For("course"): true, faults.Published.For("userCourseProgress"): true,
		faults.PublishCopied.For(""): true, faults.PublishRenamed.For(""): true,
		faults.HistoryFolded.For("course"): false, faults.HistoryFolded.For("userCourseProgress"): false,
	}
}

func killedRunPoints() []string { return slices.Sorted(maps.Keys(killedRunNamed())) }
