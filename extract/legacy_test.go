package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestLegacySessionsTicketsTokens(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	c, _ := newTestClient(t, f)
	ctx := context.Background()

	pub, err := c.PublicSession(ctx, "demo")
	if err != nil || pub.UID != 0 || pub.ID != 5 {
		t.Fatalf("public session %v, %v", pub, err)
	}
	s, err := c.PasswordSession(ctx, "demo", "admin", tPassword)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != tSessID || s.Key.Reveal() != tSessKey || s.UID != 1 || !s.IsAdmin || s.FirstName != "Ada" ||
		string(s.Extra) != `{"Culture":"en"}` {
		t.Fatalf("session %+v extra %s", s, s.Extra)
	}
	if out := fmt.Sprintf("%v %+v %#v %s", s, s, *s, s.Key); strings.Contains(out, tSessKey) || strings.Contains(out, "918273") {
		t.Fatalf("session prints its credentials: %s", out)
	}
	tk, err := c.UserTicket(ctx, s, "demo", 2)
	if err != nil || tk.Key.Reveal() != tTicket || tk.CompanyID != 4242 {
		t.Fatalf("ticket %+v, %v", tk, err)
	}
	if _, err := c.TicketSession(ctx, "demo", tk.Key); err != nil {
		t.Fatal(err)
	}
	tok, err := c.AutoLoginToken(ctx, s, AutoLoginRequest{LoginDir: "demo", Username: "user1", URL: "https://x/y"})
	if err != nil || tok.Reveal() != tAutoToken {
		t.Fatalf("token %v, %v", tok, err)
	}
	if _, err := c.TokenSession(ctx, "demo", tok); err != nil {
		t.Fatal(err)
	}
	// Parameters: POSTs as JSON bodies (userid a number), the session
	// credentials and token.ashx's parameters in the query.
	f.mu.Lock()
	reqs := strings.Join(f.legacyReqs, "\n")
	f.mu.Unlock()
	for _, want := range []string{
		`session.ashx query= body={"login_dir":"demo"}`,
		`session.ashx query= body={"login_dir":"demo","username":"admin","password":"` + tPassword + `"}`,
		`userticket.ashx query=sid=918273&sky=` + tSessKey + `&uid=1 body={"userid":2,"login_dir":"demo"}`,
		`session.ashx query= body={"login_dir":"demo","ticket":"` + tTicket + `"}`,
		"token.ashx query=login_dir=demo&sid=918273&sky=" + tSessKey + "&uid=1&url=https%3A%2F%2Fx%2Fy&username=user1 body=",
		`session.ashx query= body={"login_dir":"demo","token":"` + tAutoToken + `"}`,
	} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no request %q in\n%s", want, reqs)
		}
	}
}

// 401s name the legacy credential that failed and never echo it.
func TestLegacyErrors(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, newFakeTenant(t))
	ctx := context.Background()
	_, err := c.PasswordSession(ctx, "demo", "admin", "wrong-password-xyz")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Interface != IfaceLegacy || ae.Credential != "legacy username and password" {
		t.Fatalf("err = %#v", err)
	}
	if strings.Contains(err.Error(), "wrong-password-xyz") || !strings.Contains(err.Error(), "legacy username and password is missing, invalid or expired") {
		t.Fatalf("err = %v", err)
	}
	_, err = c.UserTicket(ctx, &Session{ID: 1, Key: "bad-key-1234", UID: 1}, "demo", 2)
	if !errors.As(err, &ae) || ae.Credential != "legacy session (sid, sky, uid)" || !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v", err)
	}
	_, err = c.TicketSession(ctx, "demo", "ticket-WRONG-0000")
	if err == nil || strings.Contains(err.Error(), "ticket-WRONG-0000") || !strings.Contains(err.Error(), "legacy user ticket") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.PublicSession(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// A session POST whose connection drops after the request was written is
// not retried: the error says it may have been carried out. One that
// could not connect is retried and, when that keeps failing, says it was
// not carried out.
func TestLegacyPostNotRetriedBlindly(t *testing.T) {
	t.Parallel()
	f := newFakeTenant(t)
	f.before = func(w http.ResponseWriter, r *http.Request) bool {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return true
	}
	c, _ := newTestClient(t, f)
	recordSleeps(c)
	_, err := c.PasswordSession(context.Background(), "demo", "admin", tPassword)
	var ue *UncertainError
	if !errors.As(err, &ue) || !ue.Sent || !ue.MayHaveTakenEffect() || f.requests.Load() != 1 {
		t.Fatalf("err = %v, requests %d; want one request and an UncertainError that may have taken effect", err, f.requests.Load())
	}
	if !strings.Contains(err.Error(), "check before retrying") || strings.Contains(err.Error(), tPassword) {
		t.Fatalf("err = %v", err)
	}

	// Nothing listens: the request is never sent.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c2, err := New("http://"+addr, WithRetry(3, 0), withBackoff(0, 0), WithRateLimit(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c2.CreateShare(context.Background(), ShareRequest{Title: "t", Assets: []string{"a"}, Origin: "o"})
	if !errors.As(err, &ue) || ue.Sent || !errors.Is(err, ErrRetriesExhausted) || !strings.Contains(err.Error(), "safe to retry") {
		t.Fatalf("err = %v; want a not-sent UncertainError after 3 attempts", err)
	}
}

// service-interface.md, A and Authentication 1: "use Id as sid, Key as sky,
// UId as uid in later requests, as URL query parameters". A service that
// reads the session credentials from the URL query only (as documented)
// must grant UserTicket's request.
func TestUserTicketSendsSessionCredentialsInQuery(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("sid") != "918273" || q.Get("sky") != "key-0123456789" || q.Get("uid") != "1" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"response": map[string]any{
				"code": 1001, "name": "AuthenticationError", "message": "missing sid, sky, uid"}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"TicketKey": "ticket-abcdef0123", "CompanyId": 4242})
	})
	c, _ := newTestClient(t, h)
	admin := &Session{ID: 918273, Key: "key-0123456789", UID: 1}
	tk, err := c.UserTicket(context.Background(), admin, "demo", 2)
	if err != nil {
		t.Fatalf("UserTicket against a service reading sid, sky, uid from the URL query (as documented): %v", err)
	}
	if tk.CompanyID != 4242 {
		t.Fatalf("ticket %+v", tk)
	}
}

// service-interface.md, Endpoints: "All payloads are JSON encoded in
// UTF-8 ... for the endpoints below, JSON bodies are used" (section A's
// endpoints included). A service that takes session.ashx's parameters from
// the URL query or a JSON body, as documented, must see the login_dir,
// username and password PasswordSession sends.
func TestLegacySessionParametersTravelAsJSON(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := map[string]string{}
		for k := range r.URL.Query() {
			p[k] = r.URL.Query().Get(k)
		}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			_ = json.NewDecoder(r.Body).Decode(&p)
		}
		if p["login_dir"] != "demo" || p["username"] != "admin" || p["password"] != "secret-pw-123" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"response": map[string]any{
				"code": 2001, "name": "InvalidParameterError", "message": "login_dir is required"}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"Id": 100001, "Key": "key-0123456789", "UId": 1,
			"FirstName": "Ada", "LastName": "Admin", "Token": "", "isAdmin": true, "isAuthor": true})
	})
	c, _ := newTestClient(t, h)
	s, err := c.PasswordSession(context.Background(), "demo", "admin", "secret-pw-123")
	if err != nil {
		t.Fatalf("PasswordSession against a service taking documented JSON bodies: %v", err)
	}
	if s.ID != 100001 {
		t.Fatalf("session %v", s)
	}
}
