package servicetest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type themesBody struct {
	Count int     `json:"count"`
	Items []theme `json:"items"`
}

func TestThemes(t *testing.T) {
	srv := newTestServer(t)
	tok := withBearer(srv.Service.AccessToken())
	list := func(q string) themesBody {
		t.Helper()
		var b themesBody
		callAPI(t, srv, http.MethodGet, V4Path+"/themes"+q, tok, withHeader("Accept", "application/json")).want(t, 200).json(t, &b)
		return b
	}
	all := list("")
	if all.Count != themeCount || len(all.Items) != themeCount {
		t.Fatalf("%d themes, count %d", len(all.Items), all.Count)
	}
	globals := 0
	for _, th := range all.Items {
		if !hex32RE.MatchString(th.ID) || th.Title == "" || th.DisplayData.Logo.URL == "" {
			t.Errorf("theme %+v", th)
		}
		for _, c := range []string{th.ColorSettings.HeaderColor, th.ColorSettings.HeaderFontColor,
			th.ColorSettings.AccentColor, th.ColorSettings.AccentFontColor} {
			if len(c) != 6 || strings.Trim(c, "0123456789abcdefABCDEF") != "" {
				t.Errorf("color %q", c)
			}
		}
		created, err1 := time.Parse(time.RFC3339, th.CreatedAt)
		updated, err2 := time.Parse(time.RFC3339, th.UpdatedAt)
		if err1 != nil || err2 != nil || updated.Before(created) {
			t.Errorf("createdAt %q updatedAt %q", th.CreatedAt, th.UpdatedAt)
		}
		if th.IsGlobal {
			globals++
			if th.Division != nil || !th.IsDefault {
				t.Errorf("global theme %+v", th)
			}
		} else if th.Division == nil {
			t.Errorf("division theme without division %+v", th)
		}
		if th.Experiences != nil {
			t.Error("list items carry experiences")
		}
	}
	if globals != 1 {
		t.Fatalf("%d global themes", globals)
	}
	// Default sort -createdAt (by instant: some dates carry an offset).
	instant := func(s string) time.Time { x, _ := time.Parse(time.RFC3339, s); return x }
	if !slices.IsSortedFunc(all.Items, func(a, b theme) int { return instant(b.CreatedAt).Compare(instant(a.CreatedAt)) }) {
		t.Fatal("default order is not -createdAt")
	}
	// The raw body has the document's keys (and the fake's additions).
	r := callAPI(t, srv, http.MethodGet, V4Path+"/themes?limit=1&sort=title", tok).want(t, 200)
	for _, k := range []string{`"count":7`, `"isGlobal"`, `"isDefault"`, `"displayData":{"aboutDescription"`,
		`"logo":{"url":"http://`, `"displayImage"`, `"colorSettings":{"headerColor"`, `"division"`, `"createdAt"`, `"updatedAt"`} {
		if !strings.Contains(string(r.body), k) {
			t.Errorf("theme list lacks %s: %s", k, r.body)
		}
	}

	// Paging.
	p := list("?limit=2&offset=3")
	if p.Count != themeCount || len(p.Items) != 2 || p.Items[0].ID != all.Items[3].ID {
		t.Fatalf("page: %+v", p)
	}
	// Filters.
	div := divisionID(DefaultSeed, 1)
	if b := list("?divisionId=" + div); b.Count != 3 { // two of the division and the global one
		t.Fatalf("divisionId: %d", b.Count)
	}
	if b := list("?divisionId=" + div + "&includeGlobal=false"); b.Count != 2 {
		t.Fatalf("divisionId without global: %d", b.Count)
	}
	if b := list("?includeGlobal=false"); b.Count != themeCount-1 {
		t.Fatalf("includeGlobal=false: %d", b.Count)
	}
	if b := list("?isDefault=true"); b.Count != 1+Divisions {
		t.Fatalf("isDefault=true: %d", b.Count)
	}
	if b := list("?title=EMEA"); b.Count != 2 {
		t.Fatalf("title=EMEA: %d", b.Count)
	}
	if b := list("?title=emea"); b.Count != 2 {
		t.Fatalf("title is case-insensitive: %d", b.Count)
	}
	byTitle := list("?sort=title").Items
	if !slices.IsSortedFunc(byTitle, func(a, b theme) int { return strings.Compare(a.Title, b.Title) }) {
		t.Fatal("sort=title")
	}
	for _, s := range themeSorts {
		list("?sort=" + url.QueryEscape(s))
	}
	for _, q := range []string{"?limit=1001", "?offset=-1", "?sort=name", "?isDefault=yes", "?includeGlobal=2", "?color=red", "?limit=1&limit=2"} {
		t.Run(q, func(t *testing.T) {
			wantProblem(t, callAPI(t, srv, http.MethodGet, V4Path+"/themes"+q, tok), 400)
		})
	}
	checkHead(t, srv, V4Path+"/themes?limit=2", tok)

	// One theme.
	id := all.Items[2].ID
	var one theme
	callAPI(t, srv, http.MethodGet, V4Path+"/themes/"+id, tok).want(t, 200).json(t, &one)
	if one.ID != id || one.Experiences == nil {
		t.Fatalf("theme %+v", one)
	}
	checkHead(t, srv, V4Path+"/themes/"+id, tok)
	wantProblem(t, callAPI(t, srv, http.MethodGet, V4Path+"/themes/"+strings.Repeat("a", 32), tok), 404)
	wantProblem(t, callAPI(t, srv, http.MethodGet, V4Path+"/nothing", tok), 404)
	r = callAPI(t, srv, http.MethodPost, V4Path+"/themes", tok)
	if wantProblem(t, r, 405); r.h.Get("Allow") != "GET, HEAD" {
		t.Errorf("Allow %q", r.h.Get("Allow"))
	}
	wantProblem(t, callAPI(t, srv, http.MethodDelete, V4Path+"/themes/"+id, tok), 405)
}

