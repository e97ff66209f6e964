package servicetest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestContract walks the endpoint tables of docs/service-interface.md,
// one row each, and checks what the document says of every row: the
// success status and shape, 401 for a missing or invalid credential, 403
// for a valid credential without the authorisation, the other
// interface's credential refused with 401 (the developer API token on
// reporting and v3, the access token on webhooks), HEAD like GET without
// a body, and 405 with Allow for a method the row does not have.
func TestContract(t *testing.T) {
	srv := newTestServer(t)
	svc := srv.Service
	access, api, limited := withBearer(svc.AccessToken()), withBearer(svc.APIToken()), withBearer(svc.LimitedToken())
	admin, user := login(t, srv, AdminUsername), login(t, srv, UserUsername)
	sub := subscribe(t, srv, map[string]any{"name": "contract", "url": "http://127.0.0.1:9/x", "method": "POST",
		"types": []any{"COURSE_COMPLETED"}})
	shareBody := map[string]any{"title": "t", "assets": []any{map[string]any{"id": hexID(DefaultSeed, "asset", 0)}}, "origin": "o"}
	subBody := map[string]any{"name": "c2", "url": "http://127.0.0.1:9/y", "method": "GET", "headers": []any{},
		"types": []any{"COURSE_COMPLETED"}}
	q := func(v url.Values) string { return "?" + v.Encode() }

	const (
		none = iota
		oauth
		apiKey
		legacyAdmin
	)
	rows := []struct {
		row, method, path string
		body              reqOpt
		auth              int
		status            int
		keys              []string // in the success body
		allow             string
	}{
		{"A1", "POST", sessionPath + q(url.Values{"login_dir": {"demo"}}), nil, none, 200,
			[]string{`"Id":`, `"Key":`, `"UId":0`, `"FirstName":""`, `"LastName":""`, `"Token":""`, `"isAdmin":false`, `"isAuthor":false`}, "POST"},
		{"A2", "POST", sessionPath, withJSON(map[string]any{"login_dir": "demo", "username": "admin", "password": "secret"}), none, 200,
			[]string{`"UId":1`, `"FirstName":"Ada"`, `"isAdmin":true`}, "POST"},
		{"A3", "POST", ticketPath + q(creds(admin, nil)), withJSON(map[string]any{"userid": 2, "login_dir": "demo"}), legacyAdmin, 200,
			[]string{`"TicketKey":"`, `"CompanyId":4242`}, "POST"},
		{"A4", "GET", tokenPath + q(creds(admin, url.Values{"username": {"user1"}, "login_dir": {"demo"}})), nil, legacyAdmin, 200,
			[]string{`"Token":"`}, "GET, HEAD"},
		{"B1", "GET", BasePath + "/objects", nil, oauth, 200, []string{`"objects":[{"id":`, `"urls":{"describe":`}, "GET, HEAD"},
		{"B2", "GET", BasePath + "/objects/curriculum/describe", nil, oauth, 200, []string{`"fields":[{"id":"curriculumTitle"`}, "GET, HEAD"},
		{"B3", "GET", BasePath + paramsPath(t, "curriculum", map[string]any{"page": 1}), nil, oauth, 200, []string{`"results":[`}, "GET, HEAD"},
		{"C1", "POST", V4Path + "/shares", withJSON(shareBody), oauth, 201,
			[]string{`"id":"`, `"anonymousUrl":"http`, `"untrackedUrl":"http`, `"dynamicUrl":"http`, `"createdAt":"`}, "POST"},
		{"C2", "GET", V4Path + "/themes/" + themeID(DefaultSeed, 0), nil, oauth, 200,
			[]string{`"isGlobal":true`, `"division":null`, `"colorSettings":{`}, "GET, HEAD"},
		{"C3", "GET", V4Path + "/themes", nil, oauth, 200, []string{`"count":7`, `"items":[{`}, "GET, HEAD"},
		{"D1", "POST", subsPath, withJSON(subBody), apiKey, 201, []string{`"id":"`, `"signatureKey":"`}, "GET, HEAD, POST"},
		{"D2", "POST", subsPath + "/" + sub.ID, withJSON(map[string]any{"name": "contract!"}), apiKey, 200,
			[]string{`"name":"contract!"`}, "GET, HEAD, POST, DELETE"},
		{"D4", "GET", subsPath + "/" + sub.ID, nil, apiKey, 200, []string{`"id":"` + sub.ID}, "GET, HEAD, POST, DELETE"},
		{"D5", "GET", subsPath, nil, apiKey, 200, []string{`"count":`, `"items":[{`}, "GET, HEAD, POST"},
		{"D6", "GET", subsPath + "/" + sub.ID + "/logs", nil, apiKey, 200, []string{`"count":0`, `"items":[]`}, "GET, HEAD"},
		{"D3", "DELETE", subsPath + "/" + sub.ID, nil, apiKey, 204, nil, "GET, HEAD, POST, DELETE"},
		{"E", "GET", AssetsPath + "/assets.json?limit=2&offset=1&fields=id,name", nil, oauth, 200,
			[]string{`{"meta":{"count":1000},"response":{"items":[{"id":"`, `"name":"`}, "GET, HEAD"},
	}
	for _, c := range rows {
		t.Run(c.row, func(t *testing.T) {
			opts := func(o ...reqOpt) []reqOpt {
				if c.body != nil {
					o = append(o, c.body)
				}
				return o
			}
			// Credentials first: the success call may consume the resource (D3).
			switch c.auth {
			case oauth, apiKey:
				other, good := api, access
				if c.auth == apiKey {
					other, good = access, api
				}
				for _, bad := range []reqOpt{nil, withBearer("invalid"), other} {
					o := opts()
					if bad != nil {
						o = opts(bad)
					}
					r := callAPI(t, srv, c.method, c.path, o...)
					if r.status != 401 || r.h.Get("WWW-Authenticate") == "" {
						t.Fatalf("bad credential: status %d: %s", r.status, r.body)
					}
				}
				// The limited token (no Coach licence) is refused by
				// reporting only; v3 and v4 answer it.
				if c.auth == oauth && strings.HasPrefix(c.path, BasePath) {
					if r := callAPI(t, srv, c.method, c.path, opts(limited)...); r.status != 403 {
						t.Fatalf("limited token: status %d: %s", r.status, r.body)
					}
				} else if c.auth == oauth && c.method == http.MethodGet {
					if r := callAPI(t, srv, c.method, c.path, opts(limited)...); r.status != c.status {
						t.Fatalf("limited token on %s: status %d, want %d: %s", c.path, r.status, c.status, r.body)
					}
				}
				// A wrong method is a 405 with Allow.
				r := callAPI(t, srv, http.MethodPatch, c.path, good)
				if r.status != 405 || r.h.Get("Allow") != c.allow {
					t.Fatalf("PATCH: status %d, Allow %q, want 405 %q", r.status, r.h.Get("Allow"), c.allow)
				}
			case legacyAdmin:
				// Without session credentials 401; a plain user's session 403.
				strip := func(s string) string {
					v, _ := url.ParseQuery(s)
					v.Del("sid")
					v.Del("sky")
					v.Del("uid")
					return v.Encode()
				}
				path := c.path
				if i := strings.IndexByte(path, '?'); i >= 0 {
					path = path[:i] + "?" + strip(path[i+1:])
				}
				r := callAPI(t, srv, c.method, path, opts()...)
				wantV3Error(t, r, 401, 1001)
				userCreds := creds(user, url.Values{"userid": {"1"}, "username": {"admin"}, "login_dir": {"demo"}})
				r = callAPI(t, srv, c.method, strings.SplitN(path, "?", 2)[0]+"?"+userCreds.Encode(), opts()...)
				wantV3Error(t, r, 403, 1003)
				r = callAPI(t, srv, http.MethodPatch, c.path)
				if r.status != 405 || r.h.Get("Allow") != c.allow {
					t.Fatalf("PATCH: status %d, Allow %q", r.status, r.h.Get("Allow"))
				}
			default:
				r := callAPI(t, srv, http.MethodPatch, c.path)
				if r.status != 405 || r.h.Get("Allow") != c.allow {
					t.Fatalf("PATCH: status %d, Allow %q", r.status, r.h.Get("Allow"))
				}
			}
			var o []reqOpt
			switch c.auth {
			case oauth:
				o = opts(access)
			case apiKey:
				o = opts(api)
			default:
				o = opts()
			}
			r := callAPI(t, srv, c.method, c.path, o...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			for _, k := range c.keys {
				if !strings.Contains(string(r.body), k) {
					t.Errorf("body lacks %s: %s", k, r.body)
				}
			}
			if c.method == http.MethodGet {
				checkHead(t, srv, c.path, o...)
			}
		})
	}
}
