package pipeline_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

var day1 = time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

func client(t *testing.T, url, token string, opts ...extract.Option) *extract.Client {
	t.Helper()
	base := []extract.Option{extract.WithAccessToken(token), extract.WithRateLimit(0, 0), extract.WithConcurrency(4), extract.WithPageSize(400)}
	c, err := extract.New(url, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dayFake serves the test tenant (120 users) as it stands days after the
// first day, with a client of it; the server closes when the test ends.
func dayFake(t *testing.T, days int) (*servicetest.Server, *extract.Client) {
	t.Helper()
	s := servicetest.NewServer(servicetest.WithUsers(120), servicetest.WithNow(servicetest.DefaultNow.Add(time.Duration(days)*24*time.Hour)))
	t.Cleanup(s.Close)
	return s, client(t, s.URL, s.Service.AccessToken(), extract.WithPageSize(200))
}

// fetchRawPages is what a user would do with curl: GET every page of an
// object and save the bodies as they came.
func fetchRawPages(t *testing.T, baseURL, token, object, dir string) []string {
	t.Helper()
	var files []string
	for page := 1; ; page++ {
		params := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(`{"page":%d,"resultsPerPage":1000}`, page)))
		req, _ := http.NewRequest("GET", baseURL+servicetest.BasePath+"/objects/"+object+"?parameters="+params, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("page %d of %s: %d %v", page, object, resp.StatusCode, err)
		}
		if strings.Contains(string(body), `"results":[]`) {
			return files
		}
		f := filepath.Join(dir, fmt.Sprintf("%s-%05d.json", object, page))
		if err := os.WriteFile(f, body, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
}

// TestSyncMatchesReadJSONOracle is the foundation's acceptance check: for
// every object, the warehouse table agrees with DuckDB's own read_json over
// the raw pages, on count, per-column sums and distinct counts, and row for
// row; and the lake reads back with the same rows.
func TestSyncMatchesReadJSONOracle(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(300), servicetest.WithSeed(7))
	defer srv.Close()
	out := t.TempDir()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: out, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]bool{}
	for _, o := range res.Objects {
		objects[o.Object] = true
	}
	for _, want := range []string{"course", "path", "curriculum", "user", "userCourseProgress"} {
		if !objects[want] {
			t.Errorf("object %s was not synced", want)
		}
	}

	db := warehousetest.Open(t, out)
	pagesDir := t.TempDir()
	c := client(t, srv.URL, srv.Service.AccessToken())
	for _, o := range res.Objects {
		if pipeline.IsCollection(o.Object) {
			t.Run(o.Object, func(t *testing.T) { collectionOracle(t, db, srv.URL, srv.Service.AccessToken(), o, pagesDir) })
			continue
		}
		t.Run(o.Object, func(t *testing.T) {
			fields, err := c.Describe(context.Background(), o.Object)
			if err != nil {
				t.Fatal(err)
			}
			files := fetchRawPages(t, srv.URL, srv.Service.AccessToken(), o.Object, pagesDir)
			quoted := make([]string, len(files))
			for i, f := range files {
				quoted[i] = load.Literal(f)
			}
			oracle := "oracle_" + o.Object
			if _, err := db.Exec(fmt.Sprintf(`CREATE TEMP TABLE %s AS SELECT unnest(results, recursive := true)
				FROM read_json([%s], sample_size = -1)`, load.Ident(oracle), strings.Join(quoted, ", "))); err != nil {
				t.Fatal(err)
			}
			table := load.Ident(o.Object)
			lake := fmt.Sprintf("read_parquet(%s, hive_partitioning = true)", load.Literal(filepath.Join(out, "lake", o.Object, "*", "*.parquet")))

			n := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+table)
			if n != o.Rows || n == 0 {
				t.Errorf("table has %d rows, run reported %d", n, o.Rows)
			}
			if on := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+load.Ident(oracle)); on != n {
				t.Errorf("read_json oracle has %d rows, table %d", on, n)
			}
			if ln := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+lake+" WHERE snapshot_date = DATE '2026-11-23'"); ln != n {
				t.Errorf("lake has %d rows, table %d", ln, n)
			}
			var norm []string // one comparable expression per column
			for _, f := range fields {
				col := load.Ident(f.ID)
				var expr string
				switch f.Type {
				case service.TypeInt, service.TypeFloat, service.TypePercent:
					expr = "CAST(" + col + " AS DOUBLE)"
					a := warehousetest.Scalar[sql.NullFloat64](t, db, "SELECT sum("+expr+") FROM "+table)
					b := warehousetest.Scalar[sql.NullFloat64](t, db, "SELECT sum("+expr+") FROM "+load.Ident(oracle))
					if a.Valid != b.Valid || math.Abs(a.Float64-b.Float64) > 1e-6*math.Max(1, math.Abs(b.Float64)) {
						t.Errorf("column %s: sum %v, oracle %v", f.ID, a, b)
					}
				case service.TypeDate:
					expr = "epoch(CAST(" + col + " AS TIMESTAMPTZ))"
				default:
					expr = "CAST(" + col + " AS VARCHAR)"
				}
				norm = append(norm, expr+" AS "+col)
				for _, agg := range []string{"count(DISTINCT " + expr + ")", "count(" + expr + ")"} {
					a := warehousetest.Scalar[int64](t, db, "SELECT "+agg+" FROM "+table)
					b := warehousetest.Scalar[int64](t, db, "SELECT "+agg+" FROM "+load.Ident(oracle))
					if a != b {
						t.Errorf("column %s: %s = %d, oracle %d", f.ID, agg, a, b)
					}
				}
			}
			sel := strings.Join(norm, ", ")
			for _, pair := range [][2]string{{table, load.Ident(oracle)}, {load.Ident(oracle), table}, {table, lake}, {lake, table}} {
				q := fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s)", sel, pair[0], sel, pair[1])
				if d := warehousetest.Scalar[int64](t, db, q); d != 0 {
					t.Errorf("%d rows of %s are not in %s", d, pair[0], pair[1])
				}
			}
		})
	}

	// Every field type and some nulls made it through.
	types := warehousetest.Scalar[string](t, db, `SELECT string_agg(DISTINCT data_type, ',' ORDER BY data_type) FROM information_schema.columns WHERE table_name IN ('course','path','curriculum','user','userCourseProgress')`)
	if types != "BIGINT,DOUBLE,TIMESTAMP WITH TIME ZONE,VARCHAR" {
		t.Errorf("column types = %s", types)
	}
	if nulls := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM "userCourseProgress" WHERE completedDate IS NULL`); nulls == 0 {
		t.Error("no nulls in userCourseProgress.completedDate")
	}
	cols := warehousetest.Scalar[string](t, db, `SELECT string_agg(column_name, ',' ORDER BY column_index) FROM duckdb_columns() WHERE table_name = 'curriculum'`)
	if cols != "curriculumTitle,courseCount,userCount,startCount,startPercentage,testAverage,pitchAverage" {
		t.Errorf("curriculum columns = %s", cols)
	}
	if st := warehousetest.Scalar[string](t, db, `SELECT status FROM _sepipe_runs WHERE run_id = ?`, res.RunID); st != "succeeded" {
		t.Errorf("run status %s", st)
	}
}

// collectionOracle checks a collection table against DuckDB's own JSON
// reading of the raw pages: every column of the table, by its name's path
// (a__b is $.a.b), extracted from the items with DuckDB's JSON functions
// and cast to the column's type. Count, per-column sums and distincts, and
// row for row both ways: a swapped pair of columns fails it.
func collectionOracle(t *testing.T, db *sql.DB, base, token string, o pipeline.ObjectResult, dir string) {
	path, items := servicetest.V4Path+"/themes", "$.items"
	if o.Object == pipeline.StreamAssets {
		path, items = servicetest.AssetsPath+"/assets.json", "$.response.items"
	}
	var files []string
	for offset := 0; ; offset += 1000 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s%s?limit=1000&offset=%d", base, path, offset), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s offset %d: %d %v", o.Object, offset, resp.StatusCode, err)
		}
		f := filepath.Join(dir, fmt.Sprintf("%s-%05d.json", o.Object, offset))
		if err := os.WriteFile(f, body, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, load.Literal(f))
		if n := warehousetest.Scalar[int64](t, db, fmt.Sprintf(`SELECT json_array_length(json_extract(content::JSON, '%s')) FROM read_text(%s)`, items, load.Literal(f))); n < 1000 {
			break
		}
	}
	oracle := load.Ident("oracle_" + o.Object)
	if _, err := db.Exec(fmt.Sprintf(`CREATE TEMP TABLE %s AS SELECT unnest(from_json(json_extract(content::JSON, '%s'), '["JSON"]')) AS j FROM read_text([%s])`,
		oracle, items, strings.Join(files, ", "))); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position`, o.Object)
	if err != nil {
		t.Fatal(err)
	}
	type col struct{ name, typ string }
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	if len(cols) < 10 {
		t.Fatalf("%s has %d columns: the items' fields did not become columns", o.Object, len(cols))
	}
	table := load.Ident(o.Object)
	n := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+table)
	if on := warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+oracle); on != n || n != o.Rows || n == 0 {
		t.Errorf("table %d rows, run %d, oracle %d", n, o.Rows, on)
	}
	var mine, theirs []string
	for _, c := range cols {
		segs := strings.Split(c.name, "__")
		for i, s := range segs {
			segs[i] = `"` + s + `"`
		}
		jp := load.Literal("$." + strings.Join(segs, "."))
		id := load.Ident(c.name)
		var a, b string
		switch c.typ {
		case "BIGINT", "DOUBLE":
			a, b = "CAST("+id+" AS DOUBLE)", "TRY_CAST(json_extract_string(j, "+jp+") AS DOUBLE)"
			x := warehousetest.Scalar[sql.NullFloat64](t, db, "SELECT sum("+a+") FROM "+table)
			y := warehousetest.Scalar[sql.NullFloat64](t, db, "SELECT sum("+b+") FROM "+oracle)
			if x.Valid != y.Valid || math.Abs(x.Float64-y.Float64) > 1e-6*math.Max(1, math.Abs(y.Float64)) {
				t.Errorf("column %s: sum %v, oracle %v", c.name, x, y)
			}
		case "TIMESTAMP WITH TIME ZONE":
			a, b = "epoch("+id+")", "epoch(TRY_CAST(json_extract_string(j, "+jp+") AS TIMESTAMPTZ))"
		case "JSON":
			a, b = "CAST("+id+" AS VARCHAR)", "CAST(nullif(json_extract(j, "+jp+"), 'null'::JSON) AS VARCHAR)"
		default:
			a, b = "CAST("+id+" AS VARCHAR)", "json_extract_string(j, "+jp+")"
		}
		for _, agg := range []string{"count(DISTINCT %s)", "count(%s)"} {
			x := warehousetest.Scalar[int64](t, db, "SELECT "+fmt.Sprintf(agg, a)+" FROM "+table)
			y := warehousetest.Scalar[int64](t, db, "SELECT "+fmt.Sprintf(agg, b)+" FROM "+oracle)
			if x != y {
				t.Errorf("column %s: %s = %d, oracle %d", c.name, fmt.Sprintf(agg, "·"), x, y)
			}
		}
		mine, theirs = append(mine, a), append(theirs, b)
	}
	for _, q := range []string{
		fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s)", strings.Join(mine, ", "), table, strings.Join(theirs, ", "), oracle),
		fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s)", strings.Join(theirs, ", "), oracle, strings.Join(mine, ", "), table),
	} {
		if d := warehousetest.Scalar[int64](t, db, q); d != 0 {
			t.Errorf("%d rows differ between the table and the read_json oracle", d)
		}
	}
}

