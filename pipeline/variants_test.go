package pipeline_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// rawItems fetches every item of a list from the fake as it serves them,
// keyed by id.
func rawItems(t *testing.T, base, token, path string, v3 bool) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for offset := 0; ; offset += 1000 {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s?limit=1000&offset=%d", base, path, offset), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items    []map[string]any `json:"items"`
			Response struct {
				Items []map[string]any `json:"items"`
			} `json:"response"`
		}
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		err = dec.Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		items := page.Items
		if v3 {
			items = page.Response.Items
		}
		for _, it := range items {
			out[fmt.Sprint(it["id"])] = it
		}
		if len(items) < 1000 {
			return out
		}
	}
}

// norm is a value as text comparable across JSON and DuckDB: numbers by
// value, instants in UTC, URLs with their credentials redacted.
func norm(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return norm(string(x))
	case int64:
		return strconv.FormatFloat(float64(x), 'g', -1, 64)
	case int32:
		return strconv.FormatFloat(float64(x), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case string:
		s := strings.TrimSpace(x)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		for _, l := range []string{time.RFC3339Nano, "2006-01-02"} {
			if ts, err := time.Parse(l, s); err == nil {
				return ts.UTC().Format(time.RFC3339Nano)
			}
		}
		if s == "true" || s == "false" {
			return s
		}
		if strings.HasPrefix(s, "http") {
			if u, err := url.Parse(s); err == nil {
				return service.RedactURL(u)
			}
		}
		return x
	}
	return fmt.Sprint(v)
}

// leaves calls fn with every non-null scalar below v.
func leaves(v any, fn func(any)) {
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for _, e := range x {
			leaves(e, fn)
		}
	case []any:
		for _, e := range x {
			leaves(e, fn)
		}
	default:
		fn(x)
	}
}

