package servicetest

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

const (
	sessionPath = LegacyPath + "/session.ashx"
	ticketPath  = LegacyPath + "/userticket.ashx"
	tokenPath   = LegacyPath + "/token.ashx"
)

// newSession creates a session with parameters p in a JSON body and
// wants status.
func newSession(t *testing.T, srv *Server, p url.Values, status int) sessionBody {
	t.Helper()
	r := callAPI(t, srv, http.MethodPost, sessionPath, withLegacyJSON(p))
	var s sessionBody
	if status != http.StatusOK {
		wantV3Error(t, r, status, 0)
		return s
	}
	r.want(t, http.StatusOK).json(t, &s)
	return s
}

func login(t *testing.T, srv *Server, user string) sessionBody {
	t.Helper()
	return newSession(t, srv, url.Values{"login_dir": {"demo"}, "username": {user}, "password": {srv.Service.Password()}}, http.StatusOK)
}

// withLegacyJSON sends p as the JSON body of a legacy POST, as the
// document has it: userid (an integer) as a number, the rest as strings.
func withLegacyJSON(p url.Values) reqOpt {
	m := map[string]any{}
	for k := range p {
		m[k] = p.Get(k)
		if n, err := strconv.ParseInt(p.Get(k), 10, 64); err == nil && k == "userid" {
			m[k] = n
		}
	}
	return withJSON(m)
}

// postTicket asks userticket.ashx for a ticket: the session credentials
// of v (sid, sky, uid) in the query, the rest of v in a JSON body.
func postTicket(t *testing.T, srv *Server, v url.Values) apiAnswer {
	t.Helper()
	q, body := url.Values{}, url.Values{}
	for k, vs := range v {
		if k == "sid" || k == "sky" || k == "uid" {
			q[k] = vs
		} else {
			body[k] = vs
		}
	}
	return callAPI(t, srv, http.MethodPost, ticketPath+"?"+q.Encode(), withLegacyJSON(body))
}

// creds returns the sid, sky and uid of s plus extra.
func creds(s sessionBody, extra url.Values) url.Values {
	v := url.Values{"sid": {strconv.FormatInt(s.ID, 10)}, "sky": {s.Key}, "uid": {strconv.FormatInt(s.UID, 10)}}
	for k, vs := range extra {
		v[k] = vs
	}
	return v
}

