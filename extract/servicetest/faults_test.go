package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reply is one answer as the client saw it, read error included.
type reply struct {
	status  int
	header  http.Header
	body    []byte
	readErr error
}

// send sends method to path (absolute, from the host) with the access token
// and reads the whole answer, keeping a read error instead of failing.
func send(t testing.TB, srv *Server, method, path string) reply {
	t.Helper()
	return sendAs(t, srv, method, path, srv.Service.AccessToken())
}

// sendAs is send with the bearer token token.
func sendAs(t testing.TB, srv *Server, method, path, token string) reply {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b, rerr}
}

// faultPaths are reporting requests of every kind, answered 200 or 400.
func faultPaths(t testing.TB) []string {
	return []string{
		BasePath + "/objects",
		BasePath + "/objects/course/describe",
		BasePath + "/objects/userCourseProgress/describe",
		BasePath + paramsPath(t, "course", map[string]any{"resultsPerPage": 5, "page": 2}),
		BasePath + paramsPath(t, "userCourseProgress", map[string]any{"resultsPerPage": 50, "sort": map[string]any{"field": "score", "direction": "desc"}}),
		BasePath + paramsPath(t, "user", map[string]any{"filters": []any{map[string]any{"field": "team", "operator": "in", "values": []string{"SMB"}}}}),
		BasePath + paramsPath(t, "course", map[string]any{"resultsPerPage": 0}), // 400
		BasePath + "/objects/nope/describe", // 404
	}
}

func TestFaultsOffAreByteIdentical(t *testing.T) {
	clean := newTestServer(t)
	off := newTestServer(t, WithFaultSeed(99), WithRateLimit(0), WithFailRate(0), WithLatency(0),
		WithDropRate(0), WithTruncateRate(0), WithPageDrift(false), WithSchemaDrift(false), WithTokenTTL(0),
		WithNoRetryAfter(), WithRateWindow(time.Millisecond), WithPageDriftEvents(3))
	// Faults switched on but without effect on these few requests.
	idle := newTestServer(t, WithRateLimit(1000), WithLatency(time.Microsecond), WithTokenTTL(time.Hour),
		WithPageDriftEvents(0), WithPageDrift(true))
	for _, path := range faultPaths(t) {
		want := send(t, clean, http.MethodGet, path)
		for name, srv := range map[string]*Server{"off": off, "idle": idle} {
			got := send(t, srv, http.MethodGet, path)
			if got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Errorf("%s %s: %d %q, clean server %d %q", name, path, got.status, got.body, want.status, want.body)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Retry-After", "WWW-Authenticate"} {
				if got.header.Get(h) != want.header.Get(h) {
					t.Errorf("%s %s: %s %q, clean server %q", name, path, h, got.header.Get(h), want.header.Get(h))
				}
			}
		}
	}
	if f := off.Faults(); f != (FaultStats{}) {
		t.Errorf("faults off: stats %+v", f)
	}
	if f := idle.Faults(); f.Total() != f.Delayed || f.Delayed == 0 {
		t.Errorf("idle faults: stats %+v", f)
	}
}

