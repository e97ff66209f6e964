package pipeline_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// The package's tests sync with the early load on and small part files
// (export_test.go).

// logWatch is a slog handler that keeps the text of every record and
// closes a channel the first time a message containing a given text is
// logged (in its message or attributes).
type logWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	waits map[string]chan struct{}
}

func newLogWatch(texts ...string) *logWatch {
	w := &logWatch{waits: map[string]chan struct{}{}}
	for _, s := range texts {
		w.waits[s] = make(chan struct{})
	}
	return w
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *logWatch) WithGroup(string) slog.Handler            { return w }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	w.buf.WriteString(line + "\n")
	for s, ch := range w.waits {
		if strings.Contains(line, s) {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
	return nil
}

func (w *logWatch) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// seen waits for a message (at most a minute).
func (w *logWatch) seen(t *testing.T, s string) {
	t.Helper()
	select {
	case <-w.waits[s]:
	case <-time.After(time.Minute):
		t.Fatalf("never logged %q; the log:\n%s", s, w.text())
	}
}

var pageParam = regexp.MustCompile(`"page":(\d+)`)

// pageOf is the page a data request asks for (0 for other requests).
func pageOf(r *http.Request) int {
	raw, err := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
	if err != nil {
		return 0
	}
	m := pageParam.FindSubmatch(raw)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// holdPages serves object's pages from page `from` on only after hold
// returns what it does (nil: serve; an error: answer 400 with it).
func holdPages(svc http.Handler, object string, from int, hold func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects/"+object) && pageOf(r) >= from {
			if err := hold(); err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				io.WriteString(w, `{"response":{"code":3002,"name":"InvalidParameterError","message":"`+err.Error()+`"}}`)
				return
			}
		}
		svc.ServeHTTP(w, r)
	})
}

func historyRows(t *testing.T, out, object, day string) int64 {
	t.Helper()
	db := warehousetest.Open(t, out)
	return warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+load.Ident(load.HistoryTable(object))+" WHERE snapshot_date = DATE "+load.Literal(day))
}

// TestEarlyLoadGivesTheCommitsRows: a replace stream's part files go into
// the run's transaction while it fetches, and the warehouse ends as a
// load after the fetch leaves it: every row once, in the table and the
// history.
func TestEarlyLoadGivesTheCommitsRows(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(300))
	srv := httptest.NewServer(svc)
	defer srv.Close()
	out := t.TempDir()
	logs := newLogWatch()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, svc.AccessToken(), extract.WithPageSize(200)),
		pipeline.Config{Out: out, Now: clock(day1), Only: []string{"userCourseProgress"}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`part files loaded while the run fetched stream=userCourseProgress files=[1-9]`).MatchString(logs.text()) {
		t.Fatalf("nothing was loaded while the run fetched; the log:\n%s", logs.text())
	}
	rows := res.Objects[0].Rows
	if rows < 3000 {
		t.Fatalf("the stream has %d rows; the test wants several part files", rows)
	}
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM userCourseProgress`); n != rows {
		t.Errorf("the table has %d rows, the run read %d", n, rows)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM (SELECT DISTINCT * FROM userCourseProgress)`); n != rows {
		t.Errorf("the table has %d distinct rows of %d: a part file went in twice", n, rows)
	}
	if n := historyRows(t, out, "userCourseProgress", "2026-11-23"); n != rows {
		t.Errorf("the history's day has %d rows, want %d", n, rows)
	}
}

// TestEarlyLoadOfAFailedStreamLeavesItsTable: on a rerun the same day, a
// stream whose part files were loaded early fails; its table and history
// keep the earlier run's rows (the whole transaction is rolled back and
// the run commits from its staged files).
func TestEarlyLoadOfAFailedStreamLeavesItsTable(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(300))
	logs := newLogWatch("loading the run's part files while it fetches")
	var fail bool
	var mu sync.Mutex
	srv := httptest.NewServer(holdPages(svc, "userCourseProgress", 8, func() error {
		mu.Lock()
		f := fail
		mu.Unlock()
		if !f {
			return nil
		}
		select {
		case <-logs.waits["loading the run's part files while it fetches"]:
		case <-time.After(30 * time.Second):
		}
		return errors.New("page went away")
	}))
	defer srv.Close()
	out := t.TempDir()
	c := client(t, srv.URL, svc.AccessToken(), extract.WithPageSize(200))
	only := []string{"userCourseProgress", "course"}
	res, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Now: clock(day1), Only: only})
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, o := range res.Objects {
		if o.Object == "userCourseProgress" {
			rows = o.Rows
		}
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	_, err = pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Now: clock(day1.Add(time.Hour)), Only: only, Logger: slog.New(logs)})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Failed) != 1 || re.Failed[0].Object != "userCourseProgress" {
		t.Fatalf("second run: %v, want a partial run with userCourseProgress failed", err)
	}
	logs.seen(t, "loading the run's part files while it fetches")
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM userCourseProgress`); n != rows {
		t.Errorf("the failed stream's table has %d rows, want the first run's %d", n, rows)
	}
	if n := historyRows(t, out, "userCourseProgress", "2026-11-23"); n != rows {
		t.Errorf("the failed stream's history day has %d rows, want the first run's %d", n, rows)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM _sepipe_run_objects WHERE object = 'course' AND status = 'committed'`); n != 2 {
		t.Errorf("course committed %d times, want 2 (the other stream of the partial run commits)", n)
	}
}