// objectCounts returns each stream table's row count (history tables
// and the events table aside).
func objectCounts(t *testing.T, out string) map[string]int64 {
	t.Helper()
	db := warehousetest.Open(t, out)
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()
		AND NOT starts_with(table_name, '_sepipe') AND NOT suffix(table_name, '_history') AND NOT suffix(table_name, '_versions') AND table_name <> ? ORDER BY 1`, load.EventsTable)
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
		m[n] = warehousetest.Scalar[int64](t, db, "SELECT count(*) FROM "+load.Ident(n))
	}
	return m
}

func TestRerunSameDayReplacesAndNextDayKeepsHistory(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(50))
	defer srv.Close()
	out := t.TempDir()
	c := client(t, srv.URL, srv.Service.AccessToken())
	ctx := context.Background()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	first := objectCounts(t, out)
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1.Add(3 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	second := objectCounts(t, out)
	if fmt.Sprint(first) != fmt.Sprint(second) || len(first) != 7 {
		t.Fatalf("same-day rerun changed counts: %v then %v", first, second)
	}
	lake := load.Lake{Root: out}
	for obj := range first {
		parts, _ := lake.Partitions(obj)
		if len(parts) != 1 {
			t.Errorf("%s: partitions %v after a same-day rerun", obj, parts)
		}
	}
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1.Add(24 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	db := warehousetest.Open(t, out)
	for obj, n := range first {
		parts, _ := lake.Partitions(obj)
		if len(parts) != 2 {
			t.Errorf("%s: partitions %v after the next day's run", obj, parts)
		}
		q := fmt.Sprintf("SELECT count(*) FROM read_parquet(%s, hive_partitioning = true)", load.Literal(filepath.Join(out, "lake", obj, "*", "*.parquet")))
		if got := warehousetest.Scalar[int64](t, db, q); got != 2*n {
			t.Errorf("%s: lake holds %d rows over two days, want %d", obj, got, 2*n)
		}
	}
	if runs := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM _sepipe_runs WHERE status = 'succeeded'`); runs != 3 {
		t.Errorf("runs recorded = %d", runs)
	}
	if _, err := os.Stat(filepath.Join(out, ".sepipe", "staging")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(out, ".sepipe", "staging"))
		if len(entries) != 0 {
			t.Errorf("staging left behind: %v", entries)
		}
	}
}