func TestLegacySessions(t *testing.T) {
	srv := newTestServer(t)
	if srv.Service.LoginDir() != "demo" || srv.Service.Password() != "secret" {
		t.Fatal("default identities")
	}

	// A1: public session.
	pub := newSession(t, srv, url.Values{"login_dir": {"demo"}}, http.StatusOK)
	if pub.ID == 0 || !hex32RE.MatchString(pub.Key) || pub.UID != 0 || pub.FirstName != "" ||
		pub.LastName != "" || pub.Token != "" || pub.IsAdmin || pub.IsAuthor {
		t.Fatalf("public session %+v", pub)
	}
	// The exact keys of the Session table.
	r := callAPI(t, srv, http.MethodPost, sessionPath+"?login_dir=demo").want(t, http.StatusOK)
	var keys map[string]any
	r.json(t, &keys)
	for _, k := range []string{"Id", "Key", "UId", "FirstName", "LastName", "Token", "isAdmin", "isAuthor"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("session lacks %s: %s", k, r.body)
		}
	}

	// A2: private sessions.
	admin := login(t, srv, "admin")
	if admin.UID != 1 || admin.FirstName != "Ada" || admin.LastName != "Admin" || !admin.IsAdmin ||
		!admin.IsAuthor || !hex32RE.MatchString(admin.Token) || admin.ID == pub.ID {
		t.Fatalf("admin session %+v", admin)
	}
	user := login(t, srv, "user1")
	if user.UID != 2 || user.FirstName != "Uma" || user.IsAdmin || user.IsAuthor {
		t.Fatalf("user session %+v", user)
	}

	for _, c := range []struct {
		name   string
		p      url.Values
		status int
	}{
		{"no login_dir", url.Values{"username": {"admin"}, "password": {"secret"}}, 400},
		{"unknown login_dir", url.Values{"login_dir": {"acme"}}, 404},
		{"wrong password", url.Values{"login_dir": {"demo"}, "username": {"admin"}, "password": {"nope"}}, 401},
		{"unknown user", url.Values{"login_dir": {"demo"}, "username": {"eve"}, "password": {"secret"}}, 401},
		{"username without password", url.Values{"login_dir": {"demo"}, "username": {"admin"}}, 400},
		{"password without username", url.Values{"login_dir": {"demo"}, "password": {"secret"}}, 400},
		{"unknown token", url.Values{"login_dir": {"demo"}, "token": {"00"}}, 401},
		{"unknown ticket", url.Values{"login_dir": {"demo"}, "ticket": {"00"}}, 401},
		{"token and password", url.Values{"login_dir": {"demo"}, "token": {"00"}, "username": {"admin"}, "password": {"secret"}}, 400},
	} {
		t.Run(c.name, func(t *testing.T) { newSession(t, srv, c.p, c.status) })
	}

	// Parameters may come in the query as well as in the JSON body; the
	// body's come first.
	q := url.Values{"login_dir": {"demo"}, "username": {"user1"}, "password": {"secret"}}
	callAPI(t, srv, http.MethodPost, sessionPath+"?"+q.Encode()).want(t, http.StatusOK)
	callAPI(t, srv, http.MethodPost, sessionPath+"?login_dir=acme",
		withJSON(map[string]any{"login_dir": "demo", "username": "user1", "password": "secret"})).want(t, http.StatusOK)

	// 405 with Allow; 404 for unknown legacy paths.
	r = callAPI(t, srv, http.MethodGet, sessionPath+"?login_dir=demo")
	wantV3Error(t, r, http.StatusMethodNotAllowed, 1005)
	if r.h.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.h.Get("Allow"))
	}
	r = callAPI(t, srv, http.MethodPut, ticketPath)
	if wantV3Error(t, r, 405, 1005); r.h.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.h.Get("Allow"))
	}
	r = callAPI(t, srv, http.MethodPost, tokenPath)
	if wantV3Error(t, r, 405, 1005); r.h.Get("Allow") != "GET, HEAD" {
		t.Errorf("Allow %q", r.h.Get("Allow"))
	}
	wantV3Error(t, callAPI(t, srv, http.MethodPost, LegacyPath+"/nothing.ashx"), 404, 3004)
}

