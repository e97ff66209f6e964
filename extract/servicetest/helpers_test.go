package servicetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// row is one decoded result row; numbers stay json.Number.
type row = map[string]any

type resultsBody struct {
	Page           int64 `json:"page"`
	ResultsPerPage int   `json:"resultsPerPage"`
	TotalResults   int   `json:"totalResults"`
	TotalPages     int   `json:"totalPages"`
	Results        []row `json:"results"`
}

func newTestServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	srv := NewServer(opts...)
	t.Cleanup(srv.Close)
	return srv
}

// do sends method to BasePath+path with token (none when empty) and returns
// the status, the headers and the body.
func do(t testing.TB, srv *Server, method, path, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+BasePath+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func get(t testing.TB, srv *Server, path string) (int, []byte) {
	t.Helper()
	status, _, body := do(t, srv, http.MethodGet, path, srv.Service.AccessToken())
	return status, body
}

// paramsPath is the results path of obj with params JSON-encoded in
// standard padded Base64.
func paramsPath(t testing.TB, obj string, params any) string {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return "/objects/" + obj + "?parameters=" + url.QueryEscape(base64.StdEncoding.EncodeToString(b))
}

func decodeResults(t testing.TB, body []byte) resultsBody {
	t.Helper()
	var r resultsBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding results: %v\n%s", err, body)
	}
	return r
}

// query fetches one page and fails the test unless it is a 200.
func fetchPage(t testing.TB, srv *Server, obj string, params map[string]any) resultsBody {
	t.Helper()
	status, body := get(t, srv, paramsPath(t, obj, params))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	return decodeResults(t, body)
}

// fetchAll reads every page of obj with params (page and resultsPerPage
// are set here) and checks the paging totals on the way.
func fetchAll(t testing.TB, srv *Server, obj string, params map[string]any, perPage int) []row {
	t.Helper()
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	p["resultsPerPage"] = perPage
	var all []row
	for page := 1; ; page++ {
		p["page"] = page
		r := fetchPage(t, srv, obj, p)
		if r.Page != int64(page) || r.ResultsPerPage != perPage {
			t.Fatalf("page %d: body says page %d, resultsPerPage %d", page, r.Page, r.ResultsPerPage)
		}
		if want := (r.TotalResults + perPage - 1) / perPage; r.TotalPages != want {
			t.Fatalf("totalPages %d, want ceil(%d/%d) = %d", r.TotalPages, r.TotalResults, perPage, want)
		}
		all = append(all, r.Results...)
		if page >= r.TotalPages {
			if len(all) != r.TotalResults {
				t.Fatalf("read %d rows, totalResults is %d", len(all), r.TotalResults)
			}
			return all
		}
		if len(r.Results) != perPage {
			t.Fatalf("page %d of %d has %d rows, want %d", page, r.TotalPages, len(r.Results), perPage)
		}
	}
}

// errorResponse decodes a v3 error body.
func errorResponse(t testing.TB, body []byte) (code int, name, message string) {
	t.Helper()
	var e struct {
		Response struct {
			Code    int    `json:"code"`
			Name    string `json:"name"`
			Message string `json:"message"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if e.Response.Code == 0 || e.Response.Name == "" || e.Response.Message == "" {
		t.Fatalf("error body lacks code, name or message: %s", body)
	}
	return e.Response.Code, e.Response.Name, e.Response.Message
}
