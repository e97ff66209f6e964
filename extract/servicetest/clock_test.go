package servicetest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// completedRows counts Completed userCourseProgress rows through the API.
func completedRows(t *testing.T, srv *Server, extra ...map[string]any) int {
	t.Helper()
	filters := []any{map[string]any{"field": "status", "operator": "in", "values": []any{"Completed"}}}
	for _, f := range extra {
		filters = append(filters, f)
	}
	return fetchPage(t, srv, "userCourseProgress", map[string]any{"resultsPerPage": 1, "filters": filters}).TotalResults
}

func TestAdvance(t *testing.T) {
	srv := newTestServer(t)
	svc := srv.Service
	if svc.Advance(0) != 0 || svc.Advance(-time.Hour) != 0 || !svc.Now().Equal(DefaultNow) {
		t.Fatal("a zero or negative step moved the clock")
	}
	before := completedRows(t, srv)
	old := svc.Now()
	n := svc.Advance(7 * 24 * time.Hour)
	if !svc.Now().Equal(old.Add(7 * 24 * time.Hour)) {
		t.Fatalf("clock %s", svc.Now())
	}
	after := completedRows(t, srv)
	if n == 0 || after-before != n {
		t.Fatalf("Advance returned %d events; Completed rows went from %d to %d", n, before, after)
	}
	// The new completions carry completedDate and lastActivityDate inside the week.
	inWeek := []any{isoSeconds(old.Add(time.Second)), isoSeconds(svc.Now())}
	for _, f := range []string{"completedDate", "lastActivityDate"} {
		got := completedRows(t, srv, map[string]any{"field": f, "operator": "be", "values": inWeek})
		if got != n {
			t.Errorf("%d Completed rows with %s in the advanced week, want %d", got, f, n)
		}
	}
	// Aggregates move with the rows (section B's consistency): the courses'
	// completedCount adds up to the Completed rows.
	rows := fetchAll(t, srv, "course", map[string]any{"fields": []any{"completedCount"}}, 1000)
	sum := 0
	for _, r := range rows {
		c, _ := r["completedCount"].(json.Number).Int64()
		sum += int(c)
	}
	if sum != after {
		t.Fatalf("courses count %d completions, userCourseProgress %d", sum, after)
	}
	// The same seed and steps give the same events.
	other := New()
	defer other.Close()
	if m := other.Advance(7 * 24 * time.Hour); m != n {
		t.Fatalf("another service advanced by the same step produced %d events, not %d", m, n)
	}
}

func TestAdvanceDeterministicEvents(t *testing.T) {
	ids := func() []string {
		srv := newTestServer(t, WithSeed(9), WithUsers(50))
		rc := newReceiver(t)
		sub := subscribe(t, srv, map[string]any{"name": "x", "url": rc.URL, "method": "POST", "types": []any{"COURSE_COMPLETED"}})
		srv.Service.Advance(30 * 24 * time.Hour)
		waitDeliveries(t, srv)
		_, logs := logsOf(t, srv, sub.ID)
		var s []string
		for _, e := range logs {
			s = append(s, e.EventID+sub.SignatureKey)
		}
		slices.Sort(s)
		return s
	}
	a, b := ids(), ids()
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("event ids and keys differ between two runs: %d vs %d", len(a), len(b))
	}
}

func TestAdminEndpoints(t *testing.T) {
	srv := newTestServer(t)
	tok := apiTok(srv)
	var c struct {
		Now    string `json:"now"`
		Events *int   `json:"events"`
	}
	callAPI(t, srv, http.MethodGet, AdminPath+"/clock", tok).want(t, 200).json(t, &c)
	if c.Now != "2026-11-01T06:00:00Z" || c.Events != nil {
		t.Fatalf("clock %+v", c)
	}
	checkHead(t, srv, AdminPath+"/clock", tok)
	callAPI(t, srv, http.MethodPost, AdminPath+"/advance?days=2", tok).want(t, 200).json(t, &c)
	if c.Now != "2026-11-03T06:00:00Z" || c.Events == nil || *c.Events == 0 {
		t.Fatalf("advance %+v", c)
	}
	callAPI(t, srv, http.MethodPost, AdminPath+"/advance?hours=12", tok).want(t, 200).json(t, &c)
	if c.Now != "2026-11-03T18:00:00Z" {
		t.Fatalf("advance hours %+v", c)
	}
	callAPI(t, srv, http.MethodPost, AdminPath+"/advance?days=0.5", tok).want(t, 200).json(t, &c)
	if c.Now != "2026-11-04T06:00:00Z" || !srv.Service.Now().Equal(time.Date(2026, 11, 4, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("advance half a day %+v", c)
	}
	for _, q := range []string{"", "?days=0", "?days=-1", "?days=x", "?days=1&hours=1", "?days=100000", "?weeks=1"} {
		wantProblem(t, callAPI(t, srv, http.MethodPost, AdminPath+"/advance"+q, tok), 400)
	}
	wantProblem(t, callAPI(t, srv, http.MethodPost, AdminPath+"/advance?days=1", withBearer(srv.Service.AccessToken())), 401)
	wantProblem(t, callAPI(t, srv, http.MethodPost, AdminPath+"/advance?days=1"), 401)
	wantProblem(t, callAPI(t, srv, http.MethodGet, AdminPath+"/advance?days=1", tok), 405)
	wantProblem(t, callAPI(t, srv, http.MethodGet, AdminPath+"/nothing", tok), 404)
}

func TestAdvanceRefreshesCachedQueries(t *testing.T) {
	srv := newTestServer(t)
	// A sorted query is cached; after Advance the same query must see the new clock.
	params := map[string]any{"resultsPerPage": 5, "sort": map[string]any{"field": "lastActivityDate", "direction": "desc"}}
	before := fetchPage(t, srv, "userCourseProgress", params)
	srv.Service.Advance(3 * 24 * time.Hour)
	after := fetchPage(t, srv, "userCourseProgress", params)
	if before.Results[0]["lastActivityDate"] == after.Results[0]["lastActivityDate"] {
		t.Fatalf("the newest activity did not move: %v", after.Results[0]["lastActivityDate"])
	}
	if !strings.HasPrefix(after.Results[0]["lastActivityDate"].(string), "2026-11-0") {
		t.Fatalf("newest activity %v", after.Results[0]["lastActivityDate"])
	}
}

func TestAutoAdvance(t *testing.T) {
	srv := NewServer(WithAutoAdvance(10*time.Millisecond, 24*time.Hour))
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Service.Now().After(DefaultNow.Add(48*time.Hour)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	if !srv.Service.Now().After(DefaultNow.Add(48 * time.Hour)) {
		t.Fatal("the clock did not advance on its own")
	}
	now := srv.Service.Now()
	time.Sleep(40 * time.Millisecond)
	if !srv.Service.Now().Equal(now) {
		t.Fatal("the clock advanced after Close")
	}
}