// tinyService serves one object, "thing", whose second page holds values
// that do not fit their fields.
func tinyService(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	base := servicetest.BasePath
	mux.HandleFunc(base+"/objects", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"objects":[{"id":"thing","displayName":"Thing","urls":{"describe":"`+base+`/objects/thing/describe","object":"`+base+`/objects/thing"}}]}`)
	})
	mux.HandleFunc(base+"/objects/thing/describe", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"fields":[{"id":"id","displayName":"ID","type":"int"},{"id":"score","displayName":"Score","type":"float"},{"id":"at","displayName":"At","type":"date"}]}`)
	})
	mux.HandleFunc(base+"/objects/thing", func(w http.ResponseWriter, r *http.Request) {
		raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
		switch {
		case strings.Contains(string(raw), `"page":2`):
			io.WriteString(w, `{"page":2,"resultsPerPage":2,"totalResults":4,"totalPages":2,"results":[{"id":3,"score":"high","at":"2026-01-01T00:00:00Z"},{"id":4,"score":1.5,"at":"yesterday"}]}`)
		case strings.Contains(string(raw), `"page":1`) || len(raw) == 0:
			io.WriteString(w, `{"page":1,"resultsPerPage":2,"totalResults":4,"totalPages":2,"results":[{"id":1,"score":2.5,"at":"2026-01-01T00:00:00Z"},{"id":2,"score":null,"at":null}]}`)
		default:
			io.WriteString(w, `{"page":3,"resultsPerPage":2,"totalResults":4,"totalPages":2,"results":[]}`)
		}
	})
	return httptest.NewServer(reportingOnly(mux.ServeHTTP))
}

