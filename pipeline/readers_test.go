package pipeline_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/internal/webhooktest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/webhooks"
)

// childReader is a BI tool in another process: it opens the published
// warehouse read-only once and keeps that connection, answering each line
// of stdin (a SQL query giving one number) with the number, on stdout.
func childReader() int {
	db, err := sql.Open("duckdb", os.Getenv("SEPIPE_READER_CHILD")+"?access_mode=read_only")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("holding")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var n int64
		if err := db.QueryRow(sc.Text()).Scan(&n); err != nil {
			fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Println(n)
	}
	return 0
}

// reader is a handle on a childReader process.
type reader struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func startReader(t *testing.T, path string) *reader {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SEPIPE_READER_CHILD="+path)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	r := &reader{in: in, out: bufio.NewScanner(stdout)}
	if !r.out.Scan() || r.out.Text() != "holding" {
		t.Fatalf("reader did not open %s: %s", path, r.out.Text())
	}
	return r
}

// ask runs q on the reader's held connection.
func (r *reader) ask(t *testing.T, q string) int64 {
	t.Helper()
	fmt.Fprintln(r.in, q)
	if !r.out.Scan() {
		t.Fatalf("reader gone while asked %q", q)
	}
	n, err := strconv.ParseInt(r.out.Text(), 10, 64)
	if err != nil {
		t.Fatalf("reader: %q: %s", q, r.out.Text())
	}
	return n
}

const succeededRuns = `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`

// TestSyncsBesideAReader: a reader in another process holds the published
// warehouse open throughout two syncs, the second over changed data. Both
// syncs succeed; the held connection keeps answering from the snapshot it
// opened; a new connection sees the second run.
func TestSyncsBesideAReader(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(40))
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken())
	out := t.TempDir()
	ctx := context.Background()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	r := startReader(t, filepath.Join(out, "warehouse.duckdb"))
	progress := r.ask(t, `SELECT count(*) FROM userCourseProgress`)
	for i, day := range []time.Time{day1.Add(24 * time.Hour), day1.Add(48 * time.Hour)} {
		srv.Service.Advance(24 * time.Hour)
		if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day), LockWait: -1}); err != nil {
			t.Fatalf("sync %d beside a reader: %v", i+2, err)
		}
		if n := r.ask(t, succeededRuns); n != 1 {
			t.Errorf("the held connection sees %d runs, want the 1 it opened", n)
		}
		if n := r.ask(t, `SELECT count(*) FROM userCourseProgress`); n != progress {
			t.Errorf("the held connection's table changed: %d rows, was %d", n, progress)
		}
		db := warehousetest.Open(t, out)
		if n := warehousetest.Scalar[int64](t, db, succeededRuns); n != int64(i+2) {
			t.Errorf("a new connection sees %d runs, want %d", n, i+2)
		}
		if n := warehousetest.Scalar[int64](t, db, `SELECT count(DISTINCT snapshot_date) FROM userCourseProgress_history`); n != int64(i+2) {
			t.Errorf("a new connection sees %d days of history, want %d", n, i+2)
		}
	}
}

// TestListenAndSyncBesideAReader: with a reader holding the published
// warehouse, events acknowledged by listen reach a new connection within
// the publish bound, and a sync on the same folder runs at the same time.
func TestListenAndSyncBesideAReader(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(30))
	defer srv.Close()
	out := t.TempDir()
	ctx := context.Background()
	c := client(t, srv.URL, srv.Service.AccessToken())
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	r := startReader(t, filepath.Join(out, "warehouse.duckdb"))
	const publishEvery = 2 * time.Second
	url, stop := webhooktest.StartListen(t, webhooks.ListenConfig{Out: out, Secrets: []string{webhooktest.Secret},
		BatchInterval: 200 * time.Millisecond, PublishInterval: publishEvery})
	hc := &http.Client{Timeout: 10 * time.Second}
	visible := func(want int64, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			db := warehousetest.Open(t, out)
			var n int64
			if err := db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err == nil && n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a new connection sees %d events %s after they were acknowledged, want %d", n, within, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The bound: batch interval + publish interval + the copy, with room
	// for a slow machine.
	bound := 200*time.Millisecond + publishEvery + 5*time.Second
	for i := range 50 {
		if code := webhooktest.Deliver(hc, url, webhooktest.Event(fmt.Sprintf("ev-a-%02d", i)), webhooktest.Secret, 0); code != http.StatusOK {
			t.Fatalf("delivery %d: %d", i, code)
		}
	}
	visible(50, bound)

	// A sync while listen keeps loading and publishing.
	done := make(chan error, 1)
	go func() {
		_, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1.Add(24 * time.Hour))})
		done <- err
	}()
	for i := range 50 {
		if code := webhooktest.Deliver(hc, url, webhooktest.Event(fmt.Sprintf("ev-b-%02d", i)), webhooktest.Secret, 0); code != http.StatusOK {
			t.Fatalf("delivery %d during a sync: %d", i, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("a sync beside listen and a reader: %v", err)
	}
	visible(100, bound)
	if n := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), succeededRuns); n != 2 {
		t.Errorf("a new connection sees %d runs, want 2", n)
	}
	if n := r.ask(t, `SELECT count(*) FROM _sepipe_runs`); n != 1 {
		t.Errorf("the held connection sees %d runs, want the 1 it opened", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if (load.Lake{Root: out}).PublishPending() {
		t.Error("listen stopped with loaded events unpublished")
	}
}

// TestOutputFolderMoves: the output folder moved to another parent and
// opened from another working directory answers every table and view
// with the same counts.
func TestOutputFolderMoves(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(30))
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken())
	first := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	for i := range 2 {
		if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: first, Now: clock(day1.Add(time.Duration(i) * 24 * time.Hour))}); err != nil {
			t.Fatal(err)
		}
	}
	before := relationCounts(t, first)
	if len(before) < 10 || before["userCourseProgress_history"] == 0 {
		t.Fatalf("too little to compare: %v", before)
	}
	moved := filepath.Join(t.TempDir(), "elsewhere", "mounted")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(first, moved); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	after := relationCounts(t, moved)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("moved: %v\nwas:   %v", after, before)
	}
}