// rowValues is every value a table's rows hold, by row id: typed columns
// as they are, json columns by their leaves.
func rowValues(t *testing.T, db *sql.DB, table string) map[string]map[string]bool {
	t.Helper()
	types := map[string]string{}
	rows, err := db.Query(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?`, table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		types[n] = ty
	}
	rows.Close()
	rows, err = db.Query(`SELECT * FROM ` + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := map[string]map[string]bool{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		var id string
		for i, c := range cols {
			if c == "id" {
				id = fmt.Sprint(vals[i])
			}
			v := vals[i]
			if types[c] == "JSON" {
				var j any
				switch x := v.(type) {
				case string:
					// The driver hands a JSON value over decoded (a
					// string value as the string) or as its text.
					set[norm(x)] = true
					d := json.NewDecoder(strings.NewReader(x))
					d.UseNumber()
					if d.Decode(&j) != nil {
						j = x
					}
				case []byte:
					d := json.NewDecoder(bytes.NewReader(x))
					d.UseNumber()
					if err := d.Decode(&j); err != nil {
						t.Fatalf("%s.%s holds invalid JSON %q", table, c, x)
					}
				default:
					j = x
				}
				v = j
			}
			leaves(v, func(l any) { set[norm(l)] = true })
		}
		out[id] = set
	}
	return out
}

// rejectValues is every rejected value of a table, by the id in its row.
func rejectValues(t *testing.T, db *sql.DB, table string) map[string]map[string]bool {
	t.Helper()
	rows, err := db.Query(`SELECT raw_value, raw_row FROM _sepipe_rejects WHERE object = ?`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]bool{}
	for rows.Next() {
		var v, row string
		if err := rows.Scan(&v, &row); err != nil {
			t.Fatal(err)
		}
		var r struct{ ID any }
		_ = json.Unmarshal([]byte(row), &r)
		id := fmt.Sprint(r.ID)
		if out[id] == nil {
			out[id] = map[string]bool{}
		}
		var j any
		d := json.NewDecoder(strings.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&j); err != nil {
			t.Fatalf("reject value %q is not JSON", v)
		}
		leaves(j, func(l any) { out[id][norm(l)] = true })
	}
	return out
}

// everyLeafStored checks that every non-null leaf value of every item is
// in the warehouse row with the same id, or among its rejects.
func everyLeafStored(t *testing.T, db *sql.DB, table string, items map[string]map[string]any) (rejected int) {
	t.Helper()
	stored := rowValues(t, db, table)
	rejects := rejectValues(t, db, table)
	if len(stored) != len(items) {
		t.Errorf("%s: %d rows, the fake served %d items", table, len(stored), len(items))
	}
	missing := 0
	for id, it := range items {
		row, ok := stored[id]
		if !ok {
			t.Errorf("%s: no row for item %s", table, id)
			continue
		}
		leaves(it, func(l any) {
			n := norm(l)
			switch {
			case row[n]:
			case rejects[id][n]:
				rejected++
			default:
				if missing++; missing <= 10 {
					t.Errorf("%s item %s: value %v (%T) is neither in its row nor in its rejects", table, id, l, l)
				}
			}
		})
	}
	return rejected
}

// TestShapeVariantsLoseNothing: a fake whose items change JSON type from
// item to item (shape variants) syncs without a failed stream, and every
// non-null leaf value of every asset and theme it served is in the row with
// the same id, in a typed column or inside a json column; under a frozen
// schema, the values that do not fit are in _sepipe_rejects, their rows
// kept.
func TestShapeVariantsLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := servicetest.NewServer(servicetest.WithUsers(80), servicetest.WithSeed(11), servicetest.WithShapeVariants())
	defer srv.Close()
	c := client(t, srv.URL, srv.Service.AccessToken(), extract.WithPageSize(40))
	out := t.TempDir()
	only := []string{pipeline.StreamAssets, pipeline.StreamThemes}
	res, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Only: only, Now: clock(day1)})
	if err != nil {
		t.Fatal(err)
	}
	assets := rawItems(t, srv.URL, srv.Service.AccessToken(), servicetest.AssetsPath+"/assets.json", true)
	themes := rawItems(t, srv.URL, srv.Service.AccessToken(), servicetest.V4Path+"/themes", false)
	if len(assets) < 100 || objectResult(t, res, pipeline.StreamAssets).Pages < 3 {
		t.Fatalf("%d assets in %d pages: too few to test widening after the first page", len(assets), objectResult(t, res, pipeline.StreamAssets).Pages)
	}
	db := warehousetest.Open(t, out)
	everyLeafStored(t, db, "assets", assets)
	everyLeafStored(t, db, "themes", themes)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM _sepipe_rejects WHERE object IN ('assets', 'themes')`); n != 0 {
		t.Errorf("%d rejects under evolve: the schema should have widened to hold every value", n)
	}
	// The variants widened their columns: a field sent as an array on some
	// items and an object on others is one json column.
	if ty := warehousetest.Scalar[string](t, db, `SELECT data_type FROM information_schema.columns WHERE table_name = 'assets' AND column_name = 'tags'`); ty != "JSON" {
		t.Errorf("assets.tags is %s, want JSON", ty)
	}
	db.Close()

	// Frozen: a schema learnt from items without variants, then items with
	// them. Nothing fails, rows are kept, misfits are in _sepipe_rejects.
	plain := servicetest.NewServer(servicetest.WithUsers(80), servicetest.WithSeed(11))
	defer plain.Close()
	frozen := t.TempDir()
	streams := map[string]pipeline.StreamConfig{pipeline.StreamAssets: {Contract: schemas.Freeze}}
	if _, err := pipeline.Sync(ctx, client(t, plain.URL, plain.Service.AccessToken(), extract.WithPageSize(40)),
		pipeline.Config{Out: frozen, Only: []string{pipeline.StreamAssets}, Streams: streams, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	colsBefore := warehousetest.Scalar[int64](t, warehousetest.Open(t, frozen), `SELECT count(*) FROM information_schema.columns WHERE table_name = 'assets'`)
	res, err = pipeline.Sync(ctx, c, pipeline.Config{Out: frozen, Only: []string{pipeline.StreamAssets}, Streams: streams, Now: clock(day1.Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	db = warehousetest.Open(t, frozen)
	defer db.Close()
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'assets'`); n != colsBefore {
		t.Errorf("the frozen table went from %d to %d columns", colsBefore, n)
	}
	if rejected := everyLeafStored(t, db, "assets", assets); rejected == 0 {
		t.Error("no value was found only in _sepipe_rejects: the variants should not fit the frozen schema")
	}
	if o := objectResult(t, res, pipeline.StreamAssets); o.RejectedRows != 0 || o.Rows != int64(len(assets)) {
		t.Errorf("frozen run: %d rows, %d left out; want every row kept", o.Rows, o.RejectedRows)
	}
}
