package servicetest

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func objectIDs(t *testing.T, srv *Server) []string {
	t.Helper()
	status, body := get(t, srv, "/objects")
	if status != http.StatusOK {
		t.Fatalf("objects: %d %s", status, body)
	}
	var list struct{ Objects []struct{ ID string } }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range list.Objects {
		ids = append(ids, o.ID)
	}
	return ids
}

func TestHostileWireObjectsOnlyWhenAsked(t *testing.T) {
	plain := objectIDs(t, newTestServer(t))
	hostile := objectIDs(t, newTestServer(t, WithHostile()))
	if len(hostile) != len(plain)+len(HostileObjectIDs()) {
		t.Fatalf("WithHostile lists %v", hostile)
	}
	for _, id := range append(plain, hostile...) {
		if strings.HasPrefix(id, "wire_") {
			t.Fatalf("%s listed without WithHostileWire", id)
		}
	}
	srv := newTestServer(t, WithHostile(), WithHostileWire(HostileRepeatedPage, HostileHugeBody, HostileRepeatedPage))
	got := objectIDs(t, srv)
	want := append(slices.Clone(hostile), "wire_repeat", "wire_huge")
	if !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	if status, _ := get(t, srv, "/objects/wire_stall/describe"); status != http.StatusNotFound {
		t.Errorf("describe of a case not asked for: %d, want 404", status)
	}
	status, body := get(t, srv, "/objects/wire_repeat/describe")
	if status != http.StatusOK || !strings.Contains(string(body), `"id":"name"`) {
		t.Errorf("describe: %d %s", status, body)
	}
	all := objectIDs(t, newTestServer(t, WithHostileWire()))
	if n := len(all) - len(plain); n != len(AllHostileCases()) || slices.Contains(all, HostileEndlessUntotalled.ObjectID()) {
		t.Errorf("WithHostileWire() lists %v", all)
	}
}

