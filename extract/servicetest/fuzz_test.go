package servicetest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// FuzzParameters sends arbitrary parameters documents (Base64-encoded, or
// raw when raw is set) to the results endpoint. The answer must be a 200
// with a valid results body or a 400 with a v3 error body; never a panic,
// never a 500.
func FuzzParameters(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"page":2,"resultsPerPage":3}`, `{"fields":["userId","score"]}`,
		`{"filters":[{"field":"score","operator":"be","values":[50,90]}],"sort":{"field":"score","direction":"desc"}}`,
		`{"filters":[{"field":"status","operator":"in","values":["Completed","Overdue"]}]}`,
		`{"filters":[{"field":"dueDate","operator":"lt","values":["2026-01-01"]}]}`,
		`{"filters":[{"field":"userName","operator":"co","values":["JOS"]}]}`,
		`{"page":1e3}`, `{"resultsPerPage":-1}`, `[`, `null`, `{"sort":null}`, "\x00",
	} {
		f.Add(s, false)
	}
	f.Add("!!!", true)
	f.Add("e30", true)
	svc := New(WithUsers(20))
	f.Fuzz(func(t *testing.T, doc string, raw bool) {
		p := doc
		if !raw {
			p = base64.StdEncoding.EncodeToString([]byte(doc))
		}
		req := httptest.NewRequest(http.MethodGet, BasePath+"/objects/userCourseProgress?parameters="+url.QueryEscape(p), nil)
		req.Header.Set("Authorization", "Bearer "+svc.AccessToken())
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			var r resultsBody
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
				t.Fatalf("200 with invalid body: %v", err)
			}
		case http.StatusBadRequest:
			errorResponse(t, w.Body.Bytes())
		default:
			t.Fatalf("status %d for %q: %s", w.Code, doc, w.Body.Bytes())
		}
	})
}