// TestRejectsAreRecordedNotDropped: a value that does not fit its field
// is null in its row, which stays in the table; the value, its reason and
// its whole row are in _sepipe_rejects, and counted.
func TestRejectsAreRecordedNotDropped(t *testing.T) {
	t.Parallel()
	srv := tinyService(t)
	defer srv.Close()
	out := t.TempDir()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, "any", extract.WithPageSize(2)), pipeline.Config{Out: out, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	if o := objectResult(t, res, "thing"); o.Rows != 4 || o.RejectedRows != 0 || o.NulledValues != 2 {
		t.Errorf("rows %d rejected %d nulled %d, want 4, 0 and 2", o.Rows, o.RejectedRows, o.NulledValues)
	}
	db := warehousetest.Open(t, out)
	got := warehousetest.Scalar[string](t, db, `SELECT string_agg(id || ':' || coalesce(score::VARCHAR, '-') || ':' || coalesce(strftime("at", '%Y-%m-%d'), '-'), ' ' ORDER BY id) FROM thing`)
	if want := "1:2.5:2026-01-01 2:-:- 3:-:2026-01-01 4:1.5:-"; got != want {
		t.Errorf("table rows %s, want %s", got, want)
	}
	got = warehousetest.Scalar[string](t, db, `SELECT string_agg(object || '/' || page || '/' || row_in_page || '/' || field || '/' || raw_value || '/' || reason, ' | ' ORDER BY row_in_page) FROM _sepipe_rejects`)
	want := `thing/2/0/score/"high"/text is not a number | thing/2/1/at/"yesterday"/not an ISO 8601 date or date-time`
	if got != want {
		t.Errorf("rejects:\n got %s\nwant %s", got, want)
	}
	if raw := warehousetest.Scalar[string](t, db, `SELECT raw_row FROM _sepipe_rejects WHERE field = 'score'`); raw != `{"id":3,"score":"high","at":"2026-01-01T00:00:00Z"}` {
		t.Errorf("raw row = %s", raw)
	}
	if got := warehousetest.Scalar[string](t, db, `SELECT rejected_rows || ' ' || nulled_values FROM _sepipe_run_objects WHERE object = 'thing'`); got != "0 2" {
		t.Errorf("run objects rejected_rows, nulled_values = %s, want 0 2", got)
	}
}