// relationCounts counts the rows of every table and view of the published
// warehouse of out, opened read-only.
func relationCounts(t *testing.T, out string) map[string]int64 {
	t.Helper()
	db := warehousetest.Open(t, out)
	rows, err := db.Query(`SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()
		UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	m := map[string]int64{}
	for _, n := range names {
		var k int64
		if err := db.QueryRow("SELECT count(*) FROM " + load.Ident(n)).Scan(&k); err != nil {
			t.Errorf("%s does not answer: %v", n, err)
			continue
		}
		m[n] = k
	}
	return m
}

// TestPublishedFileFormat: the published warehouse is written in the
// pinned storage format.
func TestPublishedFileFormat(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(10))
	defer srv.Close()
	out := t.TempDir()
	if _, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	tags := warehousetest.Scalar[string](t, warehousetest.Open(t, out), `SELECT tags::VARCHAR FROM duckdb_databases() WHERE database_name = current_database()`)
	// DuckDB names the oldest release that reads the file.
	if want := "storage_version=" + load.StorageVersion + "+"; !strings.Contains(tags, want) {
		t.Errorf("published warehouse tags %s, want %s", tags, want)
	}
}

// TestAdoptsAnEarlierRelease'sWarehouse: an output folder an earlier
// sepipe wrote (one warehouse.duckdb written in place, history views over
// the lake by absolute path) is adopted by the next sync: nothing is lost,
// the history views become views of versions with every earlier day.
func TestAdoptsAnEarlierReleasesWarehouse(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(30))
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken())
	out := t.TempDir()
	ctx := context.Background()
	for i := range 2 {
		if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1.Add(time.Duration(i) * 24 * time.Hour))}); err != nil {
			t.Fatal(err)
		}
	}
	want := relationCounts(t, out)
	// Make it as the earlier release left it.
	lake := load.Lake{Root: out}
	db, err := sql.Open("duckdb", lake.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	var lastDay string
	if err := db.QueryRow(`SELECT strftime(max(day), '%Y-%m-%d') FROM _sepipe_history_days`).Scan(&lastDay); err != nil {
		t.Fatal(err)
	}
	hist := 0
	for name := range want {
		obj, ok := strings.CutSuffix(name, "_history")
		if !ok {
			continue
		}
		glob := filepath.Join(lake.ObjectDir(obj), "*", "*.parquet")
		if _, err := db.Exec("DROP VIEW " + load.Ident(name) + "; DROP TABLE " + load.Ident(load.VersionsTable(obj)) + "; CREATE VIEW " + load.Ident(name) +
			" AS SELECT * FROM read_parquet(" + load.Literal(glob) + ", hive_partitioning = true, union_by_name = true)"); err != nil {
			t.Fatal(err)
		}
		// A replace stream's table, a view of its history's day.
		if _, err := db.Exec("CREATE OR REPLACE VIEW " + load.Ident(obj) + " AS SELECT * EXCLUDE (snapshot_date) FROM " + load.Ident(name) +
			" WHERE snapshot_date = DATE " + load.Literal(lastDay)); err != nil {
			t.Fatal(err)
		}
		hist++
	}
	if _, err := db.Exec("DROP TABLE _sepipe_history_days"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if hist < 5 {
		t.Fatalf("only %d history tables to turn into views", hist)
	}
	if err := os.Rename(lake.StatePath(), lake.WarehousePath()); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, ".sepipe", "published"))
	// It answers as the warehouse did (but for the versions and their
	// days, which it has not).
	for name := range want {
		if strings.HasSuffix(name, "_versions") || name == "_sepipe_history_days" {
			delete(want, name)
		}
	}
	if n := relationCounts(t, out); fmt.Sprint(n) != fmt.Sprint(want) {
		t.Fatalf("the made-up earlier warehouse differs: %v", n)
	}
	// The next day's sync adopts it.
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1.Add(48 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	got := relationCounts(t, out)
	kinds := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), `SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND NOT internal AND suffix(view_name, '_history') AND NOT contains(sql, '_versions')`)
	if kinds != 0 {
		t.Errorf("%d history views over the lake left; they should have become views of versions", kinds)
	}
	for name, n := range want {
		switch {
		case strings.HasSuffix(name, "_history"):
			if got[name] <= n {
				t.Errorf("%s: %d rows, want the %d of the earlier days and the new day's", name, got[name], n)
			}
		case name == "_sepipe_runs" || name == "_sepipe_run_objects" || name == "_sepipe_schemas" || name == "_sepipe_names":
			if got[name] < n {
				t.Errorf("%s: %d rows, had %d", name, got[name], n)
			}
		}
	}
	if days := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), `SELECT count(DISTINCT snapshot_date) FROM course_history`); days != 3 {
		t.Errorf("course_history holds %d days, want 3", days)
	}
}
