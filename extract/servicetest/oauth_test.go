package servicetest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Error        string `json:"error"`
	Response     struct {
		Code int    `json:"code"`
		Name string `json:"name"`
	} `json:"response"`
}

func refresh(t *testing.T, srv *Server, tok string, basic bool) (int, tokenAnswer) {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}
	opts := []reqOpt{}
	if basic {
		opts = append(opts, func(r *http.Request) { r.SetBasicAuth(srv.Service.ClientID(), srv.Service.ClientSecret()) })
	} else {
		form.Set("client_id", srv.Service.ClientID())
		form.Set("client_secret", srv.Service.ClientSecret())
	}
	r := callAPI(t, srv, http.MethodPost, OAuthTokenPath, append([]reqOpt{withForm(form)}, opts...)...)
	var a tokenAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("token answer %d is not JSON: %s", r.status, r.body)
	}
	return r.status, a
}

func TestTokenEndpointRotatesAndRefusesReplays(t *testing.T) {
	srv := newTestServer(t, WithUsers(5), WithTokenTTL(time.Hour))
	st, a := refresh(t, srv, srv.Service.RefreshToken(), false)
	if st != 200 || a.AccessToken == "" || a.TokenType != "bearer" || a.ExpiresIn != 3600 || a.RefreshToken == "" || a.RefreshToken == srv.Service.RefreshToken() {
		t.Fatalf("refresh: %d %+v", st, a)
	}
	// The issued token reads every interface the access token reads.
	for _, p := range []string{BasePath + "/objects", AssetsPath + "/assets.json", V4Path + "/themes"} {
		if r := callAPI(t, srv, http.MethodGet, p, withBearer(a.AccessToken)); r.status != 200 {
			t.Errorf("%s with an issued token: %d %s", p, r.status, r.body)
		}
	}
	// A replay of the spent refresh token is refused in the service's shape.
	st, bad := refresh(t, srv, srv.Service.RefreshToken(), true)
	if st != 400 || bad.Error != "invalid_grant" || bad.Response.Name != "InvalidGrantError" {
		t.Fatalf("replay: %d %+v", st, bad)
	}
	// The new one works once, with HTTP Basic client authentication.
	st, b := refresh(t, srv, a.RefreshToken, true)
	if st != 200 || b.RefreshToken == a.RefreshToken {
		t.Fatalf("second refresh: %d %+v", st, b)
	}
	if s := srv.Service.OAuth(); s.Refreshes != 2 || s.Replays != 1 {
		t.Fatalf("stats %+v", s)
	}
	// A day later on the tenant's clock the access token has expired.
	srv.Service.Advance(24 * time.Hour)
	if r := callAPI(t, srv, http.MethodGet, BasePath+"/objects", withBearer(b.AccessToken)); r.status != 401 {
		t.Errorf("an access token a day old: %d", r.status)
	}
	// Refresh tokens live 14 days of the tenant's clock.
	srv.Service.Advance(13*24*time.Hour + time.Minute)
	if st, e := refresh(t, srv, b.RefreshToken, false); st != 400 || e.Error != "invalid_grant" {
		t.Fatalf("a 14-day-old refresh token: %d %+v", st, e)
	}
}

func TestTokenEndpointRefusesWrongClient(t *testing.T) {
	srv := newTestServer(t, WithUsers(5))
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {srv.Service.RefreshToken()},
		"client_id": {srv.Service.ClientID()}, "client_secret": {"wrong"}}
	if r := callAPI(t, srv, http.MethodPost, OAuthTokenPath, withForm(form)); r.status != 401 {
		t.Fatalf("wrong secret: %d %s", r.status, r.body)
	}
	// The refresh token was not spent by the refused request.
	if st, _ := refresh(t, srv, srv.Service.RefreshToken(), false); st != 200 {
		t.Fatalf("refresh after a refused client: %d", st)
	}
	if r := callAPI(t, srv, http.MethodGet, OAuthTokenPath); r.status != 405 {
		t.Fatalf("GET token endpoint: %d", r.status)
	}
}

func TestQuotaAnnouncedAndEnforced(t *testing.T) {
	srv := newTestServer(t, WithUsers(5), WithQuota(3, time.Hour))
	tok := withBearer(srv.Service.AccessToken())
	for i := 1; i <= 3; i++ {
		r := callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json", tok)
		if r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
		if got := r.h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(3-i) || r.h.Get("X-RateLimit-Limit") != "3" || r.h.Get("RateLimit-Remaining") != got {
			t.Fatalf("request %d: remaining %q, headers %v", i, got, r.h)
		}
		if reset, _ := strconv.ParseInt(r.h.Get("X-RateLimit-Reset"), 10, 64); time.Until(time.Unix(reset, 0)) < 59*time.Minute {
			t.Fatalf("reset %v", r.h.Get("X-RateLimit-Reset"))
		}
	}
	r := callAPI(t, srv, http.MethodGet, BasePath+"/objects", tok)
	if r.status != 429 || r.h.Get("Retry-After") == "" {
		t.Fatalf("past the quota: %d %v", r.status, r.h)
	}
	var body struct {
		Meta struct {
			RateLimit struct{ Limit, Remaining, Reset int64 } `json:"rateLimit"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Meta.RateLimit.Limit != 3 || body.Meta.RateLimit.Remaining != 0 {
		t.Fatalf("429 body meta: %s", r.body)
	}
	if n := srv.Service.QuotaRefused(); n != 1 {
		t.Fatalf("refused %d", n)
	}
}