func TestLegacyTicketsAndTokens(t *testing.T) {
	srv := newTestServer(t)
	admin, user := login(t, srv, "admin"), login(t, srv, "user1")
	pub := newSession(t, srv, url.Values{"login_dir": {"demo"}}, http.StatusOK)

	ticket := func(s sessionBody, extra url.Values) apiAnswer {
		return postTicket(t, srv, creds(s, extra))
	}
	token := func(s sessionBody, extra url.Values) apiAnswer {
		return callAPI(t, srv, http.MethodGet, tokenPath+"?"+creds(s, extra).Encode())
	}

	// A3: the admin gets a ticket for user1, which signs in once.
	var tk struct {
		TicketKey string
		CompanyID int `json:"CompanyId"`
	}
	ticket(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}}).want(t, 200).json(t, &tk)
	if !hex32RE.MatchString(tk.TicketKey) || tk.CompanyID != CompanyID {
		t.Fatalf("ticket %+v", tk)
	}
	s := newSession(t, srv, url.Values{"login_dir": {"demo"}, "ticket": {tk.TicketKey}}, 200)
	if s.UID != 2 || s.FirstName != "Uma" {
		t.Fatalf("ticket session %+v", s)
	}
	newSession(t, srv, url.Values{"login_dir": {"demo"}, "ticket": {tk.TicketKey}}, 401)

	wantV3Error(t, ticket(user, url.Values{"userid": {"1"}, "login_dir": {"demo"}}), 403, 1003)
	wantV3Error(t, ticket(pub, url.Values{"userid": {"1"}, "login_dir": {"demo"}}), 403, 1003)
	wantV3Error(t, ticket(admin, url.Values{"userid": {"99"}, "login_dir": {"demo"}}), 404, 3004)
	wantV3Error(t, ticket(admin, url.Values{"login_dir": {"demo"}}), 400, 2001)
	wantV3Error(t, ticket(admin, url.Values{"userid": {"2"}}), 400, 2001)

	// sid, sky and uid are all checked.
	for name, v := range map[string]url.Values{
		"missing": {"userid": {"2"}, "login_dir": {"demo"}},
		"bad sky": {"sid": {strconv.FormatInt(admin.ID, 10)}, "sky": {user.Key}, "uid": {"1"}, "userid": {"2"}, "login_dir": {"demo"}},
		"bad uid": {"sid": {strconv.FormatInt(admin.ID, 10)}, "sky": {admin.Key}, "uid": {"2"}, "userid": {"2"}, "login_dir": {"demo"}},
		"bad sid": {"sid": {"12"}, "sky": {admin.Key}, "uid": {"1"}, "userid": {"2"}, "login_dir": {"demo"}},
		"nan sid": {"sid": {"x"}, "sky": {admin.Key}, "uid": {"1"}, "userid": {"2"}, "login_dir": {"demo"}},
	} {
		t.Run(name, func(t *testing.T) {
			wantV3Error(t, postTicket(t, srv, v), 401, 1001)
			wantV3Error(t, callAPI(t, srv, http.MethodGet, tokenPath+"?"+v.Encode()), 401, 1001)
		})
	}

	// A4: a token for another user needs an admin and login_dir; it is one-time.
	var tok struct{ Token string }
	token(admin, url.Values{"username": {"user1"}, "login_dir": {"demo"}, "url": {"https://example.com/x"}}).want(t, 200).json(t, &tok)
	if !hex32RE.MatchString(tok.Token) {
		t.Fatalf("token %+v", tok)
	}
	s = newSession(t, srv, url.Values{"login_dir": {"demo"}, "token": {tok.Token}}, 200)
	if s.UID != 2 {
		t.Fatalf("token session %+v", s)
	}
	newSession(t, srv, url.Values{"login_dir": {"demo"}, "token": {tok.Token}}, 401) // second use

	token(admin, url.Values{"email": {"user1@demo.example"}, "login_dir": {"demo"}}).want(t, 200)
	wantV3Error(t, token(admin, url.Values{"username": {"user1"}}), 400, 2001)
	wantV3Error(t, token(admin, url.Values{"username": {"nobody"}, "login_dir": {"demo"}}), 404, 3004)
	wantV3Error(t, token(admin, url.Values{"username": {"user1"}, "login_dir": {"demo"}, "email_token": {"maybe"}}), 400, 2001)
	wantV3Error(t, token(user, url.Values{"username": {"admin"}, "login_dir": {"demo"}}), 403, 1003)
	wantV3Error(t, token(pub, nil), 403, 1003)
	// A user may get a token for themself.
	token(user, nil).want(t, 200).json(t, &tok)
	if s := newSession(t, srv, url.Values{"login_dir": {"demo"}, "token": {tok.Token}}, 200); s.UID != 2 {
		t.Fatalf("self token session %+v", s)
	}
	checkHead(t, srv, tokenPath+"?"+creds(admin, nil).Encode())
}

