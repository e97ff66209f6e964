package servicetest

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestWideObject: the wide object is listed and described only with
// WithWideObject, with its 64 fields; its rows are the same on every read,
// one value a field of the declared type, comments of 100 to 400
// characters, and a filter on a date field applies.
func TestWideObject(t *testing.T) {
	if ids := objectIDs(t, newTestServer(t)); slices.Contains(ids, WideObjectID) {
		t.Fatalf("%s listed without WithWideObject: %v", WideObjectID, ids)
	}
	srv := newTestServer(t, WithUsers(30), WithWideObject())
	if ids := objectIDs(t, srv); ids[len(ids)-1] != WideObjectID {
		t.Fatalf("objects %v, want %s last", ids, WideObjectID)
	}
	status, body := get(t, srv, "/objects/"+WideObjectID+"/describe")
	if status != http.StatusOK {
		t.Fatalf("describe: %d %s", status, body)
	}
	var d struct{ Fields []struct{ ID, Type string } }
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Fields) != 64 || d.Fields[0].ID != "activityId" || d.Fields[8].Type != "string" || d.Fields[12].Type != "date" {
		t.Fatalf("describe: %+v", d.Fields)
	}
	page := func(params string) ([]map[string]any, []byte) {
		t.Helper()
		status, body := get(t, srv, "/objects/"+WideObjectID+"?parameters="+b64(params))
		if status != http.StatusOK {
			t.Fatalf("results %s: %d %s", params, status, body)
		}
		var r struct{ Results []map[string]any }
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r.Results, body
	}
	rows, first := page(`{"page":1,"resultsPerPage":1000}`)
	if len(rows) != WideObjectRows(30) {
		t.Fatalf("%d rows, want %d", len(rows), WideObjectRows(30))
	}
	if _, again := page(`{"page":1,"resultsPerPage":1000}`); string(again) != string(first) {
		t.Error("the rows differ between two reads")
	}
	nulls := 0
	for _, r := range rows {
		if len(r) != 64 {
			t.Fatalf("a row has %d fields, want 64: %v", len(r), r)
		}
		for _, f := range d.Fields {
			v := r[f.ID]
			if v == nil {
				nulls++
				continue
			}
			switch s, ok := v.(string); {
			case f.ID == "field08" && (!ok || len(s) < 100 || len(s) > 400):
				t.Errorf("comment %q: %d characters, want 100 to 400", s, len(s))
			case f.Type == "int" || f.Type == "float" || f.Type == "percent":
				if _, ok := v.(float64); !ok {
					t.Errorf("%s = %v, want a number", f.ID, v)
				}
			}
		}
	}
	if nulls == 0 {
		t.Error("no nulls")
	}
	filtered, _ := page(`{"page":1,"resultsPerPage":1000,"filters":[{"field":"field04","operator":"lt","values":["2026-10-15"]}]}`)
	if len(filtered) == 0 || len(filtered) >= len(rows) {
		t.Errorf("a filter on field04 kept %d of %d rows", len(filtered), len(rows))
	}
}
