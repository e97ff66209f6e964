package servicetest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAuth(t *testing.T) {
	srv := newTestServer(t, WithAccessToken("good"), WithLimitedToken("limited"))
	badParams := "/objects/course?parameters=%21%21" // auth comes first
	for _, c := range []struct {
		name, header string
		status       int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong scheme", "Basic Z29vZA==", http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"unknown token", "Bearer nope", http.StatusUnauthorized},
		{"limited token", "Bearer limited", http.StatusForbidden},
		{"lower-case scheme", "bearer good", http.StatusOK},
	} {
		for _, path := range []string{"/objects", "/objects/course/describe", "/objects/course", badParams} {
			t.Run(c.name+path, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+BasePath+path, nil)
				if c.header != "" {
					req.Header.Set("Authorization", c.header)
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				want := c.status
				if want == http.StatusOK && path == badParams {
					want = http.StatusBadRequest
				}
				if resp.StatusCode != want {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, buf.Bytes())
				}
				if want == http.StatusOK {
					return
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				code, name, _ := errorResponse(t, buf.Bytes())
				switch want {
				case http.StatusUnauthorized:
					if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
					}
					if code != 1001 || name != "AuthenticationError" {
						t.Errorf("code %d name %s", code, name)
					}
				case http.StatusForbidden:
					if code != 1003 || name != "PermissionDeniedError" {
						t.Errorf("code %d name %s", code, name)
					}
				}
			})
		}
	}
	if srv.Service.AccessToken() != "good" || srv.Service.LimitedToken() != "limited" {
		t.Fatal("token accessors")
	}
}