func TestParseHostileCases(t *testing.T) {
	got, err := ParseHostileCases("repeat, huge,endless-untotalled")
	if err != nil || !slices.Equal(got, []HostileCase{HostileRepeatedPage, HostileHugeBody, HostileEndlessUntotalled}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseHostileCases("all"); err != nil || !slices.Equal(got, AllHostileCases()) {
		t.Fatalf("all: %v %v", got, err)
	}
	for _, bad := range []string{"", " , ", "repeat,nope"} {
		if _, err := ParseHostileCases(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if id := HostileAbsurdTotal.ObjectID(); id != "wire_absurd_total" {
		t.Errorf("ObjectID %q", id)
	}
}

func ids(rows []row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(r["id"].(json.Number)))
	}
	return out
}

func TestHostileWirePaging(t *testing.T) {
	srv := newTestServer(t, WithHostileWire(HostileRepeatedPage, HostileEndlessPages, HostileEndlessUntotalled, HostileAbsurdTotal))
	page := func(obj string, p int) (resultsBody, map[string]json.RawMessage) {
		t.Helper()
		status, body := get(t, srv, paramsPath(t, obj, map[string]any{"page": p, "resultsPerPage": 3}))
		if status != http.StatusOK {
			t.Fatalf("%s page %d: %d %s", obj, p, status, body)
		}
		var keys map[string]json.RawMessage
		json.Unmarshal(body, &keys)
		return decodeResults(t, body), keys
	}

	p2, _ := page("wire_repeat", 2)
	p3, _ := page("wire_repeat", 3)
	p4, _ := page("wire_repeat", 4)
	if p3.Page != 3 || p3.TotalResults != 9 || p3.TotalPages != 3 || !slices.Equal(ids(p3.Results), ids(p2.Results)) ||
		!slices.Equal(ids(p2.Results), []string{"4", "5", "6"}) || len(p4.Results) != 0 {
		t.Errorf("repeat: page 2 %+v, page 3 %+v, page 4 %+v", p2, p3, p4)
	}
	if n := srv.HostileWire().RepeatedPages; n != 1 {
		t.Errorf("RepeatedPages %d", n)
	}

	p1, _ := page("wire_endless", 1)
	p7, _ := page("wire_endless", 7)
	if p1.TotalPages != 2 || p1.TotalResults != 6 || p7.TotalPages != 8 || !slices.Equal(ids(p7.Results), []string{"19", "20", "21"}) {
		t.Errorf("endless: page 1 %+v, page 7 %+v", p1, p7)
	}

	u, keys := page("wire_endless_untotalled", 1000)
	if _, ok := keys["totalResults"]; ok || keys["totalPages"] != nil || !slices.Equal(ids(u.Results), []string{"2998", "2999", "3000"}) {
		t.Errorf("untotalled: %v %+v", keys, u)
	}

	_, keys = page("wire_absurd_total", 1)
	if string(keys["totalResults"]) != "9000000000000000" || string(keys["totalPages"]) != "3000000000000000" {
		t.Errorf("absurd: %s %s", keys["totalResults"], keys["totalPages"])
	}
}

func TestHostileWireHugeBodyIsStreamed(t *testing.T) {
	const size = 3<<20 + 17
	srv := newTestServer(t, WithHostileWire(HostileHugeBody), WithHostileHugeBytes(size))
	status, h, body := do(t, srv, http.MethodGet, paramsPath(t, "wire_huge", map[string]any{"resultsPerPage": 10}), srv.Service.AccessToken())
	if status != http.StatusOK || h.Get("Content-Length") != "" || len(body) != size {
		t.Fatalf("status %d, Content-Length %q, %d bytes, want %d", status, h.Get("Content-Length"), len(body), size)
	}
	r := decodeResults(t, body)
	if r.TotalResults != 1 || len(r.Results) != 1 || len(r.Results[0]["name"].(string)) < size-200 {
		t.Fatalf("page: total %d, %d rows", r.TotalResults, len(r.Results))
	}
	if n := srv.HostileWire().HugeBytes; n != size {
		t.Errorf("HugeBytes %d, want %d", n, size)
	}
	if p2 := fetchPage(t, srv, "wire_huge", map[string]any{"page": 2, "resultsPerPage": 10}); len(p2.Results) != 0 {
		t.Errorf("page 2: %+v", p2)
	}
}

func TestHostileWireRedirectsToAnotherOrigin(t *testing.T) {
	srv := newTestServer(t, WithHostileWire(HostileRedirect))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	path := srv.URL + BasePath + paramsPath(t, "wire_redirect", map[string]any{"resultsPerPage": 10})
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	from, _ := url.Parse(srv.URL)
	if resp.StatusCode != http.StatusFound || loc == nil || loc.Hostname() != from.Hostname() || loc.Port() == from.Port() ||
		loc.RequestURI() != strings.TrimPrefix(path, srv.URL) {
		t.Fatalf("%d to %q, want 302 to another port of %s, same path and query", resp.StatusCode, loc, from.Hostname())
	}
	if st := srv.HostileWire(); st.OtherOrigin != "http://"+loc.Host || st.Redirects != 1 || st.OtherOriginRequests != 0 {
		t.Fatalf("stats %+v", st)
	}

	// Without a credential the other origin answers 401 and counts none.
	resp, err = http.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := srv.HostileWire(); resp.StatusCode != http.StatusUnauthorized || st.OtherOriginRequests != 1 || st.OtherOriginCredentials != 0 {
		t.Fatalf("without a credential: %d, %+v", resp.StatusCode, st)
	}
	// With one, it takes it, as a thief would.
	req, _ = http.NewRequest(http.MethodGet, loc.String(), nil)
	req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if st := srv.HostileWire(); resp.StatusCode != http.StatusOK || len(decodeResults(t, body).Results) != 5 || st.OtherOriginCredentials != 1 {
		t.Fatalf("with a credential: %d %s, %+v", resp.StatusCode, body, st)
	}
	// A credential in the URL counts too.
	resp, err = http.Get(loc.String() + "&token=" + srv.Service.AccessToken())
	if err == nil {
		resp.Body.Close()
	}
	if n := srv.HostileWire().OtherOriginCredentials; n != 2 {
		t.Errorf("a token in the query: %d credentials counted, want 2", n)
	}

	// Closing the Service closes the other origin.
	srv.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", loc.Host, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the other origin still accepts connections after Close")
		}
	}
}

func TestHostileWireSilenceAndStall(t *testing.T) {
	for _, c := range []HostileCase{HostileSilence, HostileStall} {
		t.Run(string(c), func(t *testing.T) {
			srv := NewServer(WithHostileWire(c))
			hc := &http.Client{Timeout: 300 * time.Millisecond}
			req, _ := http.NewRequest(http.MethodGet, srv.URL+BasePath+paramsPath(t, c.ObjectID(), map[string]any{"resultsPerPage": 10}), nil)
			req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
			start := time.Now()
			resp, err := hc.Do(req)
			if c == HostileStall {
				if err != nil {
					t.Fatalf("stall: no headers: %v", err)
				}
				var body []byte
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if len(body) == 0 || !strings.HasPrefix(string(body), `{"page":1`) {
					t.Errorf("stall: the first bytes were not sent: %q", body)
				}
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(fmtErr(err), "Timeout") {
				t.Fatalf("%v, want a client timeout", err)
			}
			if took := time.Since(start); took < 250*time.Millisecond {
				t.Errorf("answered after %s", took)
			}
			if n := srv.HostileWire().Held; n != 1 {
				t.Errorf("Held %d, want 1", n)
			}
			// A held connection does not keep Close waiting.
			done := make(chan struct{})
			go func() { srv.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Close waits for the held connection")
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