func TestFailRate(t *testing.T) {
	const n, p = 400, 0.3
	path := BasePath + "/objects/curriculum"
	run := func(seed int64) (statuses []int, srv *Server) {
		srv = newTestServer(t, WithFailRate(p), WithFaultSeed(seed))
		for range n {
			r := send(t, srv, http.MethodGet, path)
			statuses = append(statuses, r.status)
			switch r.status {
			case http.StatusOK:
			case http.StatusInternalServerError:
				if code, name, _ := errorResponse(t, r.body); code != 1500 || name != "InternalServerError" {
					t.Fatalf("500: code %d name %s", code, name)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("500: Content-Type %q", ct)
				}
			case http.StatusBadGateway:
				if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !bytes.Contains(r.body, []byte("502 Bad Gateway")) {
					t.Fatalf("502: %q %q", r.header.Get("Content-Type"), r.body)
				}
			case http.StatusServiceUnavailable:
				if ra := r.header.Get("Retry-After"); ra != "" && ra != "1" {
					t.Fatalf("503: Retry-After %q", ra)
				}
				if !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || json.Valid(r.body) {
					t.Fatalf("503: %q %q", r.header.Get("Content-Type"), r.body)
				}
			default:
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if r.status != http.StatusOK && r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
				t.Fatalf("%d: Content-Length %q for %d bytes", r.status, r.header.Get("Content-Length"), len(r.body))
			}
		}
		return statuses, srv
	}
	statuses, srv := run(7)
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	failed := n - count[http.StatusOK]
	// Binomial(n, p): mean 120, sd about 9.2; allow four sd.
	sd := math.Sqrt(n * p * (1 - p))
	if math.Abs(float64(failed)-n*p) > 4*sd {
		t.Errorf("%d of %d failed, want about %.0f ± %.0f", failed, n, n*p, 4*sd)
	}
	for _, s := range []int{500, 502, 503} {
		if count[s] == 0 {
			t.Errorf("no %d among %v", s, count)
		}
	}
	f := srv.Faults()
	if f.Failed() != int64(failed) || f.Failed500 != int64(count[500]) || f.Failed502 != int64(count[502]) ||
		f.Failed503 != int64(count[503]) || f.Requests != n || f.Total() != f.Failed() {
		t.Errorf("stats %+v, statuses %v", f, count)
	}
	again, _ := run(7)
	if !slices.Equal(statuses, again) {
		t.Error("same fault seed, different failures")
	}
	other, _ := run(8)
	if slices.Equal(statuses, other) {
		t.Error("another fault seed, same failures")
	}
	// The fault seed defaults to the tenant seed.
	byTenant := newTestServer(t, WithFailRate(p), WithSeed(7))
	for i, want := range statuses[:40] {
		if got := send(t, byTenant, http.MethodGet, path).status; got != want {
			t.Fatalf("request %d: %d with tenant seed 7, %d with fault seed 7", i, got, want)
		}
	}
}

func TestFaultsOnEveryDataInterface(t *testing.T) {
	srv := newTestServer(t, WithFailRate(1), WithFaultSeed(3))
	problems := 0
	for _, path := range []string{AssetsPath + "/assets.json", V4Path + "/themes", WebhooksPath + "/subscriptions"} {
		for range 8 {
			r := send(t, srv, http.MethodGet, path)
			if r.status < 500 {
				t.Fatalf("%s: %d %s", path, r.status, r.body)
			}
			if r.status == http.StatusInternalServerError && !strings.HasPrefix(path, AssetsPath) {
				if r.header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s: 500 as %q", path, r.header.Get("Content-Type"))
				}
				problems++
			}
		}
	}
	if problems == 0 {
		t.Error("no 500 on v4 or webhooks")
	}
	if f := srv.Faults(); f.Failed() != 24 || f.Requests != 24 {
		t.Errorf("stats %+v", f)
	}
}

func TestFaultsSpareOtherPaths(t *testing.T) {
	srv := newTestServer(t, WithFailRate(1), WithDropRate(1), WithTruncateRate(1), WithRateLimit(1),
		WithTokenTTL(time.Nanosecond))
	clean := newTestServer(t)
	for _, path := range []string{AdminPath + "/clock", LegacyPath + "/session.ashx", "/elsewhere"} {
		for range 3 {
			got := sendAs(t, srv, http.MethodGet, path, srv.Service.APIToken())
			want := sendAs(t, clean, http.MethodGet, path, clean.Service.APIToken())
			if path == AdminPath+"/clock" && want.status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, want.status, want.body)
			}
			if got.readErr != nil || got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Errorf("%s: %d %q (%v), clean server %d %q", path, got.status, got.body, got.readErr, want.status, want.body)
			}
		}
	}
	// Methods other than GET and HEAD are not faulted either (but the
	// expired token still is: see TestTokenTTL).
	noToken := newTestServer(t, WithFailRate(1), WithRateLimit(1))
	for range 3 {
		if r := send(t, noToken, http.MethodPost, BasePath+"/objects"); r.status != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d %s", r.status, r.body)
		}
	}
	if f := noToken.Faults(); f.Total() != 0 || f.Requests != 0 {
		t.Errorf("stats %+v", f)
	}
}