func TestBadTokensLeaveWarehouseUntouched(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(20))
	defer srv.Close()
	out := t.TempDir()
	ctx := context.Background()
	if _, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	before := objectCounts(t, out)
	for name, tc := range map[string]struct {
		token string
		want  error
	}{
		"wrong token":       {"nope", extract.ErrUnauthorized},
		"no reporting role": {srv.Service.LimitedToken(), extract.ErrForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pipeline.Sync(ctx, client(t, srv.URL, tc.token), pipeline.Config{Out: out, Now: clock(day1.Add(24 * time.Hour))})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Errorf("the error shows the token: %v", err)
			}
			if after := objectCounts(t, out); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("warehouse changed: %v -> %v", before, after)
			}
			parts, _ := (load.Lake{Root: out}).Partitions("course")
			if len(parts) != 1 {
				t.Errorf("lake changed: %v", parts)
			}
		})
	}
}

func TestUnknownObject(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	_, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()),
		pipeline.Config{Out: t.TempDir(), Only: []string{"course", "coarse"}})
	if !errors.Is(err, pipeline.ErrUnknownObject) || !strings.Contains(err.Error(), `"coarse"`) {
		t.Fatalf("err = %v", err)
	}
}

// failing wraps the fake so that one object's describe answers 404.
func failing(svc http.Handler, object string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects/"+object+"/describe") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"response":{"code":3004,"name":"ResourceNotFoundError","message":"object went away"}}`)
			return
		}
		svc.ServeHTTP(w, r)
	})
}

// withoutFields answers object's describe with an empty field list.
func withoutFields(svc http.Handler, object string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/objects/"+object+"/describe") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"fields":[]}`)
			return
		}
		svc.ServeHTTP(w, r)
	})
}

// TestOneObjectFailingCommitsTheOthers: an object whose describe fails,
// or lists no fields (a stream without a column to load, whose SQL would
// not parse, failed the whole run's transaction), fails alone; the other
// streams commit.
func TestOneObjectFailingCommitsTheOthers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		h     func(http.Handler, string) http.Handler
		step  string
		cause error
	}{
		{"describe fails", failing, "describe", extract.ErrNotFound},
		{"no fields", withoutFields, "schema", schemas.ErrNoFields},
	} {
		t.Run(c.name, func(t *testing.T) { oneObjectFailing(t, c.h, c.step, c.cause) })
	}
}

