package extract

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Credentials of the test tenant; all distinctive so a leak test can grep.
const (
	tAPIToken  = "api-TOKEN-77d0e1"
	tPassword  = "pw-SECRET-9a8b7c"
	tSessKey   = "sky-SECRET-3c2d1e0f"
	tTicket    = "ticket-SECRET-5e6f"
	tAutoToken = "auto-SECRET-1a2b3c"
	tSigKey    = "sig-SECRET-c0ffee"
	tSessID    = 918273
)

// fakeTenant serves the legacy, v3, v4 and webhook interfaces with
// in-memory state. before may answer a request itself (return true).
type fakeTenant struct {
	t      *testing.T
	before func(w http.ResponseWriter, r *http.Request) bool

	// list returns the items of a collection at request time (themes,
	// assets, subscriptions, logs); nil uses the defaults.
	list func(name string) []map[string]any

	requests   atomic.Int64
	mu         sync.Mutex
	subs       map[string]map[string]any
	nextSub    int
	shares     int
	legacyReqs []string // legacy requests as "op query=<query> body=<body>", for assertions
}

func newFakeTenant(t *testing.T) *fakeTenant {
	return &fakeTenant{t: t, subs: map[string]map[string]any{}}
}

func problem(w http.ResponseWriter, status int, slug, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "/errors/" + slug, "title": title, "detail": detail, "status": status})
}

func v3err(w http.ResponseWriter, status, code int, name, msg string) {
	writeJSON(w, status, map[string]any{"response": map[string]any{"code": code, "name": name, "message": msg}})
}

func assetItems(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range n {
		out[i] = map[string]any{"id": fmt.Sprintf("%032x", i+1), "name": "asset " + strconv.Itoa(i), "type": "file",
			"fileType": "pdf", "sizeBytes": 1000 + i, "createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z",
			"ownerId": fmt.Sprintf("%032x", 999), "divisionId": nil, "tags": []string{"t"}, "stats": map[string]int{"views": i, "shares": 1}}
	}
	return out
}

func themeItems(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range n {
		out[i] = map[string]any{"id": fmt.Sprintf("%032x", 100+i), "title": "theme " + strconv.Itoa(i), "isGlobal": i == 0, "isDefault": i == 0,
			"displayData":   map[string]any{"aboutDescription": "", "logo": map[string]string{"url": "https://x/l.png"}, "displayImage": nil},
			"colorSettings": map[string]string{"headerColor": "112233", "headerFontColor": "ffffff", "accentColor": "abcdef", "accentFontColor": "000000"},
			"createdAt":     "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z", "division": nil, "brandNew": map[string]int{"x": 1}}
	}
	return out
}

// page answers an offset-paged list in either envelope.
func page(w http.ResponseWriter, r *http.Request, items []map[string]any, v3 bool) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	offset, _ := strconv.Atoi(q.Get("offset"))
	if limit == 0 {
		limit = 50
	}
	end := min(offset+limit, len(items))
	pg := []map[string]any{}
	if offset < len(items) {
		pg = items[offset:end]
	}
	if v3 {
		writeJSON(w, 200, map[string]any{"meta": map[string]int{"count": len(items)}, "response": map[string]any{"items": pg}})
		return
	}
	writeJSON(w, 200, map[string]any{"count": len(items), "items": pg})
}

func (f *fakeTenant) items(name string, def []map[string]any) []map[string]any {
	if f.list != nil {
		if it := f.list(name); it != nil {
			return it
		}
	}
	return def
}

func (f *fakeTenant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.before != nil && f.before(w, r) {
		return
	}
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/service/webservices_mobile/"):
		f.legacy(w, r, strings.TrimPrefix(p, "/service/webservices_mobile/"))
	case strings.HasPrefix(p, "/api/v3/"):
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			v3err(w, 401, 4010, "AuthenticationError", "bad token")
			return
		}
		switch {
		case p == "/api/v3/assets.json":
			page(w, r, f.items("assets", assetItems(23)), true)
		case strings.HasPrefix(p, "/api/v3/assets/"):
			id := strings.TrimSuffix(strings.TrimPrefix(p, "/api/v3/assets/"), ".json")
			for _, a := range assetItems(23) {
				if a["id"] == id {
					writeJSON(w, 200, map[string]any{"response": a})
					return
				}
			}
			v3err(w, 404, 3004, "ResourceNotFoundError", "no asset "+id)
		default:
			http.NotFound(w, r)
		}
	case strings.HasPrefix(p, "/v4/"):
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			problem(w, 401, "unauthorized", "Unauthorized", "bad token")
			return
		}
		f.v4(w, r, strings.TrimPrefix(p, "/v4"))
	case strings.HasPrefix(p, "/webhooks/v1/"):
		if r.Header.Get("Authorization") != "Bearer "+tAPIToken {
			problem(w, 401, "unauthorized", "Unauthorized", "bad token "+r.Header.Get("Authorization"))
			return
		}
		f.webhooks(w, r, strings.TrimPrefix(p, "/webhooks/v1"))
	default:
		http.NotFound(w, r)
	}
}