func TestLegacySSOOnly(t *testing.T) {
	srv := newTestServer(t, WithSSOOnly(true), WithPassword("pw"))
	newSession(t, srv, url.Values{"login_dir": {"demo"}}, 403)
	newSession(t, srv, url.Values{"login_dir": {"demo"}, "username": {"user1"}, "password": {"pw"}}, 403)
	newSession(t, srv, url.Values{"login_dir": {"demo"}, "username": {"user1"}, "password": {"secret"}}, 401)
	admin := newSession(t, srv, url.Values{"login_dir": {"demo"}, "username": {"admin"}, "password": {"pw"}}, 200)
	// Tickets and tokens are the SSO path: they still sign users in.
	var tk struct{ TicketKey string }
	postTicket(t, srv, creds(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}})).want(t, 200).json(t, &tk)
	if s := newSession(t, srv, url.Values{"login_dir": {"demo"}, "ticket": {tk.TicketKey}}, 200); s.UID != 2 {
		t.Fatalf("ticket session under SSO %+v", s)
	}
}

func TestLegacyTicketExpires(t *testing.T) {
	srv := newTestServer(t)
	admin := login(t, srv, "admin")
	var tk struct{ TicketKey string }
	postTicket(t, srv, creds(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}})).want(t, 200).json(t, &tk)
	l := srv.Service.live
	l.mu.Lock()
	l.tickets[tk.TicketKey].expires = time.Now().Add(-time.Second)
	l.mu.Unlock()
	newSession(t, srv, url.Values{"login_dir": {"demo"}, "ticket": {tk.TicketKey}}, 401)
}

func TestLegacySessionTTL(t *testing.T) {
	srv := newTestServer(t, WithTokenTTL(time.Hour))
	admin := login(t, srv, "admin")
	p := creds(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}})
	postTicket(t, srv, p).want(t, 200)
	l := srv.Service.live
	l.mu.Lock()
	l.sessions[admin.ID].created = time.Now().Add(-2 * time.Hour)
	l.mu.Unlock()
	wantV3Error(t, postTicket(t, srv, p), 401, 1001)
}

// The fake reads what the document says and nothing else, so a client that
// strays is caught: A1 to A3's parameters from the query or a JSON body
// (not a form body), userid as a JSON number, and sid, sky, uid from the
// query only.
func TestLegacyParametersAsDocumented(t *testing.T) {
	srv := newTestServer(t)
	admin := login(t, srv, "admin")
	p := url.Values{"login_dir": {"demo"}, "username": {"admin"}, "password": {"secret"}}
	wantV3Error(t, callAPI(t, srv, http.MethodPost, sessionPath, withForm(p)), 400, 2001)
	wantV3Error(t, callAPI(t, srv, http.MethodPost, sessionPath, withJSON(`["demo"]`)), 400, 2002)
	wantV3Error(t, callAPI(t, srv, http.MethodPost, sessionPath, withJSON(`{"login_dir":7}`)), 400, 2001)

	sess := creds(admin, nil)
	// Session credentials in the body, not the query: not signed in.
	wantV3Error(t, callAPI(t, srv, http.MethodPost, ticketPath,
		withJSON(map[string]any{"sid": admin.ID, "sky": admin.Key, "uid": admin.UID, "userid": 2, "login_dir": "demo"})), 401, 1001)
	wantV3Error(t, callAPI(t, srv, http.MethodPost, ticketPath, withForm(creds(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}}))), 401, 1001)
	// The session in the query, the rest in a form body: not read.
	wantV3Error(t, callAPI(t, srv, http.MethodPost, ticketPath+"?"+sess.Encode(),
		withForm(url.Values{"userid": {"2"}, "login_dir": {"demo"}})), 400, 2001)
	// userid is an integer: a JSON number, not a string.
	wantV3Error(t, callAPI(t, srv, http.MethodPost, ticketPath+"?"+sess.Encode(),
		withJSON(map[string]any{"userid": "2", "login_dir": "demo"})), 400, 2001)
	callAPI(t, srv, http.MethodPost, ticketPath+"?"+sess.Encode(),
		withJSON(map[string]any{"userid": 2, "login_dir": "demo"})).want(t, 200)
	// The query still carries A3's other parameters too.
	callAPI(t, srv, http.MethodPost, ticketPath+"?"+creds(admin, url.Values{"userid": {"2"}, "login_dir": {"demo"}}).Encode()).want(t, 200)
}