func oneObjectFailing(t *testing.T, h func(http.Handler, string) http.Handler, step string, cause error) {
	svc := servicetest.New(servicetest.WithUsers(30))
	srv := httptest.NewServer(h(svc, "path"))
	defer srv.Close()
	out := t.TempDir()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, svc.AccessToken()), pipeline.Config{Out: out, Now: clock(day1)})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Failed) != 1 || re.Failed[0].Object != "path" || re.Failed[0].Step != step {
		t.Fatalf("err = %v, want a partial RunError naming path's %s", err, step)
	}
	if !errors.Is(err, cause) {
		t.Errorf("the object's cause (%v) is not reachable with errors.Is: %v", cause, err)
	}
	if res == nil || len(res.Objects) != 7 {
		t.Fatalf("result = %+v", res)
	}
	counts := objectCounts(t, out)
	if _, ok := counts["path"]; ok || len(counts) != 6 {
		t.Errorf("tables = %v, want the six that succeeded (four report objects, themes, assets)", counts)
	}
	db := warehousetest.Open(t, out)
	if st := warehousetest.Scalar[string](t, db, `SELECT status FROM _sepipe_runs`); st != "partial" {
		t.Errorf("run status %s", st)
	}
}

// gate wraps a handler so that page requests after page 1 wait for release.
type gate struct {
	h       http.Handler
	release chan struct{}
	waiting atomic.Int32
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Query().Get("parameters"); p != "" {
		raw, _ := base64.StdEncoding.DecodeString(p)
		if !strings.Contains(string(raw), `"page":1,`) {
			g.waiting.Add(1)
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
	}
	g.h.ServeHTTP(w, r)
}

func TestCancelledRunLeavesNothing(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(servicetest.WithUsers(100))
	g := &gate{h: svc, release: make(chan struct{})}
	srv := httptest.NewServer(g)
	defer srv.Close()
	out := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := pipeline.Sync(ctx, client(t, srv.URL, svc.AccessToken(), extract.WithPageSize(100)), pipeline.Config{Out: out, Only: []string{"userCourseProgress"}})
		done <- err
	}()
	for g.waiting.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("the run ended before its pages were gated: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// A second run on the same folder is refused while the first holds it.
	_, err := pipeline.Sync(context.Background(), client(t, srv.URL, svc.AccessToken()), pipeline.Config{Out: out})
	if !errors.Is(err, pipeline.ErrBusy) {
		t.Errorf("concurrent run: err = %v, want ErrBusy", err)
	}
	stop := errors.New("operator pressed ctrl-c")
	cancel(stop)
	err = <-done
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the cancel cause", err)
	}
	close(g.release)
	if _, err := os.Stat(filepath.Join(out, "warehouse.duckdb")); err == nil {
		if counts := objectCounts(t, out); len(counts) != 0 {
			t.Errorf("a cancelled run left tables: %v", counts)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "lake")); err == nil {
		t.Error("a cancelled run published to the lake")
	}
	entries, _ := os.ReadDir(filepath.Join(out, ".sepipe", "staging"))
	if len(entries) != 0 {
		t.Errorf("staging left behind: %v", entries)
	}
}

func TestUnwritableOut(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	_, err := pipeline.Sync(context.Background(), nil, pipeline.Config{Out: filepath.Join(f, "sub")})
	if err == nil || !strings.Contains(err.Error(), f) {
		t.Fatalf("err = %v, want one naming %s", err, f)
	}
}

// reportingOnly serves a tenant's Coach reporting with h, and v3 assets
// and v4 themes as empty lists: a tenant whose only data is report objects.
func reportingOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case servicetest.AssetsPath + "/assets.json":
			_, _ = w.Write([]byte(`{"meta":{"count":0},"response":{"items":[]}}`))
		case servicetest.V4Path + "/themes":
			_, _ = w.Write([]byte(`{"count":0,"items":[]}`))
		default:
			h(w, r)
		}
	})
}