// legacy reads the session credentials (sid, sky, uid) from the query only
// and the other parameters from the query or a JSON body, as the interface
// document says; a form body is not read.
func (f *fakeTenant) legacy(w http.ResponseWriter, r *http.Request, op string) {
	q := r.URL.Query()
	v := url.Values{}
	for _, k := range []string{"login_dir", "username", "password", "token", "ticket", "userid"} {
		if q.Has(k) {
			v.Set(k, q.Get(k))
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		v3err(w, 400, 5001, "BodyError", err.Error())
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var p struct {
			LoginDir string `json:"login_dir"`
			Username string `json:"username"`
			Password string `json:"password"`
			Token    string `json:"token"`
			Ticket   string `json:"ticket"`
			UserID   *int64 `json:"userid"` // an integer in the document: a JSON number
		}
		if err := json.Unmarshal(body, &p); err != nil {
			v3err(w, 400, 5001, "BodyError", err.Error())
			return
		}
		for k, val := range map[string]string{"login_dir": p.LoginDir, "username": p.Username, "password": p.Password,
			"token": p.Token, "ticket": p.Ticket} {
			if val != "" {
				v.Set(k, val)
			}
		}
		if p.UserID != nil {
			v.Set("userid", strconv.FormatInt(*p.UserID, 10))
		}
	}
	f.mu.Lock()
	f.legacyReqs = append(f.legacyReqs, op+" query="+q.Encode()+" body="+string(body))
	f.mu.Unlock()
	session := map[string]any{"Id": tSessID, "Key": tSessKey, "UId": 1, "FirstName": "Ada", "LastName": "Admin",
		"Token": "sess-TOKEN-aa11bb22", "isAdmin": true, "isAuthor": true, "Culture": "en"}
	validSession := q.Get("sid") == strconv.Itoa(tSessID) && q.Get("sky") == tSessKey && q.Get("uid") == "1"
	switch op {
	case "session.ashx":
		if r.Method != http.MethodPost {
			w.WriteHeader(405)
			return
		}
		switch {
		case v.Get("login_dir") != "demo":
			v3err(w, 404, 3004, "ResourceNotFoundError", "no site")
		case v.Get("password") != "":
			if v.Get("password") != tPassword {
				v3err(w, 401, 4001, "AuthenticationError", "wrong password "+v.Get("password"))
				return
			}
			writeJSON(w, 200, session)
		case v.Get("token") != "":
			if v.Get("token") != tAutoToken {
				v3err(w, 401, 4001, "AuthenticationError", "token used")
				return
			}
			writeJSON(w, 200, session)
		case v.Get("ticket") != "":
			if v.Get("ticket") != tTicket {
				v3err(w, 401, 4001, "AuthenticationError", "bad ticket "+v.Get("ticket"))
				return
			}
			writeJSON(w, 200, session)
		default:
			writeJSON(w, 200, map[string]any{"Id": 5, "Key": "pub-KEY-000111", "UId": 0, "FirstName": "", "LastName": "", "Token": "", "isAdmin": false, "isAuthor": false})
		}
	case "userticket.ashx":
		if !validSession {
			v3err(w, 401, 4001, "AuthenticationError", "invalid session")
			return
		}
		writeJSON(w, 200, map[string]any{"TicketKey": tTicket, "CompanyId": 4242})
	case "token.ashx":
		if r.Method != http.MethodGet {
			w.WriteHeader(405)
			return
		}
		if !validSession {
			v3err(w, 401, 4001, "AuthenticationError", "invalid session")
			return
		}
		writeJSON(w, 200, map[string]any{"Token": tAutoToken})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeTenant) v4(w http.ResponseWriter, r *http.Request, p string) {
	switch {
	case p == "/shares" && r.Method == http.MethodPost:
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req["title"] == nil {
			problem(w, 400, "validation", "Validation failed", "title is required")
			return
		}
		f.mu.Lock()
		f.shares++
		f.mu.Unlock()
		req["id"] = fmt.Sprintf("%032x", 777)
		req["anonymousUrl"] = "https://t/s/1?a=1"
		req["createdAt"] = "2026-01-02T03:04:05.000Z"
		req["trackingCode"] = "xyz"
		if req["theme"] == nil {
			req["theme"] = map[string]string{"id": fmt.Sprintf("%032x", 100)}
		}
		writeJSON(w, 201, req)
	case p == "/themes":
		items := f.items("themes", themeItems(7))
		if d := r.URL.Query().Get("divisionId"); d != "" {
			items = items[1:3]
		}
		page(w, r, items, false)
	case strings.HasPrefix(p, "/themes/"):
		id := strings.TrimPrefix(p, "/themes/")
		for _, t := range themeItems(7) {
			if t["id"] == id {
				t["experiences"] = []map[string]string{{"id": "e1"}}
				writeJSON(w, 200, t)
				return
			}
		}
		problem(w, 404, "not-found", "Not Found", "no theme "+id)
	default:
		problem(w, 405, "method-not-allowed", "Method Not Allowed", "")
	}
}

func (f *fakeTenant) webhooks(w http.ResponseWriter, r *http.Request, p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if parts[0] != "subscriptions" {
		problem(w, 404, "not-found", "Not Found", "")
		return
	}
	sub := func(id string, req map[string]any) map[string]any {
		s := map[string]any{"id": id, "createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z", "requestCount": 0, "color": "blue"}
		for k, v := range req {
			s[k] = v
		}
		return s
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodPost:
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.nextSub++
		id := fmt.Sprintf("01GVZ8663CJAREF2SJE5XQRX%02d", f.nextSub)
		s := sub(id, req)
		f.subs[id] = s
		out := map[string]any{"signatureKey": tSigKey}
		for k, v := range s {
			out[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(out)
	case len(parts) == 1:
		var items []map[string]any
		for i := 1; i <= f.nextSub; i++ {
			if s, ok := f.subs[fmt.Sprintf("01GVZ8663CJAREF2SJE5XQRX%02d", i)]; ok {
				items = append(items, s)
			}
		}
		if items == nil {
			items = []map[string]any{}
		}
		page(w, r, items, false)
	case len(parts) == 2:
		s, ok := f.subs[parts[1]]
		if !ok {
			problem(w, 404, "not-found", "Not Found", "no subscription "+parts[1])
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, 200, s)
		case http.MethodPost:
			var req map[string]any
			_ = json.NewDecoder(r.Body).Decode(&req)
			s = sub(parts[1], req)
			f.subs[parts[1]] = s
			writeJSON(w, 200, s)
		case http.MethodDelete:
			delete(f.subs, parts[1])
			w.WriteHeader(204)
		}
	case len(parts) == 3 && parts[2] == "logs":
		if _, ok := f.subs[parts[1]]; !ok {
			problem(w, 404, "not-found", "Not Found", "")
			return
		}
		var logs []map[string]any
		if f.list != nil {
			logs = f.list("logs")
		}
		if logs == nil {
			for i := range 5 {
				logs = append(logs, map[string]any{"id": fmt.Sprintf("01LOG%021d", i), "subscriptionId": parts[1], "eventId": "e",
					"eventType": "COURSE_COMPLETED", "attempt": 1, "request": map[string]any{"method": "POST", "url": "https://dest", "headers": []any{}, "body": "{}"},
					"response": map[string]any{"status": 200, "body": "ok"}, "error": "", "deliveredAt": "2026-01-02T03:04:05Z", "durationMs": 12, "outcome": "delivered"})
			}
		}
		page(w, r, logs, false)
	default:
		problem(w, 404, "not-found", "Not Found", "")
	}
}

var _ = time.Second

func readAll(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String()), nil
		}
	}
}

type bodyReader struct{ *strings.Reader }

func (bodyReader) Close() error { return nil }

func newBody(b []byte) bodyReader { return bodyReader{strings.NewReader(string(b))} }
