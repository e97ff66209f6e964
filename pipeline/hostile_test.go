package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sepipe/sepipe/pipeline"
)

// oddTenant serves one report object, "odd", whose rows carry text that is
// not valid UTF-8: the reporting interface as the document shows it, with
// the rows given.
func oddTenant(t *testing.T, rows []string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
// repaired (U+FFFD), counted; a rejected row whose raw text is not valid
// UTF-8 is recorded with its exact bytes; the stream commits.
func TestInvalidUTF8NeverFailsARun(t *testing.T) {
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
	if o.Rows != 2 || o.RejectedRows != 1 || o.RepairedValues != 2 {
		t.Fatalf("rows %d, rejected %d, repaired %d; want 2, 1, 2", o.Rows, o.RejectedRows, o.RepairedValues)
	}
	db := openWH(t, out)
	if got := scalar[string](t, db, `SELECT name FROM odd WHERE id = 2`); got != "bad \uFFFD bytes" {
		t.Errorf("stored %q", got)
	}
	raw := scalar[[]byte](t, db, `SELECT raw_row_bytes FROM _sepipe_rejects WHERE object = 'odd' AND field = 'n'`)
	if string(raw) != "{\"id\":3,\"name\":\"also \xc3\x28 bad\",\"n\":\"not a number\"}" {
		t.Errorf("raw bytes of the rejected row: %q", raw)
	}
}