func TestNoParametersOnListAndDescribe(t *testing.T) {
	srv := newTestServer(t)
	for _, path := range []string{"/objects?x=1", "/objects/course/describe?parameters=e30", "/objects?"} {
		status, body := get(t, srv, path)
		if path == "/objects?" { // an empty query string carries no parameter
			if status != http.StatusOK {
				t.Errorf("%s: status %d", path, status)
			}
			continue
		}
		if status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400", path, status)
		}
		if code, _, _ := errorResponse(t, body); code != 2003 {
			t.Errorf("%s: code %d, want 2003", path, code)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	srv := newTestServer(t)
	tok := srv.Service.AccessToken()
	for _, path := range []string{"/objects/nope", "/objects/nope/describe", "/objects/course/extra", "/objects/", "/other"} {
		status, _, body := do(t, srv, http.MethodGet, path, tok)
		if status != http.StatusNotFound {
			t.Fatalf("%s: status %d, want 404", path, status)
		}
		if code, name, _ := errorResponse(t, body); code != 3004 || name != "ResourceNotFoundError" {
			t.Errorf("%s: code %d name %s", path, code, name)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		for _, path := range []string{"/objects", "/objects/course/describe", "/objects/course"} {
			status, h, body := do(t, srv, m, path, tok)
			if status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
				t.Fatalf("%s %s: status %d Allow %q", m, path, status, h.Get("Allow"))
			}
			if code, name, _ := errorResponse(t, body); code != 1005 || name != "MethodNotAllowedError" {
				t.Errorf("code %d name %s", code, name)
			}
		}
	}
	// HEAD is GET without a body.
	_, getHeader, getBody := do(t, srv, http.MethodGet, "/objects/course", tok)
	status, h, body := do(t, srv, http.MethodHead, "/objects/course", tok)
	if status != http.StatusOK || len(body) != 0 || h.Get("Content-Length") != getHeader.Get("Content-Length") ||
		h.Get("Content-Length") == "" || len(getBody) == 0 {
		t.Fatalf("HEAD: status %d, body %d bytes, Content-Length %q vs %q", status, len(body),
			h.Get("Content-Length"), getHeader.Get("Content-Length"))
	}
}

func TestObjectsAndDescribe(t *testing.T) {
	srv := newTestServer(t)
	status, body := get(t, srv, "/objects")
	if status != http.StatusOK {
		t.Fatal(status)
	}
	var list struct {
		Objects []struct {
			ID, DisplayName string
			URLs            struct{ Describe, Object string }
		}
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	types := map[string]bool{}
	for _, o := range list.Objects {
		ids = append(ids, o.ID)
		if o.URLs.Object != BasePath+"/objects/"+o.ID || o.URLs.Describe != o.URLs.Object+"/describe" {
			t.Errorf("%s: urls %+v", o.ID, o.URLs)
		}
		if o.ID == "path" && o.DisplayName != "Paths (formerly Checklists)" {
			t.Errorf("path display name %q", o.DisplayName)
		}
		// Follow the URL as given, on the same host.
		req, _ := http.NewRequest(http.MethodGet, srv.URL+o.URLs.Describe, nil)
		req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("describe %s: %v %v", o.ID, err, resp.Status)
		}
		var d struct {
			Fields []struct {
				ID, DisplayName, Type string
				Options               []string
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var fieldIDs []string
		for _, f := range d.Fields {
			fieldIDs = append(fieldIDs, f.ID)
			types[f.Type] = true
			if (f.Type == "picklist") != (len(f.Options) > 0) {
				t.Errorf("%s.%s: type %s with options %v", o.ID, f.ID, f.Type, f.Options)
			}
		}
		// Every row carries every field, in describe order.
		_, page := get(t, srv, "/objects/"+o.ID)
		dec := json.NewDecoder(bytes.NewReader(page))
		for _, want := range []string{"{", "page", "1", "resultsPerPage", "100", "totalResults"} {
			tok, _ := dec.Token()
			if got := strings.Trim(strings.TrimSpace(jsonTok(tok)), `"`); got != want {
				t.Fatalf("%s: body token %q, want %q", o.ID, got, want)
			}
		}
		for _, keys := range rowKeyOrder(t, page) {
			if !slices.Equal(keys, fieldIDs) {
				t.Fatalf("%s: row keys %v, want %v", o.ID, keys, fieldIDs)
			}
		}
		if o.ID == "curriculum" {
			want := []string{"curriculumTitle", "courseCount", "userCount", "startCount", "startPercentage", "testAverage", "pitchAverage"}
			if !slices.Equal(fieldIDs, want) {
				t.Errorf("curriculum fields %v, want %v", fieldIDs, want)
			}
		}
	}
	if want := []string{"course", "path", "curriculum", "user", "userCourseProgress"}; !slices.Equal(ids, want) {
		t.Fatalf("objects %v, want %v", ids, want)
	}
	for _, ty := range typeNames {
		if !types[ty] {
			t.Errorf("no field of type %s", ty)
		}
	}
}

func jsonTok(tok json.Token) string {
	b, _ := json.Marshal(tok)
	if d, ok := tok.(json.Delim); ok {
		return d.String()
	}
	return string(b)
}

// rowKeyOrder returns the keys of each result row in the order sent.
func rowKeyOrder(t *testing.T, body []byte) [][]string {
	t.Helper()
	var r struct{ Results []json.RawMessage }
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, raw := range r.Results {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.Token() // {
		var keys []string
		for dec.More() {
			k, _ := dec.Token()
			keys = append(keys, k.(string))
			var v any
			dec.Decode(&v)
		}
		out = append(out, keys)
	}
	return out
}

func TestValuesNullsAndEncodings(t *testing.T) {
	srv := newTestServer(t)
	nulls := map[string]int{}
	for _, obj := range objects {
		rows := fetchAll(t, srv, obj.id, nil, 1000)
		if len(rows) != obj.count(srv.Service.snap.Load()) {
			t.Fatalf("%s: %d rows", obj.id, len(rows))
		}
		for _, r := range rows {
			for _, f := range obj.fields {
				v := r[f.id]
				if v == nil {
					nulls[f.typ.String()]++
					continue
				}
				switch f.typ {
				case typeInt:
					if _, err := v.(json.Number).Int64(); err != nil {
						t.Fatalf("%s.%s: %v is not an integer", obj.id, f.id, v)
					}
				case typeFloat, typePercent:
					x, err := v.(json.Number).Float64()
					if err != nil || (f.typ == typePercent && (x < 0 || x > 100)) {
						t.Fatalf("%s.%s: %v", obj.id, f.id, v)
					}
				case typeDate:
					s := v.(string)
					if _, err := time.Parse("2006-01-02T15:04:05Z", s); err != nil || len(s) != 20 {
						t.Fatalf("%s.%s: date %q", obj.id, f.id, s)
					}
				case typePicklist:
					if !slices.Contains(f.options, v.(string)) {
						t.Fatalf("%s.%s: %q not in options", obj.id, f.id, v)
					}
				case typeString:
					_ = v.(string)
				}
			}
		}
	}
	if nulls["float"] == 0 || nulls["percent"] == 0 || nulls["date"] == 0 {
		t.Fatalf("too few nulls: %v", nulls)
	}
	// Non-ASCII and escaped strings come through intact.
	users := fetchAll(t, srv, "user", map[string]any{"fields": []string{"userName"}}, 1000)
	if users[0]["userName"] != "José Núñez" {
		t.Fatalf("first user %v", users[0])
	}
	courses := fetchAll(t, srv, "course", map[string]any{"fields": []string{"courseTitle"}}, 1000)
	if courses[3]["courseTitle"] != `Negotiation: "Give & Get" Basics` {
		t.Fatalf("course 3 %v", courses[3])
	}
}

func TestProjection(t *testing.T) {
	srv := newTestServer(t)
	fields := []string{"courseTitle", "userId", "score"}
	status, body := get(t, srv, paramsPath(t, "userCourseProgress", map[string]any{"fields": fields, "resultsPerPage": 50}))
	if status != http.StatusOK {
		t.Fatal(status)
	}
	all := fetchAll(t, srv, "userCourseProgress", map[string]any{}, 50)[:50]
	got := decodeResults(t, body).Results
	for i, keys := range rowKeyOrder(t, body) {
		if !slices.Equal(keys, fields) {
			t.Fatalf("row %d keys %v, want %v", i, keys, fields)
		}
		for _, f := range fields {
			if !reflect.DeepEqual(got[i][f], all[i][f]) {
				t.Fatalf("row %d field %s: %v, want %v", i, f, got[i][f], all[i][f])
			}
		}
	}
}

func TestSort(t *testing.T) {
	srv := newTestServer(t, WithUsers(50))
	all := fetchAll(t, srv, "userCourseProgress", nil, 1000)
	for _, c := range []struct {
		field string
		num   bool
	}{{"score", true}, {"completedDate", false}, {"courseTitle", false}, {"timeSpentMinutes", true}, {"status", false}} {
		for _, dir := range []string{"", "asc", "desc"} {
			t.Run(c.field+"/"+dir, func(t *testing.T) {
				sortSpec := map[string]any{"field": c.field}
				if dir != "" {
					sortSpec["direction"] = dir
				}
				got := fetchAll(t, srv, "userCourseProgress", map[string]any{"sort": sortSpec}, 333)
				want := slices.Clone(all)
				slices.SortStableFunc(want, func(a, b row) int {
					x, y := a[c.field], b[c.field]
					if x == nil || y == nil {
						switch {
						case x == nil && y == nil:
							return 0
						case x == nil:
							return 1
						}
						return -1
					}
					var r int
					if c.num {
						r = int(sign(toFloat(x) - toFloat(y)))
					} else {
						r = strings.Compare(x.(string), y.(string))
					}
					if dir == "desc" {
						r = -r
					}
					return r
				})
				if !reflect.DeepEqual(got, want) {
					t.Fatal("sorted rows differ from the stable sort of all rows")
				}
			})
		}
	}
}

func TestPaging(t *testing.T) {
	srv := newTestServer(t, WithUsers(30))
	whole := fetchAll(t, srv, "userCourseProgress", nil, 1000)
	for _, per := range []int{1, 7, 100, 1000} {
		got := fetchAll(t, srv, "userCourseProgress", nil, per)
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("resultsPerPage %d: pages do not concatenate to the whole object", per)
		}
	}
	seen := map[[2]string]bool{}
	for _, r := range whole {
		k := [2]string{string(r["userId"].(json.Number)), string(r["courseId"].(json.Number))}
		if seen[k] {
			t.Fatalf("duplicate assignment %v", k)
		}
		seen[k] = true
	}
	// Past the end: 200, empty results, same totals.
	for _, params := range []map[string]any{
		{"page": 1000, "resultsPerPage": 10},
		{"page": int64(1) << 60, "resultsPerPage": 1000},
		{"page": 1000, "filters": []any{map[string]any{"field": "attempts", "operator": "ge", "values": []any{0}}}},
	} {
		status, body := get(t, srv, paramsPath(t, "userCourseProgress", params))
		r := decodeResults(t, body)
		if status != http.StatusOK || r.Results == nil || len(r.Results) != 0 || r.TotalResults != len(whole) {
			t.Fatalf("%v: status %d, %d results, total %d: %.200s", params, status, len(r.Results), r.TotalResults, body)
		}
	}
	// No rows at all: totalPages 0.
	r := fetchPage(t, srv, "userCourseProgress", map[string]any{"filters": []any{
		map[string]any{"field": "attempts", "operator": "lt", "values": []any{0}}}})
	if r.TotalResults != 0 || r.TotalPages != 0 || len(r.Results) != 0 {
		t.Fatalf("empty result: %+v", r)
	}
}

func TestPagedReadScansOnce(t *testing.T) {
	srv := newTestServer(t, WithUsers(100))
	params := map[string]any{
		"filters": []any{map[string]any{"field": "status", "operator": "in", "values": []any{"In Progress", "Overdue"}}},
		"sort":    map[string]any{"field": "lastActivityDate", "direction": "desc"},
	}
	before := srv.Service.cache.scans()
	rows := fetchAll(t, srv, "userCourseProgress", params, 50)
	if len(rows) < 100 {
		t.Fatalf("only %d rows", len(rows))
	}
	if n := srv.Service.cache.scans() - before; n != 1 {
		t.Fatalf("%d scans for one paged read, want 1", n)
	}
	before = srv.Service.cache.scans()
	fetchAll(t, srv, "userCourseProgress", nil, 500)
	if n := srv.Service.cache.scans() - before; n != 0 {
		t.Fatalf("unfiltered, unsorted read built %d indexes", n)
	}
}

func TestRequestAccounting(t *testing.T) {
	srv := newTestServer(t)
	get(t, srv, "/objects")
	get(t, srv, "/objects/course")
	get(t, srv, "/objects/course?parameters=%21") // 400 still counts
	get(t, srv, "/objects/course/describe")
	do(t, srv, http.MethodGet, "/objects/user", "") // 401 still counts
	if got := srv.Service.Requests(); got != 5 {
		t.Errorf("Requests() = %d, want 5", got)
	}
	if got := srv.Service.RequestsFor("course"); got != 2 {
		t.Errorf("RequestsFor(course) = %d, want 2", got)
	}
	if got := srv.Service.RequestsFor("user"); got != 1 {
		t.Errorf("RequestsFor(user) = %d, want 1", got)
	}
}

func TestDeterminism(t *testing.T) {
	page := func(opts ...Option) []byte {
		srv := newTestServer(t, opts...)
		var all []byte
		for _, obj := range objects {
			_, b := get(t, srv, paramsPath(t, obj.id, map[string]any{"page": 2, "resultsPerPage": 5}))
			all = append(all, b...)
		}
		return all
	}
	a, b := page(WithSeed(7), WithUsers(300)), page(WithSeed(7), WithUsers(300))
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different bytes")
	}
	if c := page(WithSeed(8), WithUsers(300)); bytes.Equal(a, c) {
		t.Fatal("different seeds, same bytes")
	}
	// A later clock moves progress forward, never back.
	now := DefaultNow
	early := fetchAll(t, newTestServer(t, WithNow(now)), "userCourseProgress", nil, 1000)
	late := fetchAll(t, newTestServer(t, WithNow(now.AddDate(0, 1, 0))), "userCourseProgress", nil, 1000)
	moved := 0
	for i := range early {
		a, b := toFloat(early[i]["progressPercentage"]), toFloat(late[i]["progressPercentage"])
		if b < a || early[i]["assignedDate"] != late[i]["assignedDate"] {
			t.Fatalf("row %d: progress %v → %v", i, a, b)
		}
		if b > a {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("a month later nobody progressed")
	}
}

func TestProgressSize(t *testing.T) {
	for _, users := range []int{0, 1, 1000, 100_000} {
		srv := newTestServer(t, WithUsers(users))
		r := fetchPage(t, srv, "userCourseProgress", map[string]any{"resultsPerPage": 1})
		if r.TotalResults < 8*users || r.TotalResults > 16*users {
			t.Fatalf("%d users: %d rows, want 8..16 per user", users, r.TotalResults)
		}
		if users == 100_000 && (r.TotalResults < 1_150_000 || r.TotalResults > 1_250_000) {
			t.Fatalf("100k users: %d rows, want about 1.2 M", r.TotalResults)
		}
		if users == 1000 {
			// The sum of the users' assignedCourses is the row count.
			sum := 0
			for _, u := range fetchAll(t, srv, "user", map[string]any{"fields": []string{"assignedCourses"}}, 1000) {
				n, _ := u["assignedCourses"].(json.Number).Int64()
				sum += int(n)
			}
			if sum != r.TotalResults {
				t.Fatalf("assignedCourses sum %d, rows %d", sum, r.TotalResults)
			}
			// The course enrolments add up to the rows too.
			enrolled := 0
			for _, c := range fetchAll(t, srv, "course", nil, 1000) {
				n, _ := c["enrolledCount"].(json.Number).Int64()
				enrolled += int(n)
			}
			if enrolled != r.TotalResults {
				t.Fatalf("enrolledCount sum %d, rows %d", enrolled, r.TotalResults)
			}
		}
	}
}