// TestThemesVariety checks that themes keep every field of the document
// with its shape and add a real tenant's variety: nulls where the
// document allows them, extra fields on some themes only, dates with
// offsets.
func TestThemesVariety(t *testing.T) {
	srv := newTestServer(t)
	tok := withBearer(srv.Service.AccessToken())
	r := callAPI(t, srv, http.MethodGet, V4Path+"/themes?sort=title", tok).want(t, 200)
	var b struct {
		Count int              `json:"count"`
		Items []map[string]any `json:"items"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil || len(b.Items) != themeCount {
		t.Fatalf("%v: %s", err, r.body)
	}
	docKeys := map[string]string{"id": "string", "title": "string", "isGlobal": "boolean", "isDefault": "boolean",
		"displayData": "object", "displayData.aboutDescription": "string", "displayData.logo": "object",
		"displayData.logo.url": "string", "displayData.displayImage": "object|null", "colorSettings": "object",
		"colorSettings.headerColor": "string", "colorSettings.headerFontColor": "string",
		"colorSettings.accentColor": "string", "colorSettings.accentFontColor": "string",
		"createdAt": "string", "updatedAt": "string", "division": "object|null"}
	lookup := func(m map[string]any, path string) (any, bool) {
		var v any = m
		for _, k := range strings.Split(path, ".") {
			o, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = o[k]; !ok {
				return nil, false
			}
		}
		return v, true
	}
	present, nulls, offsets := map[string]int{}, map[string]int{}, 0
	for _, it := range b.Items {
		for path, want := range docKeys {
			v, ok := lookup(it, path)
			if !ok || !slices.Contains(strings.Split(want, "|"), jsonTypeOf(v)) {
				t.Fatalf("theme %v: %s is %v, want %s", it["id"], path, v, want)
			}
		}
		if d, ok := it["division"].(map[string]any); ok && (len(d) != 1 || !hex32RE.MatchString(d["id"].(string))) {
			t.Fatalf("division %v is not {id}", d)
		}
		for _, path := range []string{"description", "createdBy", "layout", "displayData.favicon",
			"colorSettings.linkColor", "displayData.displayImage", "division"} {
			if v, ok := lookup(it, path); ok {
				present[path]++
				if v == nil {
					nulls[path]++
				}
			}
		}
		for _, k := range []string{"createdAt", "updatedAt"} {
			if !strings.HasSuffix(it[k].(string), "Z") {
				offsets++
			}
		}
	}
	for _, path := range []string{"description", "createdBy", "displayImage", "division"} {
		if path == "displayImage" {
			path = "displayData.displayImage"
		}
		if present[path] != themeCount || nulls[path] == 0 || nulls[path] == themeCount {
			t.Errorf("%s: on %d themes, null on %d; want on all, null on some", path, present[path], nulls[path])
		}
	}
	for _, path := range []string{"layout", "displayData.favicon", "colorSettings.linkColor"} {
		if present[path] == 0 || present[path] == themeCount || nulls[path] != 0 {
			t.Errorf("%s: on %d themes, null on %d; want on some, never null", path, present[path], nulls[path])
		}
	}
	if offsets == 0 {
		t.Error("no theme date carries an offset")
	}
	for path, ks := range itemKinds(b.Items) {
		delete(ks, "null")
		if len(ks) > 1 {
			t.Errorf("%s has types %v", path, ks)
		}
	}
	// Sorting by dates sorts by instant, whatever the offset.
	for _, q := range []string{"createdAt", "-updatedAt"} {
		var l themesBody
		callAPI(t, srv, http.MethodGet, V4Path+"/themes?sort="+q, tok).want(t, 200).json(t, &l)
		f, desc := strings.CutPrefix(q, "-")
		for i := 1; i < len(l.Items); i++ {
			x, y := l.Items[i-1].CreatedAt, l.Items[i].CreatedAt
			if f == "updatedAt" {
				x, y = l.Items[i-1].UpdatedAt, l.Items[i].UpdatedAt
			}
			a, _ := time.Parse(time.RFC3339, x)
			c, _ := time.Parse(time.RFC3339, y)
			if (!desc && a.After(c)) || (desc && a.Before(c)) {
				t.Fatalf("sort=%s: %s before %s", q, x, y)
			}
		}
	}
}

func TestV4Auth(t *testing.T) {
	srv := newTestServer(t)
	for _, path := range []string{V4Path + "/themes", V4Path + "/themes/" + themeID(DefaultSeed, 0)} {
		wantProblem(t, callAPI(t, srv, http.MethodGet, path), 401)
		wantProblem(t, callAPI(t, srv, http.MethodGet, path, withHeader("Authorization", "Basic eDp5")), 401)
		wantProblem(t, callAPI(t, srv, http.MethodGet, path, withBearer("nope")), 401)
		wantProblem(t, callAPI(t, srv, http.MethodGet, path, withBearer(srv.Service.APIToken())), 401)
		if r := callAPI(t, srv, http.MethodGet, path, withBearer(srv.Service.LimitedToken())); r.status != 200 {
			t.Errorf("limited token (no Coach licence) on %s: status %d: %s", path, r.status, r.body)
		}
	}
	wantProblem(t, callAPI(t, srv, http.MethodPost, V4Path+"/shares", withJSON(`{}`)), 401)

	// Cross-origin requests only from the tenant's own origin.
	tok := withBearer(srv.Service.AccessToken())
	r := callAPI(t, srv, http.MethodGet, V4Path+"/themes", tok, withHeader("Origin", srv.URL)).want(t, 200)
	if r.h.Get("Access-Control-Allow-Origin") != srv.URL {
		t.Errorf("Access-Control-Allow-Origin %q", r.h.Get("Access-Control-Allow-Origin"))
	}
	wantProblem(t, callAPI(t, srv, http.MethodGet, V4Path+"/themes", tok, withHeader("Origin", "https://evil.example")), 403)
	r = callAPI(t, srv, http.MethodOptions, V4Path+"/shares", withHeader("Origin", srv.URL),
		withHeader("Access-Control-Request-Method", "POST")).want(t, 204)
	if r.h.Get("Access-Control-Allow-Methods") != "POST" {
		t.Errorf("preflight %v", r.h)
	}
}

func TestShares(t *testing.T) {
	srv := newTestServer(t)
	tok := withBearer(srv.Service.AccessToken())
	a0, a1 := hexID(DefaultSeed, "asset", 0), hexID(DefaultSeed, "asset", 1)
	post := func(body any) apiAnswer {
		return callAPI(t, srv, http.MethodPost, V4Path+"/shares", tok, withJSON(body))
	}

	// Minimal body: defaults apply.
	var sh map[string]any
	r := post(map[string]any{"title": "Q3 deck", "assets": []any{map[string]any{"id": a0}}, "origin": "picker"}).want(t, 201)
	r.json(t, &sh)
	id, _ := sh["id"].(string)
	if !hex32RE.MatchString(id) || sh["isDownloadAllowed"] != true || sh["expiresAt"] != nil ||
		sh["theme"].(map[string]any)["id"] != themeID(DefaultSeed, 0) || sh["createdAt"] != "2026-11-01T06:00:00.000Z" {
		t.Fatalf("share %v", sh)
	}
	if r.h.Get("Location") != V4Path+"/shares/"+id {
		t.Errorf("Location %q", r.h.Get("Location"))
	}
	for _, k := range []string{"anonymousUrl", "untrackedUrl", "dynamicUrl"} {
		u, err := url.Parse(sh[k].(string))
		if err != nil || !u.IsAbs() || !strings.Contains(u.Path, id) {
			t.Errorf("%s %v", k, sh[k])
		}
	}
	// The links work, the dynamic one with extra parameters.
	dyn := sh["dynamicUrl"].(string) + "&recipient=buyer%40example.com&platform=email"
	var page map[string]any
	callAPI(t, srv, http.MethodGet, strings.TrimPrefix(dyn, srv.URL)).want(t, 200).json(t, &page)
	if page["access"] != "dynamic" || page["parameters"].(map[string]any)["recipient"] != "buyer@example.com" {
		t.Fatalf("dynamic page %v", page)
	}
	callAPI(t, srv, http.MethodGet, strings.TrimPrefix(sh["anonymousUrl"].(string), srv.URL)).want(t, 200)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, SharePagePath+"/"+strings.Repeat("0", 32)), 404, 3004)

	// Full body.
	exp := "2026-12-31T23:59:59.123Z"
	th := themeID(DefaultSeed, 3)
	post(map[string]any{"title": "Full", "assets": []any{map[string]any{"id": a0}, map[string]any{"id": a1}},
		"origin": "crm", "isDownloadAllowed": false, "expiresAt": exp, "theme": map[string]any{"id": th}}).
		want(t, 201).json(t, &sh)
	if sh["isDownloadAllowed"] != false || sh["expiresAt"] != exp || sh["theme"].(map[string]any)["id"] != th ||
		len(sh["assets"].([]any)) != 2 {
		t.Fatalf("share %v", sh)
	}
	if srv.Service.Shares() != 2 {
		t.Fatalf("Shares() = %d", srv.Service.Shares())
	}

	many := func(n int) []any {
		s := make([]any, n)
		for i := range s {
			s[i] = map[string]any{"id": hexID(DefaultSeed, "asset", i)}
		}
		return s
	}
	post(map[string]any{"title": "max", "assets": many(MaxShareAssets), "origin": "o"}).want(t, 201)
	base := func(k string, v any) map[string]any {
		m := map[string]any{"title": "t", "assets": many(1), "origin": "o"}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name string
		body any
		meta string
	}{
		{"no title", base("title", nil), "title:propertyRequired"},
		{"blank title", base("title", "  "), "title:propertyRequired"},
		{"title type", base("title", 3), "title:propertyType"},
		{"long title", base("title", strings.Repeat("é", MaxShareTitle+1)), "title:propertyLength"},
		{"no assets", base("assets", nil), "assets:propertyRequired"},
		{"empty assets", base("assets", []any{}), "assets:propertyLength"},
		{"301 assets", base("assets", many(MaxShareAssets+1)), "assets:propertyLength"},
		{"asset without id", base("assets", []any{map[string]any{}}), "assets[0].id:propertyRequired"},
		{"unknown asset", base("assets", []any{map[string]any{"id": "nope"}}), "assets[0].id:propertyReference"},
		{"duplicate asset", base("assets", []any{map[string]any{"id": a0}, map[string]any{"id": a0}}), "assets[1].id:propertyDuplicate"},
		{"no origin", base("origin", nil), "origin:propertyRequired"},
		{"long origin", base("origin", strings.Repeat("x", MaxShareOrigin+1)), "origin:propertyLength"},
		{"download type", base("isDownloadAllowed", "yes"), "isDownloadAllowed:propertyType"},
		{"expiresAt no millis", base("expiresAt", "2026-12-31T23:59:59Z"), "expiresAt:propertyFormat"},
		{"expiresAt offset", base("expiresAt", "2026-12-31T23:59:59.000+01:00"), "expiresAt:propertyFormat"},
		{"expiresAt date", base("expiresAt", "2026-12-31"), "expiresAt:propertyFormat"},
		{"expiresAt invalid", base("expiresAt", "2026-13-31T23:59:59.000Z"), "expiresAt:propertyFormat"},
		{"expiresAt past", base("expiresAt", "2026-10-31T23:59:59.000Z"), "expiresAt:propertyValue"},
		{"unknown theme", base("theme", map[string]any{"id": "nope"}), "theme.id:propertyReference"},
		{"theme type", base("theme", "x"), "theme.id:propertyRequired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := wantProblem(t, post(c.body), 400)
			if p.Type != "/errors/validation" || !slices.Contains(metaNames(p), c.meta) {
				t.Fatalf("problem %+v, want meta %s", p, c.meta)
			}
		})
	}
	// Every error at once.
	p := wantProblem(t, post(map[string]any{}), 400)
	if len(p.Meta) != 3 {
		t.Fatalf("meta %v", metaNames(p))
	}
	for _, body := range []string{`[1]`, `{"title":`, `null`} {
		if p := wantProblem(t, post(body), 400); p.Type != "/errors/bad-request" {
			t.Fatalf("%s: %+v", body, p)
		}
	}
	r = callAPI(t, srv, http.MethodGet, V4Path+"/shares", tok)
	if wantProblem(t, r, 405); r.h.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.h.Get("Allow"))
	}
	wantProblem(t, callAPI(t, srv, http.MethodGet, V4Path+"/shares/"+id, tok), 404)
}

// FuzzShareBody: decoding a share body never panics, and a body it accepts
// satisfies every rule of docs/service-shapes.md.
func FuzzShareBody(f *testing.F) {
	svc := New(WithUsers(10))
	defer svc.Close()
	a0 := hexID(DefaultSeed, "asset", 0)
	for _, s := range []string{`{}`, `null`, `[]`, `{"title":"t","assets":[{"id":"` + a0 + `"}],"origin":"o"}`,
		`{"title":"t","assets":[{"id":"` + a0 + `"}],"origin":"o","expiresAt":"2027-01-01T00:00:00.000Z","theme":{"id":"x"}}`,
		`{"title":1,"assets":{"id":2},"origin":null,"isDownloadAllowed":"no"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sh, p := svc.decodeShare(body, DefaultNow)
		if (sh == nil) == (p == nil) {
			t.Fatalf("share %v, problem %v", sh, p)
		}
		if p != nil {
			if p.Status != http.StatusBadRequest {
				t.Fatalf("status %d", p.Status)
			}
			return
		}
		if strings.TrimSpace(sh.Title) == "" || len([]rune(sh.Title)) > MaxShareTitle || len(sh.Assets) == 0 ||
			len(sh.Assets) > MaxShareAssets || strings.TrimSpace(sh.Origin) == "" || len([]rune(sh.Origin)) > MaxShareOrigin ||
			svc.themeIndex(sh.Theme.ID) < 0 {
			t.Fatalf("accepted an invalid share %+v", sh)
		}
		if sh.ExpiresAt != nil && (!expiresAtRE.MatchString(*sh.ExpiresAt) || sh.expires <= DefaultNow.Unix()) {
			t.Fatalf("accepted expiresAt %q", *sh.ExpiresAt)
		}
	})
}

func TestWithoutV4RefusesEveryToken(t *testing.T) {
	srv := NewServer(WithUsers(5), WithoutV4())
	t.Cleanup(srv.Close)
	for _, tok := range []string{srv.Service.AccessToken(), srv.Service.LimitedToken()} {
		for _, path := range []string{V4Path + "/themes", V4Path + "/themes/" + themeID(DefaultSeed, 0)} {
			wantProblem(t, callAPI(t, srv, http.MethodGet, path, withBearer(tok)), 403)
		}
	}
	// The other interfaces are there.
	if r := callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json", withBearer(srv.Service.AccessToken())); r.status != 200 {
		t.Fatalf("v3 without v4: %d", r.status)
	}
}
