package servicetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// apiAnswer is one answer of the fake.
type apiAnswer struct {
	status int
	h      http.Header
	body   []byte
}

func (r apiAnswer) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d: body is not JSON: %v: %s", r.status, err, r.body)
	}
}

func (r apiAnswer) want(t testing.TB, status int) apiAnswer {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

type reqOpt func(*http.Request)

func withBearer(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func withJSON(v any) reqOpt {
	return func(r *http.Request) {
		var b []byte
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else {
			b, _ = json.Marshal(v)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Type", "application/json")
	}
}

func withForm(v url.Values) reqOpt {
	return func(r *http.Request) {
		b := v.Encode()
		r.Body = io.NopCloser(strings.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
}

// callAPI sends method to srv.URL+path.
func callAPI(t testing.TB, srv *Server, method, path string, opts ...reqOpt) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(req)
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
	return apiAnswer{resp.StatusCode, resp.Header, b}
}

// problemBody is a decoded application/problem+json apiAnswer.
type problemBody struct {
	Type   string        `json:"type"`
	Title  string        `json:"title"`
	Detail string        `json:"detail"`
	Status int           `json:"status"`
	Meta   []problemMeta `json:"meta"`
}

// wantProblem checks a problem+json apiAnswer of status and returns it.
func wantProblem(t testing.TB, r apiAnswer, status int) problemBody {
	t.Helper()
	r.want(t, status)
	if ct := r.h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problemBody
	r.json(t, &p)
	if !strings.HasPrefix(p.Type, "/errors/") || p.Title == "" || p.Detail == "" || p.Status != status {
		t.Fatalf("problem lacks type, title, detail or status: %s", r.body)
	}
	switch status {
	case http.StatusUnauthorized:
		if !strings.HasPrefix(r.h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without WWW-Authenticate: %v", r.h)
		}
	case http.StatusMethodNotAllowed:
		if r.h.Get("Allow") == "" {
			t.Errorf("405 without Allow")
		}
	}
	return p
}

// wantV3Error checks a v3-style error apiAnswer of status and code.
func wantV3Error(t testing.TB, r apiAnswer, status, code int) string {
	t.Helper()
	r.want(t, status)
	c, _, msg := errorResponse(t, r.body)
	if code != 0 && c != code {
		t.Fatalf("code %d, want %d: %s", c, code, r.body)
	}
	return msg
}

// metaNames returns the names in the meta of a validation problem.
func metaNames(p problemBody) []string {
	var s []string
	for _, m := range p.Meta {
		s = append(s, m.Name+":"+m.Category)
	}
	return s
}

// checkHead checks that HEAD path answers like GET without a body.
func checkHead(t *testing.T, srv *Server, path string, opts ...reqOpt) {
	t.Helper()
	g := callAPI(t, srv, http.MethodGet, path, opts...)
	h := callAPI(t, srv, http.MethodHead, path, opts...)
	if h.status != g.status || len(h.body) != 0 {
		t.Fatalf("HEAD %s: status %d (GET %d), %d body bytes", path, h.status, g.status, len(h.body))
	}
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if h.h.Get(k) != g.h.Get(k) {
			t.Errorf("HEAD %s: %s %q, GET has %q", path, k, h.h.Get(k), g.h.Get(k))
		}
	}
}

var (
	hex32RE = regexp.MustCompile(`^[0-9a-f]{32}$`)
	ulidRE  = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
	uuid4RE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

func TestIdentifiers(t *testing.T) {
	a, b := New(WithSeed(7)), New(WithSeed(7))
	defer a.Close()
	defer b.Close()
	for range 50 {
		u1, u2 := a.live.ulid(DefaultNow), b.live.ulid(DefaultNow)
		if u1 != u2 || !ulidRE.MatchString(u1) {
			t.Fatalf("ulid %q / %q", u1, u2)
		}
		v1, v2 := a.live.uuid4(), b.live.uuid4()
		if v1 != v2 || !uuid4RE.MatchString(v1) {
			t.Fatalf("uuid %q / %q", v1, v2)
		}
		if h := a.live.hex32(); !hex32RE.MatchString(h) || h != b.live.hex32() {
			t.Fatalf("hex32 %q", h)
		}
	}
	// The time part of a ULID is the 48-bit millisecond time, big-endian.
	if got := New().live.ulid(DefaultNow)[:10]; got != "01M6AV2ZR0" {
		t.Errorf("ULID time part %s for %s", got, DefaultNow)
	}
	if hexID(1, "asset", 0) == hexID(1, "asset", 1) || hexID(1, "asset", 0) == hexID(2, "asset", 0) ||
		hexID(1, "asset", 0) == hexID(1, "theme", 0) || !hex32RE.MatchString(hexID(1, "x", 3)) {
		t.Error("hexID does not separate seed, kind and index")
	}
}