func TestDropRate(t *testing.T) {
	clean := newTestServer(t)
	srv := newTestServer(t, WithDropRate(1))
	path := BasePath + paramsPath(t, "userCourseProgress", map[string]any{"resultsPerPage": 200})
	want := send(t, clean, http.MethodGet, path)
	for range 3 {
		got := send(t, srv, http.MethodGet, path)
		if got.status != http.StatusOK || got.header.Get("Content-Length") != strconv.Itoa(len(want.body)) {
			t.Fatalf("status %d, Content-Length %q, want 200 and %d", got.status, got.header.Get("Content-Length"), len(want.body))
		}
		if !errors.Is(got.readErr, io.ErrUnexpectedEOF) {
			t.Fatalf("read error %v, want unexpected EOF", got.readErr)
		}
		if len(got.body) == 0 || len(got.body) >= len(want.body) || !bytes.HasPrefix(want.body, got.body) {
			t.Fatalf("got %d bytes of %d, not a prefix", len(got.body), len(want.body))
		}
	}
	// HEAD has no body to cut.
	if r := send(t, srv, http.MethodHead, path); r.status != http.StatusOK || r.readErr != nil {
		t.Errorf("HEAD: %d %v", r.status, r.readErr)
	}
	if f := srv.Faults(); f.Dropped != 3 || f.Total() != 3 {
		t.Errorf("stats %+v", f)
	}

	// A fraction: about half of 60 requests, the same ones for the same seed.
	var dropped []int
	half := newTestServer(t, WithDropRate(0.5))
	for i := range 60 {
		r := send(t, half, http.MethodGet, BasePath+"/objects")
		if r.readErr != nil {
			dropped = append(dropped, i)
		}
	}
	if len(dropped) < 15 || len(dropped) > 45 || half.Faults().Dropped != int64(len(dropped)) {
		t.Errorf("%d of 60 dropped (stats %+v)", len(dropped), half.Faults())
	}
}

func TestTruncateRate(t *testing.T) {
	clean := newTestServer(t)
	srv := newTestServer(t, WithTruncateRate(1))
	for _, path := range faultPaths(t) {
		want := send(t, clean, http.MethodGet, path)
		got := send(t, srv, http.MethodGet, path)
		if got.readErr != nil || got.status != want.status {
			t.Fatalf("%s: %d %v, want %d", path, got.status, got.readErr, want.status)
		}
		if got.header.Get("Content-Length") != strconv.Itoa(len(got.body)) {
			t.Fatalf("%s: Content-Length %q for %d bytes", path, got.header.Get("Content-Length"), len(got.body))
		}
		if want.status != http.StatusOK { // only 200 answers are truncated
			if !bytes.Equal(got.body, want.body) {
				t.Fatalf("%s: %d body changed: %q", path, got.status, got.body)
			}
			continue
		}
		if json.Valid(got.body) || len(got.body) == 0 || len(got.body) >= len(want.body) || !bytes.HasPrefix(want.body, got.body) {
			t.Fatalf("%s: %d bytes of %d, valid JSON %t", path, len(got.body), len(want.body), json.Valid(got.body))
		}
	}
	if f := srv.Faults(); f.Truncated != 6 || f.Total() != 6 {
		t.Errorf("stats %+v", f)
	}
}

