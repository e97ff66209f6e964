package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// oddTenant serves one report object, "odd", whose rows carry text that is
// not valid UTF-8: the reporting interface as the document shows it, with
// the rows given.
func oddTenant(t *testing.T, rows []string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(reportingOnly(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/learn/reporting/v3/json/objects":
			fmt.Fprint(w, `{"objects":[{"id":"odd","displayName":"Odd","urls":{"describe":"objects/odd/describe","object":"objects/odd"}}]}`)
		case "/api/learn/reporting/v3/json/objects/odd/describe":
			fmt.Fprint(w, `{"fields":[{"id":"id","displayName":"ID","type":"int"},{"id":"name","displayName":"Name","type":"string"},{"id":"n","displayName":"N","type":"int"}]}`)
		case "/api/learn/reporting/v3/json/objects/odd":
			raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
			var q struct{ Page int }
			json.Unmarshal(raw, &q)
			body := fmt.Sprintf(`{"page":%d,"totalResults":%d,"totalPages":1,"results":[`, q.Page, len(rows))
			for i, row := range rows {
				if i > 0 {
					body += ","
				}
				body += row
			}
			w.Write([]byte(body + "]}"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestInvalidUTF8NeverFailsARun: text that is not valid UTF-8 is stored
// repaired (U+FFFD), counted; a reject whose raw row is not valid UTF-8
// is recorded with its exact bytes; the stream commits.
func TestInvalidUTF8NeverFailsARun(t *testing.T) {
	t.Parallel()
	srv := oddTenant(t, []string{
		`{"id":1,"name":"fine","n":1}`,
		"{\"id\":2,\"name\":\"bad \xff\xfe bytes\",\"n\":2}",
		"{\"id\":3,\"name\":\"also \xc3\x28 bad\",\"n\":\"not a number\"}",
	})
	out := t.TempDir()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, "tok-SECRET-4f1c9a"), pipeline.Config{Out: out, Now: clock(day1)})
	if err != nil {
		t.Fatalf("one odd value failed the run: %v", err)
	}
	o := objectResult(t, res, "odd")
	if o.Rows != 3 || o.RejectedRows != 0 || o.NulledValues != 1 || o.RepairedValues != 2 {
		t.Fatalf("rows %d, rejected %d, nulled %d, repaired %d; want 3, 0, 1, 2", o.Rows, o.RejectedRows, o.NulledValues, o.RepairedValues)
	}
	db := warehousetest.Open(t, out)
	if got := warehousetest.Scalar[string](t, db, `SELECT name FROM odd WHERE id = 2`); got != "bad \uFFFD bytes" {
		t.Errorf("stored %q", got)
	}
	raw := warehousetest.Scalar[[]byte](t, db, `SELECT raw_row_bytes FROM _sepipe_rejects WHERE object = 'odd' AND field = 'n'`)
	if string(raw) != "{\"id\":3,\"name\":\"also \xc3\x28 bad\",\"n\":\"not a number\"}" {
		t.Errorf("raw bytes of the rejected row: %q", raw)
	}
}

// namedTenant serves report objects whose ids are given, each with one
// field "id" and rows ids 1..n (n = its index + 1), ids escaped as the
// service escapes path segments.
func namedTenant(t *testing.T, ids []string) *httptest.Server {
	t.Helper()
	byID := map[string]int{}
	for i, id := range ids {
		byID[id] = i + 1
	}
	srv := httptest.NewServer(reportingOnly(func(w http.ResponseWriter, r *http.Request) {
		const base = "/api/learn/reporting/v3/json/objects"
		rest, _ := strings.CutPrefix(r.URL.Path, base)
		switch {
		case rest == "":
			var objs []map[string]any
			for _, id := range ids {
				objs = append(objs, map[string]any{"id": id, "displayName": id, "urls": map[string]string{}})
			}
			json.NewEncoder(w).Encode(map[string]any{"objects": objs})
		case strings.HasSuffix(rest, "/describe"):
			fmt.Fprint(w, `{"fields":[{"id":"id","displayName":"ID","type":"int"},{"id":"snapshot_date","displayName":"Their own date","type":"string"}]}`)
		default:
			id := strings.TrimPrefix(rest, "/")
			n, ok := byID[id]
			if !ok {
				http.NotFound(w, r)
				return
			}
			var rows []string
			for i := 1; i <= n; i++ {
				rows = append(rows, fmt.Sprintf(`{"id":%d,"snapshot_date":"theirs"}`, i))
			}
			fmt.Fprintf(w, `{"totalResults":%d,"totalPages":1,"results":[%s]}`, n, strings.Join(rows, ","))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHostileIDsStayInTheirPlace: ids that climb out of the folder, take
// sepipe's own names, differ only by case, or hold glob characters each
// get a table of their own, exactly once, inside the output folder, on
// every run; sepipe's own tables stay intact.
func TestHostileIDsStayInTheirPlace(t *testing.T) {
	t.Parallel()
	ids := []string{"../escape", "events", "_sepipe_runs", "User", "user", "foo", "foo_history", "x[1]", "a/b", "q?y=1"}
	srv := namedTenant(t, ids)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	for day := range 2 {
		if _, err := pipeline.Sync(context.Background(), client(t, srv.URL, "tok-SECRET-4f1c9a"), pipeline.Config{Out: out, Now: clock(day1.Add(time.Duration(day) * 24 * time.Hour))}); err != nil {
			t.Fatalf("run %d: %v", day+1, err)
		}
	}
	// Nothing outside the output folder.
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "out" {
		t.Fatalf("the parent holds %v", ents)
	}
	db := warehousetest.Open(t, out)
	for i, id := range ids {
		name := warehousetest.Scalar[string](t, db, `SELECT name FROM _sepipe_names WHERE id = ?`, id)
		if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM `+load.Ident(name)); n != int64(i+1) {
			t.Errorf("%q (table %s): %d rows, want %d", id, name, n, i+1)
		}
		if got := warehousetest.Scalar[string](t, db, `SELECT min(snapshot_date) FROM `+load.Ident(name)); got != "theirs" {
			t.Errorf("%q: snapshot_date %q, want the service's own", id, got)
		}
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`); n != 2 {
		t.Errorf("run ledger holds %d succeeded runs, want 2", n)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(DISTINCT lower(name)) FROM _sepipe_names WHERE name NOT IN ('themes', 'assets')`); n != int64(len(ids)) {
		t.Errorf("%d distinct names for %d ids", n, len(ids))
	}
}

// TestFieldIDsDuckDBCannotHoldGetColumnsOfTheirOwn: field ids equal but
// for case, one with a NUL, one named like sepipe's bookkeeping columns:
// each gets a column of its own (the id kept in the schema table) and the
// stream commits, as a merge stream keyed on one of them.
func TestFieldIDsDuckDBCannotHoldGetColumnsOfTheirOwn(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(reportingOnly(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/learn/reporting/v3/json/objects":
			fmt.Fprint(w, `{"objects":[{"id":"odd","displayName":"Odd","urls":{}}]}`)
		case "/api/learn/reporting/v3/json/objects/odd/describe":
			fmt.Fprint(w, `{"fields":[{"id":"Name","type":"string"},{"id":"name","type":"string"},{"id":"a\u0000b","type":"int"},{"id":"_sepipe_run_id","type":"string"}]}`)
		default:
			fmt.Fprint(w, `{"totalResults":2,"totalPages":1,"results":[`+
				`{"Name":"upper","name":"lower","a\u0000b":1,"_sepipe_run_id":"theirs"},`+
				`{"Name":"UPPER","name":"LOWER","a\u0000b":2,"_sepipe_run_id":"theirs too"}]}`)
		}
	}))
	defer srv.Close()
	out := t.TempDir()
	cfg := pipeline.Config{Out: out, Now: clock(day1), Streams: map[string]pipeline.StreamConfig{
		"odd": {Mode: load.Merge, PrimaryKey: []string{"name"}},
	}}
	for run := range 2 {
		if _, err := pipeline.Sync(context.Background(), client(t, srv.URL, "tok-SECRET-4f1c9a"), cfg); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
	}
	db := warehousetest.Open(t, out)
	got := warehousetest.Scalar[string](t, db, `SELECT string_agg("Name" || '/' || "name_2" || '/' || "a_b" || '/' || "field_sepipe_run_id", ',' ORDER BY "a_b") FROM odd`)
	if got != "upper/lower/1/theirs,UPPER/LOWER/2/theirs too" {
		t.Fatalf("rows %q", got)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM odd`); n != 2 {
		t.Fatalf("merge on the renamed key left %d rows, want 2", n)
	}
}

// TestHostileTenant syncs the fake's hostile tenant twice into a folder
// nested in a temporary parent: nothing lands outside the output folder,
// every object is in a table of its own exactly once, sepipe's own tables
// are intact, and sepipe listen loads events into the same warehouse
// afterwards.
func TestHostileTenant(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(10), servicetest.WithHostile())
	defer srv.Close()
	parent := t.TempDir()
	out := filepath.Join(parent, "deeper", "out")
	for day := range 2 {
		res, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()),
			pipeline.Config{Out: out, Now: clock(day1.Add(time.Duration(day) * 24 * time.Hour))})
		if err != nil {
			t.Fatalf("run %d: %v", day+1, err)
		}
		for _, o := range res.Objects {
			if strings.Contains(o.ServiceID, "tab") && o.RepairedValues == 0 {
				t.Errorf("%q: no value counted as repaired", o.ServiceID)
			}
		}
	}
	err := filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(out, p); strings.HasPrefix(rel, "..") && p != parent && p != filepath.Join(parent, "deeper") {
			t.Errorf("written outside the output folder: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	for k, id := range servicetest.HostileObjectIDs() {
		name := warehousetest.Scalar[string](t, db, `SELECT name FROM _sepipe_names WHERE id = ?`, id)
		if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM `+load.Ident(name)); n != int64(k+3) {
			t.Errorf("%q (table %s): %d rows, want %d", id, name, n, k+3)
		}
		if got := warehousetest.Scalar[string](t, db, `SELECT min(snapshot_date) || '/' || min("Name") || '/' || count(DISTINCT "name_2") FROM `+load.Ident(name)); !strings.HasPrefix(got, "theirs/upper") {
			t.Errorf("%q: %q", id, got)
		}
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`); n != 2 {
		t.Errorf("run ledger: %d succeeded runs, want 2", n)
	}
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM "user"`); n != 10 {
		t.Errorf("user: %d rows, want the fake's 10 (not User's)", n)
	}
	db.Close()

	// Events land in the same warehouse afterwards.
	url, stop := webhooktest.StartListen(t, webhooks.ListenConfig{Out: out, Secrets: []string{"c2lnbmluZy1rZXktb25lLXRoaXJ0eS10d28tYnl0ZXM="}})
	if st := webhooktest.Deliver(http.DefaultClient, url, webhooktest.Event("hostile-1"), "c2lnbmluZy1rZXktb25lLXRoaXJ0eS10d28tYnl0ZXM=", 0); st != 200 {
		t.Fatalf("delivery: %d", st)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), `SELECT count(*) FROM events WHERE id = 'hostile-1'`); n != 1 {
		t.Fatalf("events holds %d of the delivered event", n)
	}
}
