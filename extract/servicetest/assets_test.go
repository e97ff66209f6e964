package servicetest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

type assetsBody struct {
	Meta struct {
		Count int `json:"count"`
	} `json:"meta"`
	Response struct {
		Items []map[string]any `json:"items"`
	} `json:"response"`
}

func TestAssetsList(t *testing.T) {
	srv := newTestServer(t, WithUsers(20))
	tok := withBearer(srv.Service.AccessToken())
	get := func(q string) assetsBody {
		t.Helper()
		var b assetsBody
		callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json"+q, tok).want(t, 200).json(t, &b)
		return b
	}
	all := get("?limit=1000")
	if all.Meta.Count != 100 || len(all.Response.Items) != 100 {
		t.Fatalf("count %d, %d items; want 5 per user", all.Meta.Count, len(all.Response.Items))
	}
	if n := assetCount(1); n != MinAssets {
		t.Errorf("assetCount(1) = %d", n)
	}
	first := all.Response.Items[0]
	for _, k := range assetFields {
		if _, ok := first[k]; !ok {
			t.Errorf("asset lacks %s: %v", k, first)
		}
	}
	if id, _ := first["id"].(string); !hex32RE.MatchString(id) {
		t.Errorf("asset id %v", first["id"])
	}
	// Default sort: createdAt ascending, then id.
	for i := 1; i < len(all.Response.Items); i++ {
		a, b := all.Response.Items[i-1], all.Response.Items[i]
		if a["createdAt"].(string) > b["createdAt"].(string) {
			t.Fatalf("not sorted by createdAt at %d", i)
		}
	}
	// Default limit 50; limit and offset page through the same order.
	if d := get(""); len(d.Response.Items) != DefaultLimit || d.Meta.Count != 100 {
		t.Fatalf("default page: %d items, count %d", len(d.Response.Items), d.Meta.Count)
	}
	p := get("?limit=7&offset=10")
	for i, it := range p.Response.Items {
		if it["id"] != all.Response.Items[10+i]["id"] {
			t.Fatalf("offset page item %d differs", i)
		}
	}
	if e := get("?offset=500"); len(e.Response.Items) != 0 || e.Meta.Count != 100 {
		t.Fatal("page past the end")
	}
	if z := get("?limit=0"); len(z.Response.Items) != 0 || z.Meta.Count != 100 {
		t.Fatal("limit=0")
	}
	// fields projects, in the order fields names the attributes (as reporting does).
	r := callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json?fields=name,id&limit=2", tok).want(t, 200)
	if !strings.Contains(string(r.body), `"items":[{"name":"`) {
		t.Fatalf("projection: %s", r.body)
	}
	var proj assetsBody
	r.json(t, &proj)
	if len(proj.Response.Items[0]) != 2 {
		t.Fatalf("projection keeps %v", proj.Response.Items[0])
	}
	// sort=-name is descending by name.
	byName := get("?sort=-name&limit=1000").Response.Items
	if !slices.IsSortedFunc(byName, func(a, b map[string]any) int { return strings.Compare(b["name"].(string), a["name"].(string)) }) {
		t.Fatal("sort=-name")
	}
	// Nulls sort last in both directions.
	for _, q := range []string{"?sort=sizeBytes&limit=1000", "?sort=-sizeBytes&limit=1000"} {
		items := get(q).Response.Items
		if items[0]["sizeBytes"] == nil || items[len(items)-1]["sizeBytes"] != nil {
			t.Fatalf("%s: nulls not last", q)
		}
	}

	for q, code := range map[string]int{
		"?limit=1001": 2001, "?limit=-1": 2001, "?limit=x": 2001, "?offset=-3": 2001,
		"?fields=nope": 2001, "?fields=id,id": 2001, "?sort=tags": 2001, "?sort=-x": 2001,
		"?page=2": 2003, "?limit=1&limit=2": 2003,
	} {
		t.Run(q, func(t *testing.T) {
			wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json"+q, tok), 400, code)
		})
	}
	checkHead(t, srv, AssetsPath+"/assets.json?limit=3", tok)
}

func TestAssetsOne(t *testing.T) {
	srv := newTestServer(t)
	tok := withBearer(srv.Service.AccessToken())
	id := hexID(DefaultSeed, "asset", 3)
	var one struct {
		Response map[string]any `json:"response"`
	}
	callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json", tok).want(t, 200).json(t, &one)
	if one.Response["id"] != id {
		t.Fatalf("asset %v", one.Response)
	}
	one.Response = nil
	callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?fields=id", tok).want(t, 200).json(t, &one)
	if len(one.Response) != 1 {
		t.Fatalf("fields=id: %v", one.Response)
	}
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+strings.Repeat("0", 32)+".json", tok), 404, 3004)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?limit=1", tok), 400, 2003)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/folders.json", tok), 404, 3004)
	checkHead(t, srv, AssetsPath+"/assets/"+id+".json", tok)
}

func TestAssetsAuthAndMethods(t *testing.T) {
	srv := newTestServer(t)
	path := AssetsPath + "/assets.json"
	wantV3Error(t, callAPI(t, srv, http.MethodGet, path), 401, 1001)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, path, withBearer("nope")), 401, 1001)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, path, withBearer(srv.Service.APIToken())), 401, 1001)
	// A token without the Coach licence reads v3 (only reporting refuses it).
	if r := callAPI(t, srv, http.MethodGet, path, withBearer(srv.Service.LimitedToken())); r.status != 200 {
		t.Errorf("limited token: status %d: %s", r.status, r.body)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		r := callAPI(t, srv, m, path, withBearer(srv.Service.AccessToken()))
		if wantV3Error(t, r, 405, 1005); r.h.Get("Allow") != "GET, HEAD" {
			t.Errorf("Allow %q", r.h.Get("Allow"))
		}
	}
}

func TestAssetsDeterministic(t *testing.T) {
	a, b := New(WithSeed(3)), New(WithSeed(3))
	defer a.Close()
	defer b.Close()
	x, _ := json.Marshal(a.assetList().items[:5])
	y, _ := json.Marshal(b.assetList().items[:5])
	if string(x) != string(y) || a.assetList().items[4].id != b.assetList().items[4].id {
		t.Fatal("assets differ between two services with the same seed")
	}
}