func TestRateLimit(t *testing.T) {
	const limit, window = 3, 300 * time.Millisecond
	path := BasePath + "/objects"
	for _, noHeader := range []bool{false, true} {
		t.Run(fmt.Sprintf("noRetryAfter=%t", noHeader), func(t *testing.T) {
			opts := []Option{WithRateLimit(limit), WithRateWindow(window)}
			if noHeader {
				opts = append(opts, WithNoRetryAfter())
			}
			srv := newTestServer(t, opts...)
			start := time.Now()
			var statuses []int
			var last reply
			for range limit + 2 {
				last = send(t, srv, http.MethodGet, path)
				statuses = append(statuses, last.status)
			}
			if time.Since(start) > window/2 {
				t.Skip("machine too slow for a window of", window)
			}
			if !slices.Equal(statuses, []int{200, 200, 200, 429, 429}) {
				t.Fatalf("statuses %v", statuses)
			}
			ra := last.header.Get("Retry-After")
			if noHeader && ra != "" || !noHeader && ra != "1" { // 300 ms round up to 1 s
				t.Errorf("Retry-After %q", ra)
			}
			var body struct {
				Response struct {
					Code int    `json:"code"`
					Name string `json:"name"`
				} `json:"response"`
				Meta struct {
					RateLimit struct{ Limit, Remaining, Reset int64 } `json:"rateLimit"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(last.body, &body); err != nil {
				t.Fatalf("body %s: %v", last.body, err)
			}
			rl := body.Meta.RateLimit
			if body.Response.Code != 1429 || body.Response.Name != "RateLimitError" || rl.Limit != limit || rl.Remaining != 0 ||
				rl.Reset < start.Unix() || rl.Reset > start.Add(window).Unix()+1 {
				t.Errorf("body %s", last.body)
			}
			time.Sleep(window - time.Since(start) + 20*time.Millisecond)
			if r := send(t, srv, http.MethodGet, path); r.status != http.StatusOK {
				t.Errorf("after the window: %d", r.status)
			}
			if f := srv.Faults(); f.RateLimited != 2 || f.Total() != 2 {
				t.Errorf("stats %+v", f)
			}
		})
	}
	// Retry-After counts whole seconds until the window closes.
	srv := newTestServer(t, WithRateLimit(1), WithRateWindow(2500*time.Millisecond))
	send(t, srv, http.MethodGet, path)
	r := send(t, srv, http.MethodGet, path)
	if ra := r.header.Get("Retry-After"); r.status != 429 || (ra != "3" && ra != "2") {
		t.Errorf("2.5 s window: %d Retry-After %q", r.status, ra)
	}
}

func TestLatency(t *testing.T) {
	const d = 60 * time.Millisecond
	srv := newTestServer(t, WithLatency(d))
	start := time.Now()
	if r := send(t, srv, http.MethodGet, BasePath+"/objects"); r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	if el := time.Since(start); el < d {
		t.Errorf("answered after %v, want at least %v", el, d)
	}
	// A client that gives up is not kept waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+BasePath+"/objects", nil)
	if _, err := srv.Client().Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled request: %v", err)
	}
	if f := srv.Faults(); f.Delayed < 1 || f.Total() != f.Delayed {
		t.Errorf("stats %+v", f)
	}
}

func TestTokenTTL(t *testing.T) {
	const ttl = 200 * time.Millisecond
	start := time.Now()
	srv := newTestServer(t, WithTokenTTL(ttl))
	path := BasePath + "/objects"
	r := send(t, srv, http.MethodGet, path)
	if time.Since(start) >= ttl {
		t.Skip("machine too slow for a TTL of", ttl)
	}
	if r.status != http.StatusOK {
		t.Fatalf("fresh token: %d %s", r.status, r.body)
	}
	time.Sleep(ttl)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := send(t, srv, method, path)
		if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s expired token: %d %q", method, r.status, r.header.Get("WWW-Authenticate"))
		}
		if code, name, msg := errorResponse(t, r.body); code != 1001 || name != "AuthenticationError" || !strings.Contains(msg, "expired") {
			t.Errorf("%s body %s", method, r.body)
		}
	}
	// v4 answers in its own shape.
	r = send(t, srv, http.MethodGet, V4Path+"/themes")
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if err := json.Unmarshal(r.body, &p); err != nil || r.status != 401 || p.Status != 401 ||
		r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(p.Detail, "expired") {
		t.Errorf("v4: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	// Other tokens are not the expiring access token.
	code, _, _ := do(t, srv, http.MethodGet, "/objects", srv.Service.LimitedToken())
	if code != http.StatusForbidden {
		t.Errorf("limited token: %d", code)
	}
	if f := srv.Faults(); f.TokenExpired != 3 || f.Total() != 3 {
		t.Errorf("stats %+v", f)
	}
}

// readPages reads pages 1..n of obj, n pages of per rows, and returns the
// userId,courseId keys of the rows and the totalResults of each page.
func readPages(t *testing.T, srv *Server, obj string, per, n int) (keys []string, totals []int) {
	t.Helper()
	for page := 1; page <= n; page++ {
		r := fetchPage(t, srv, obj, map[string]any{"page": page, "resultsPerPage": per})
		totals = append(totals, r.TotalResults)
		for _, row := range r.Results {
			keys = append(keys, fmt.Sprint(row["userId"], "/", row["courseId"]))
		}
	}
	return keys, totals
}

func TestPageDrift(t *testing.T) {
	const per, pages = 5, 12
	clean := newTestServer(t, WithUsers(10))
	want, _ := readPages(t, clean, "userCourseProgress", per, pages+1) // positions 0..64 of the clean list
	total := fetchPage(t, clean, "userCourseProgress", map[string]any{}).TotalResults

	srv := newTestServer(t, WithUsers(10), WithPageDrift(true), WithPageDriftEvery(2), WithPageDriftEvents(4))
	got, totals := readPages(t, srv, "userCourseProgress", per, pages)
	// Requests 1-2 see state 0 (positions 1 and 3 not yet inserted), 3-4
	// state 1 (position 0 deleted), 5-6 state 2 (1 inserted), 7-8 state 3
	// (2 deleted), 9- state 4 (3 inserted).
	if wantTotals := []int{total - 2, total - 2, total - 3, total - 3, total - 2, total - 2, total - 3, total - 3,
		total - 2, total - 2, total - 2, total - 2}; !slices.Equal(totals, wantTotals) {
		t.Errorf("totals %v, want %v", totals, wantTotals)
	}
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	var dups, gaps []string
	for k, c := range seen {
		if c > 1 {
			dups = append(dups, k)
		}
	}
	for _, k := range want[:55] { // the drifted read ends at position 61
		if seen[k] == 0 {
			gaps = append(gaps, k)
		}
	}
	// Page 3 skips a row (gap), page 5 repeats one (duplicate), and so on.
	if len(dups) != 2 || len(gaps) < 2 {
		t.Errorf("duplicates %v, gaps %v", dups, gaps)
	}
	if f := srv.Faults(); f.PageDrifts != 4 || f.Total() != 4 {
		t.Errorf("stats %+v", f)
	}

	// The drift has stopped: a reread from page 1 is a consistent snapshot,
	// the clean data without positions 0 and 2.
	again, totals := readPages(t, srv, "userCourseProgress", per, pages)
	wantAgain := append([]string{want[1]}, want[3:]...)[:len(again)] // 63 > 60 keys
	if !slices.Equal(again, wantAgain) {
		t.Errorf("reread after the drift:\n%v\nwant\n%v", again, wantAgain)
	}
	for _, tt := range totals {
		if tt != total-2 {
			t.Errorf("reread totals %v, want %d", totals, total-2)
			break
		}
	}
	if all := fetchAll(t, srv, "userCourseProgress", nil, 100); len(all) != total-2 {
		t.Errorf("full read %d rows, want %d", len(all), total-2)
	}
	// Drift applies to filtered and sorted result sets too, per object.
	other := newTestServer(t, WithPageDrift(true), WithPageDriftEvery(1), WithPageDriftEvents(1))
	clean = newTestServer(t)
	q := map[string]any{"resultsPerPage": 3, "sort": map[string]any{"field": "courseTitle"}}
	q["page"] = 1
	p1 := fetchPage(t, other, "course", q)
	q["page"] = 2
	p2 := fetchPage(t, other, "course", q)
	cleanQ := fetchPage(t, clean, "course", map[string]any{"resultsPerPage": 6, "sort": map[string]any{"field": "courseTitle"}})
	if p1.TotalResults != cleanQ.TotalResults || p2.TotalResults != cleanQ.TotalResults-1 ||
		p1.Results[0]["courseId"] != cleanQ.Results[0]["courseId"] || p2.Results[0]["courseId"] != cleanQ.Results[4]["courseId"] {
		t.Errorf("sorted drift: page 1 %v, page 2 %v, clean %v", p1, p2, cleanQ)
	}
}

func TestSchemaDrift(t *testing.T) {
	srv := newTestServer(t, WithUsers(20), WithSchemaDrift(true))
	clean := newTestServer(t, WithUsers(20))
	describe := func(srv *Server, obj string) []fieldEntry {
		t.Helper()
		status, body := get(t, srv, "/objects/"+obj+"/describe")
		if status != http.StatusOK {
			t.Fatalf("describe %s: %d %s", obj, status, body)
		}
		var d struct{ Fields []fieldEntry }
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		return d.Fields
	}
	// userCourseProgress gains certificateId, last.
	fields, cleanFields := describe(srv, "userCourseProgress"), describe(clean, "userCourseProgress")
	if len(fields) != len(cleanFields)+1 || !reflect.DeepEqual(fields[:len(cleanFields)], cleanFields) ||
		!reflect.DeepEqual(fields[len(fields)-1], fieldEntry{ID: "certificateId", DisplayName: "Certificate ID", Type: "string"}) {
		t.Errorf("drifted describe %v", fields)
	}
	rows := fetchAll(t, srv, "userCourseProgress", nil, 1000)
	cleanRows := fetchAll(t, clean, "userCourseProgress", nil, 1000)
	certs := 0
	for i, row := range rows {
		cert, ok := row["certificateId"]
		if !ok || len(row) != len(fields) {
			t.Fatalf("row %d lacks certificateId: %v", i, row)
		}
		if (row["status"] == "Completed") != (cert != nil) {
			t.Fatalf("row %d: status %v, certificateId %v", i, row["status"], cert)
		}
		if cert != nil {
			certs++
		}
		delete(row, "certificateId")
		if fmt.Sprint(row) != fmt.Sprint(cleanRows[i]) {
			t.Fatalf("row %d: %v, clean %v", i, row, cleanRows[i])
		}
	}
	if certs == 0 {
		t.Error("no certificate")
	}
	// course.durationMinutes turns float, with fractional values.
	typ := func(fields []fieldEntry, id string) string {
		for _, f := range fields {
			if f.ID == id {
				return f.Type
			}
		}
		return ""
	}
	if typ(describe(srv, "course"), "durationMinutes") != "float" || typ(describe(clean, "course"), "durationMinutes") != "int" {
		t.Error("durationMinutes type did not drift")
	}
	courses := fetchAll(t, srv, "course", map[string]any{"fields": []string{"durationMinutes"}}, 100)
	fractional := 0
	for _, c := range courses {
		if strings.Contains(fmt.Sprint(c["durationMinutes"]), ".5") {
			fractional++
		}
	}
	if fractional == 0 || fractional == len(courses) {
		t.Errorf("%d of %d durations fractional", fractional, len(courses))
	}
	// The drifted schema is the one queries are checked against.
	ok := paramsPath(t, "userCourseProgress", map[string]any{"fields": []string{"certificateId"},
		"filters": []any{map[string]any{"field": "certificateId", "operator": "bw", "values": []string{"CERT-"}}}})
	if status, body := get(t, srv, ok); status != http.StatusOK || decodeResults(t, body).TotalResults != certs {
		t.Errorf("query on certificateId: %d %s", status, body)
	}
	if status, _ := get(t, clean, ok); status != http.StatusBadRequest {
		t.Errorf("clean server accepts certificateId: %d", status)
	}
	half := paramsPath(t, "course", map[string]any{"filters": []any{map[string]any{"field": "durationMinutes", "operator": "gt", "values": []float64{45.25}}}})
	if status, body := get(t, srv, half); status != http.StatusOK {
		t.Errorf("float filter on drifted durationMinutes: %d %s", status, body)
	}
	if status, _ := get(t, clean, half); status != http.StatusBadRequest {
		t.Errorf("float filter on int durationMinutes accepted: %d", status)
	}
	// Flipping back at run time restores the clean schema, sorted pages
	// included (the index cache keys on the schema).
	sorted := paramsPath(t, "course", map[string]any{"sort": map[string]any{"field": "durationMinutes"}, "resultsPerPage": 100})
	_, drifted := get(t, srv, sorted)
	srv.Service.SetSchemaDrift(false)
	_, back := get(t, srv, sorted)
	_, want := get(t, clean, sorted)
	if !bytes.Equal(back, want) || bytes.Equal(drifted, want) {
		t.Error("SetSchemaDrift(false) does not restore the clean answers")
	}
	if !reflect.DeepEqual(describe(srv, "userCourseProgress"), cleanFields) {
		t.Error("describe still drifted")
	}
	if f := srv.Faults(); f.SchemaDrifted == 0 || f.Total() != f.SchemaDrifted {
		t.Errorf("stats %+v", f)
	}
}

func TestFaultsCombined(t *testing.T) {
	// Every switch at once, concurrently: nothing panics, counters add up.
	srv := newTestServer(t, WithFailRate(0.2), WithDropRate(0.2), WithTruncateRate(0.2), WithLatency(time.Millisecond),
		WithPageDrift(true), WithSchemaDrift(true), WithRateLimit(1000), WithRateWindow(50*time.Millisecond))
	path := BasePath + paramsPath(t, "userCourseProgress", map[string]any{"resultsPerPage": 20})
	done := make(chan reply)
	for range 4 {
		go func() {
			for range 15 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
				resp, err := srv.Client().Do(req)
				if err != nil {
					done <- reply{readErr: err}
					continue
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				done <- reply{status: resp.StatusCode, body: b, readErr: rerr}
			}
		}()
	}
	var ok, bad int
	for range 60 {
		r := <-done
		if r.readErr == nil && r.status == 200 && json.Valid(r.body) {
			ok++
		} else {
			bad++
		}
	}
	f := srv.Faults()
	if f.Requests != 60 || f.Delayed != 60 || int64(bad) != f.Failed()+f.Dropped+f.Truncated || ok == 0 {
		t.Errorf("ok %d bad %d stats %+v", ok, bad, f)
	}
}