// TestEarlyLoadGivesWayToAWaitingProcess: while a run holds the working
// database to load during its fetch, another process that waits for it
// (a listen batch, a publish) gets it within moments, not after the
// fetch; the run then loads at its commit.
func TestEarlyLoadGivesWayToAWaitingProcess(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(300))
	release := make(chan struct{})
	srv := httptest.NewServer(holdPages(svc, "userCourseProgress", 8, func() error { <-release; return nil }))
	defer srv.Close()
	out := t.TempDir()
	logs := newLogWatch("loading the run's part files while it fetches", "another sepipe process waits")
	type result struct {
		res *pipeline.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := pipeline.Sync(context.Background(), client(t, srv.URL, svc.AccessToken(), extract.WithPageSize(200)),
			pipeline.Config{Out: out, Now: clock(day1), Only: []string{"userCourseProgress"}, Logger: slog.New(logs)})
		done <- result{res, err}
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	logs.seen(t, "loading the run's part files while it fetches")
	wh, err := load.OpenState(context.Background(), load.Lake{Root: out}, load.WithLockWait(time.Minute))
	if err != nil {
		t.Fatalf("waiting for the working database while the run fetches: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the run ended (%v) before the pages it waits for were served", r.err)
	default:
	}
	logs.seen(t, "another sepipe process waits")
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	released = true
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	rows := r.res.Objects[0].Rows
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM (SELECT DISTINCT * FROM userCourseProgress)`); n != rows || rows < 3000 {
		t.Errorf("the table has %d distinct rows, the run read %d", n, rows)
	}
}

// TestEarlyLoadKeepsNewRowsRight: a run that counts its new rows (as
// `sepipe sync` does) compares with the table as it was. On the first day
// every row is new; a rerun the same day of unchanged data, whose table
// is a view of that day, finds none new: such a stream loads at the
// commit instead of during the fetch.
func TestEarlyLoadKeepsNewRowsRight(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(300))
	srv := httptest.NewServer(svc)
	defer srv.Close()
	out := t.TempDir()
	c := client(t, srv.URL, svc.AccessToken(), extract.WithPageSize(200))
	sync := func(at time.Time, logs *logWatch) pipeline.ObjectResult {
		t.Helper()
		res, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Now: clock(at),
			Only: []string{"userCourseProgress"}, CountNewRows: true, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Objects[0]
	}
	first := newLogWatch()
	o := sync(day1, first)
	if o.NewRows != o.Rows || o.Rows < 3000 {
		t.Errorf("first run: %d new rows of %d, want all", o.NewRows, o.Rows)
	}
	if !strings.Contains(first.text(), "part files loaded while the run fetched") {
		t.Errorf("the first run loaded nothing while it fetched; the log:\n%s", first.text())
	}
	rerun := newLogWatch()
	o = sync(day1.Add(time.Hour), rerun)
	if o.NewRows != 0 {
		t.Errorf("a same-day rerun of unchanged data: %d new rows, want 0", o.NewRows)
	}
	if !strings.Contains(rerun.text(), "a stream loads at the commit") {
		t.Errorf("the rerun loaded its stream while it fetched; the log:\n%s", rerun.text())
	}
	next := newLogWatch()
	o = sync(day1.Add(24*time.Hour), next)
	if o.NewRows != 0 {
		t.Errorf("the next day, unchanged data: %d new rows, want 0", o.NewRows)
	}
	if !strings.Contains(next.text(), "part files loaded while the run fetched") {
		t.Errorf("the next day's run loaded nothing while it fetched; the log:\n%s", next.text())
	}
	if n := historyRows(t, out, "userCourseProgress", "2026-11-24"); n != o.Rows {
		t.Errorf("the next day's history has %d rows, want %d", n, o.Rows)
	}
}

// TestWideStreamLoadsEarlyAndCommits: a report object of 64 fields (the
// fake's wide object, about 2.8 KB of JSON a row) syncs with the default
// settings: loaded while the run fetches, under the early load's limit
// raised for its columns, and committed with the default 64 MB, which
// the commit raises for its columns; every row once. DuckDB's insert of so many columns needs more than either
// limit on the threads they would give it (load.insertBytes).
func TestWideStreamLoadsEarlyAndCommits(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(5000), servicetest.WithWideObject())
	srv := httptest.NewServer(svc)
	defer srv.Close()
	out := t.TempDir()
	logs := newLogWatch()
	object := servicetest.WideObjectID
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, svc.AccessToken()),
		pipeline.Config{Out: out, Now: clock(day1), Only: []string{object}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`part files loaded while the run fetched stream=` + object + ` files=[1-9]`).MatchString(logs.text()) {
		t.Fatalf("nothing was loaded while the run fetched; the log:\n%s", logs.text())
	}
	rows := res.Objects[0].Rows
	if want := int64(servicetest.WideObjectRows(5000)); rows != want {
		t.Fatalf("the run read %d rows, the fake has %d", rows, want)
	}
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM duckdb_columns() WHERE table_name = '`+object+`'`); n != 64 {
		t.Errorf("the table has %d columns, want 64", n)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM `+load.Ident(object)); n != rows {
		t.Errorf("the table has %d rows, the run read %d", n, rows)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(DISTINCT activityId) FROM `+load.Ident(object)); n != rows {
		t.Errorf("the table has %d distinct rows, the run read %d: a part file went in twice", n, rows)
	}
	if n := historyRows(t, out, object, "2026-11-23"); n != rows {
		t.Errorf("the history's day has %d rows, want %d", n, rows)
	}
}
