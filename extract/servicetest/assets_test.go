package servicetest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type assetsBody struct {
	Meta struct {
		Count int `json:"count"`
	} `json:"meta"`
	Response struct {
		Items []map[string]any `json:"items"`
	} `json:"response"`
}

// assetOptional lists the attributes only some items carry.
var assetOptional = []string{"expiresAt", "externalUrl", "durationSeconds", "pageCount", "itemCount"}

// assetNumericStrings lists the attributes sometimes sent as numeric
// strings without WithShapeVariants.
var assetNumericStrings = []string{"sizeBytes", "commentCount"}

// getAssets reads AssetsPath/assets.json+q, checks that the body is valid
// JSON and decodes it with numbers kept as json.Number.
func getAssets(t testing.TB, srv *Server, q string) assetsBody {
	t.Helper()
	r := callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json"+q, withBearer(srv.Service.AccessToken())).want(t, 200)
	if !json.Valid(r.body) {
		t.Fatalf("%s: body is not valid JSON", q)
	}
	var b assetsBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return b
}

// jsonTypeOf is the JSON type of a value decoded with UseNumber.
func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "?"
}

func isNumericString(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// collectKinds adds the JSON kinds of v under path (and of its members
// and elements, as path.member and path[]) to kinds.
func collectKinds(kinds map[string]map[string]bool, path string, v any) {
	if kinds[path] == nil {
		kinds[path] = map[string]bool{}
	}
	kinds[path][jsonTypeOf(v)] = true
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			collectKinds(kinds, path+"."+k, m)
		}
	case []any:
		for _, e := range x {
			collectKinds(kinds, path+"[]", e)
		}
	}
}

// itemKinds returns the JSON kinds seen per path over items; a numeric
// string of an attribute of assetNumericStrings counts as a number.
func itemKinds(items []map[string]any) map[string]map[string]bool {
	kinds := map[string]map[string]bool{}
	for _, it := range items {
		for k, v := range it {
			if slices.Contains(assetNumericStrings, k) && isNumericString(v) {
				v = json.Number(v.(string))
			}
			collectKinds(kinds, k, v)
		}
	}
	return kinds
}

func TestAssetsList(t *testing.T) {
	srv := newTestServer(t, WithUsers(20))
	tok := withBearer(srv.Service.AccessToken())
	get := func(q string) assetsBody { t.Helper(); return getAssets(t, srv, q) }
	all := get("?limit=1000")
	if all.Meta.Count != 100 || len(all.Response.Items) != 100 {
		t.Fatalf("count %d, %d items; want 5 per user", all.Meta.Count, len(all.Response.Items))
	}
	if n := assetCount(1); n != MinAssets {
		t.Errorf("assetCount(1) = %d", n)
	}
	for _, it := range all.Response.Items {
		for _, k := range assetFields {
			if _, ok := it[k]; !ok && !slices.Contains(assetOptional, k) {
				t.Fatalf("asset lacks %s: %v", k, it)
			}
		}
		if len(it) > len(assetFields) {
			t.Fatalf("asset has unknown attributes: %v", it)
		}
		if id, _ := it["id"].(string); !hex32RE.MatchString(id) {
			t.Fatalf("asset id %v", it["id"])
		}
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
		"?sort=stats": 2001, "?sort=owner": 2001, "?sort=expiresAt": 2001, "?fields=stats.views": 2001,
		"?page=2": 2003, "?limit=1&limit=2": 2003,
	} {
		t.Run(q, func(t *testing.T) {
			wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json"+q, tok), 400, code)
		})
	}
	checkHead(t, srv, AssetsPath+"/assets.json?limit=3", tok)
}

// TestAssetsVariety checks that the items carry what a real tenant sends:
// about 40 attributes, nested links, nulls, numeric strings, dates with
// offsets, date-only values, floats, arrays of objects, nested objects and
// attributes on some items only.
func TestAssetsVariety(t *testing.T) {
	srv := newTestServer(t, WithUsers(20))
	items := getAssets(t, srv, "?limit=1000").Response.Items

	seen := map[string]int{}  // attribute -> items carrying it
	nulls := map[string]int{} // attribute -> items where it is null
	for _, it := range items {
		for k, v := range it {
			seen[k]++
			if v == nil {
				nulls[k]++
			}
		}
	}
	if len(seen) < 40 || len(seen) != len(assetFields) {
		t.Fatalf("%d attributes across items, want all %d: %v", len(seen), len(assetFields), seen)
	}
	for _, k := range assetOptional {
		if seen[k] == 0 || seen[k] == len(items) {
			t.Errorf("%s is on %d of %d items; want some only", k, seen[k], len(items))
		}
	}
	for _, k := range []string{"fileType", "mimeType", "sizeBytes", "publishedAt", "reviewDate", "divisionId",
		"updatedBy", "division", "folder", "rating", "description", "thumbnailUrl", "downloadUrl", "checksum"} {
		if nulls[k] == 0 || nulls[k] == len(items) {
			t.Errorf("%s is null on %d of %d items; want some", k, nulls[k], len(items))
		}
	}

	count := map[string]int{}
	for _, it := range items {
		typ, fileType := it["type"].(string), it["fileType"]
		// Nested link objects.
		for k, coll := range map[string]string{"owner": "users", "createdBy": "users", "updatedBy": "users",
			"division": "divisions", "folder": "assets"} {
			l, ok := it[k].(map[string]any)
			if !ok {
				if it[k] != nil || k == "owner" || k == "createdBy" {
					t.Fatalf("%s is %v, want a link object", k, it[k])
				}
				continue
			}
			id, _ := l["id"].(string)
			if len(l) != 2 || !hex32RE.MatchString(id) || l["href"] != srv.URL+AssetsPath+"/"+coll+"/"+id+".json" {
				t.Fatalf("%s link %v", k, l)
			}
			count["link"]++
		}
		if it["owner"].(map[string]any)["id"] != it["ownerId"] {
			t.Fatalf("owner %v and ownerId %v differ", it["owner"], it["ownerId"])
		}
		// Numbers as strings.
		for _, k := range assetNumericStrings {
			if isNumericString(it[k]) {
				count["numeric string "+k]++
			}
		}
		// Dates: Z, offsets, milliseconds, date only.
		for _, k := range []string{"createdAt", "updatedAt", "publishedAt", "expiresAt"} {
			s, ok := it[k].(string)
			if !ok {
				continue
			}
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Fatalf("%s %q: %v", k, s, err)
			}
			if !strings.HasSuffix(s, "Z") {
				count["offset date"]++
			}
		}
		if !strings.HasSuffix(it["createdAt"].(string), "Z") {
			t.Fatalf("createdAt %v is not UTC with Z", it["createdAt"])
		}
		if s, ok := it["reviewDate"].(string); ok {
			if _, err := time.Parse(time.DateOnly, s); err != nil {
				t.Fatalf("reviewDate %q: %v", s, err)
			}
			count["date only"]++
		}
		// Nested objects, two levels deep.
		stats := it["stats"].(map[string]any)
		for _, k := range []string{"views", "shares", "downloads", "lastViewedAt"} {
			if _, ok := stats[k]; !ok {
				t.Fatalf("stats lacks %s: %v", k, stats)
			}
		}
		if s, ok := stats["lastViewedAt"].(string); ok {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Fatalf("lastViewedAt %q", s)
			}
		}
		custom := it["metadata"].(map[string]any)["custom"].(map[string]any)
		if _, ok := custom["region"].(string); !ok {
			t.Fatalf("metadata.custom %v", custom)
		}
		if custom["legalRef"] == nil {
			count["nested null"]++
		}
		// Arrays of strings and of objects.
		for _, tag := range it["tags"].([]any) {
			if _, ok := tag.(string); !ok {
				t.Fatalf("tags %v", it["tags"])
			}
		}
		for _, k := range []string{"languages", "permissions"} {
			for _, e := range it[k].([]any) {
				o := e.(map[string]any)
				if _, ok := o["id"].(string); !ok || len(o) != 2 || o["name"] == "" {
					t.Fatalf("%s %v", k, it[k])
				}
				count[k]++
			}
		}
		// Booleans and floats.
		for _, k := range []string{"isArchived", "isDownloadable", "isShareable", "isFeatured"} {
			if b, ok := it[k].(bool); !ok {
				t.Fatalf("%s %v", k, it[k])
			} else if b {
				count[k]++
			}
		}
		if n, ok := it["rating"].(json.Number); ok && strings.Contains(string(n), ".") {
			count["fractional rating"]++
		}
		// Attributes of some types only.
		if _, ok := it["externalUrl"]; ok != (typ == "link") {
			t.Fatalf("externalUrl on a %s", typ)
		}
		if _, ok := it["itemCount"]; ok != (typ == "folder") {
			t.Fatalf("itemCount on a %s", typ)
		}
		if _, ok := it["durationSeconds"]; ok != (fileType == "mp4") {
			t.Fatalf("durationSeconds on %v", fileType)
		}
		if _, ok := it["pageCount"]; ok != (typ == "file" && fileType != "mp4") {
			t.Fatalf("pageCount on %s %v", typ, fileType)
		}
		// Strings that exercise a decoder.
		for _, k := range []string{"name", "description"} {
			s, _ := it[k].(string)
			if strings.ContainsAny(s, `"\`) {
				count["quote or backslash"]++
			}
			if strings.IndexFunc(s, func(r rune) bool { return r > 0x7f }) >= 0 {
				count["non-ASCII"]++
			}
		}
	}
	for _, k := range []string{"link", "numeric string sizeBytes", "numeric string commentCount", "offset date",
		"date only", "nested null", "languages", "permissions", "isArchived", "isDownloadable", "isShareable",
		"isFeatured", "fractional rating", "quote or backslash", "non-ASCII"} {
		if count[k] == 0 {
			t.Errorf("no %s across %d items", k, len(items))
		}
	}
	if n := count["numeric string sizeBytes"]; n > len(items)/5 {
		t.Errorf("sizeBytes is a string on %d of %d items; want a few percent", n, len(items))
	}
}

// TestAssetsShapes checks that without WithShapeVariants every attribute
// (and nested member) keeps one JSON type across items, apart from null and
// the numeric strings of sizeBytes and commentCount; and that with it some
// attributes change type on a subset of items, never to null.
func TestAssetsShapes(t *testing.T) {
	plain := newTestServer(t, WithUsers(40))
	variant := newTestServer(t, WithUsers(40), WithShapeVariants())
	clean := getAssets(t, plain, "?limit=1000").Response.Items
	for path, ks := range itemKinds(clean) {
		delete(ks, "null")
		if len(ks) > 1 {
			t.Errorf("without shape variants, %s has types %v", path, ks)
		}
	}

	varied := getAssets(t, variant, "?limit=1000").Response.Items
	if len(varied) != len(clean) {
		t.Fatalf("%d items with shape variants, %d without", len(varied), len(clean))
	}
	var mixed []string
	for path, ks := range itemKinds(varied) {
		delete(ks, "null")
		if len(ks) > 1 {
			mixed = append(mixed, path)
		}
	}
	slices.Sort(mixed)
	t.Logf("with shape variants, these change type: %s", strings.Join(mixed, ", "))
	if len(mixed) == 0 {
		t.Fatal("with shape variants, no attribute changes JSON type")
	}
	// Each documented change happens, on about one item in seven, and
	// never yields null; the other items are as without the option.
	changes := map[string]func(v any) bool{
		"tags": func(v any) bool { _, ok := v.(map[string]any); return ok },
		"sizeBytes": func(v any) bool {
			return jsonTypeOf(v) == "string" && !isNumericString(v) || strings.Contains(jsonString(v), ".")
		},
		"isDownloadable": func(v any) bool { return v == "yes" || v == "no" },
		"isArchived":     func(v any) bool { return v == json.Number("0") || v == json.Number("1") },
		"stats":          func(v any) bool { _, ok := v.([]any); return ok },
		"metadata":       func(v any) bool { s, ok := v.(string); return ok && json.Valid([]byte(s)) },
		"updatedAt":      func(v any) bool { return jsonTypeOf(v) == "number" },
		"owner":          func(v any) bool { s, ok := v.(string); return ok && hex32RE.MatchString(s) },
	}
	changed, items := map[string]int{}, 0
	for i, it := range varied {
		if it["id"] != clean[i]["id"] {
			t.Fatalf("item %d: shape variants change the order", i)
		}
		n := 0
		for k, is := range changes {
			if !is(it[k]) {
				continue
			}
			if it[k] == nil {
				t.Fatalf("%s is null", k)
			}
			changed[k]++
			n++
		}
		if n > 0 {
			items++
		} else if a, b := strings.ReplaceAll(jsonString(it), variant.URL, "{tenant}"),
			strings.ReplaceAll(jsonString(clean[i]), plain.URL, "{tenant}"); a != b {
			t.Fatalf("item %d without variants differs:\n%s\n%s", i, a, b)
		}
	}
	for k := range changes {
		if changed[k] == 0 {
			t.Errorf("no item changes %s", k)
		}
	}
	if lo, hi := len(varied)/14, len(varied)/4; items < lo || items > hi {
		t.Errorf("%d of %d items vary; want about one in seven", items, len(varied))
	}

	// One asset is sent as in the list, variants included.
	for i, it := range varied {
		if !changes["tags"](it["tags"]) {
			continue
		}
		var one struct {
			Response map[string]any `json:"response"`
		}
		r := callAPI(t, variant, http.MethodGet, AssetsPath+"/assets/"+it["id"].(string)+".json", withBearer(variant.Service.AccessToken())).want(t, 200)
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.UseNumber()
		if err := dec.Decode(&one); err != nil {
			t.Fatal(err)
		}
		if a, b := jsonString(one.Response), jsonString(varied[i]); a != b {
			t.Fatalf("GET one differs from the list:\n%s\n%s", a, b)
		}
		break
	}
}

func jsonString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// assetKey compares attribute f of two items as the sort does; nil values
// are handled by the caller.
func assetKey(t *testing.T, f string, a, b any) int {
	t.Helper()
	switch f {
	case "sizeBytes", "rating", "ratingCount", "commentCount", "version":
		num := func(v any) float64 {
			s := jsonString(v)
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s %v is not a number", f, v)
			}
			return x
		}
		x, y := num(a), num(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case "createdAt", "updatedAt", "publishedAt":
		x, err1 := time.Parse(time.RFC3339, a.(string))
		y, err2 := time.Parse(time.RFC3339, b.(string))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s %v %v", f, a, b)
		}
		return x.Compare(y)
	}
	return strings.Compare(a.(string), b.(string))
}

func TestAssetsSortPagingFields(t *testing.T) {
	srv := newTestServer(t, WithUsers(30))
	tok := withBearer(srv.Service.AccessToken())
	for _, f := range assetSortable {
		for _, desc := range []bool{false, true} {
			q := f
			if desc {
				q = "-" + f
			}
			fields := "id"
			if f != "id" {
				fields += "," + f
			}
			items := getAssets(t, srv, "?limit=1000&sort="+q+"&fields="+fields).Response.Items
			if len(items) != 150 {
				t.Fatalf("sort=%s: %d items", q, len(items))
			}
			for i := 1; i < len(items); i++ {
				a, b := items[i-1][f], items[i][f]
				var c int
				switch {
				case a == nil && b == nil:
				case a == nil:
					t.Fatalf("sort=%s: null before a value at %d", q, i)
				case b == nil:
					continue
				default:
					c = assetKey(t, f, a, b)
					if desc {
						c = -c
					}
				}
				if c == 0 {
					c = strings.Compare(items[i-1]["id"].(string), items[i]["id"].(string))
				}
				if c > 0 {
					t.Fatalf("sort=%s: items %d and %d out of order: %v, %v", q, i-1, i, a, b)
				}
			}
		}
	}

	// Paging through a sort gives the whole sorted list, once.
	whole := getAssets(t, srv, "?limit=1000&sort=-updatedAt&fields=id").Response.Items
	var paged []map[string]any
	for off := 0; off < len(whole); off += 13 {
		p := getAssets(t, srv, "?limit=13&sort=-updatedAt&fields=id&offset="+strconv.Itoa(off))
		if p.Meta.Count != len(whole) {
			t.Fatalf("count %d, want %d", p.Meta.Count, len(whole))
		}
		paged = append(paged, p.Response.Items...)
	}
	if jsonString(paged) != jsonString(whole) {
		t.Fatal("pages differ from the whole list")
	}

	// fields keeps the order given; an attribute an item lacks is left out.
	r := callAPI(t, srv, http.MethodGet, AssetsPath+"/assets.json?limit=1000&fields=externalUrl,+type,id", tok).want(t, 200)
	if !bytes.HasPrefix(r.body, []byte(`{"meta":{"count":150},"response":{"items":[{"`)) {
		t.Fatalf("body %.80s", r.body)
	}
	var b assetsBody
	r.json(t, &b)
	for _, it := range b.Response.Items {
		want := 2
		if it["type"] == "link" {
			want = 3
		}
		if len(it) != want {
			t.Fatalf("fields=externalUrl,type,id: %v", it)
		}
	}
	if !bytes.Contains(r.body, []byte(`{"externalUrl":"https://`)) || !bytes.Contains(r.body, []byte(`{"type":"file","id":"`)) {
		t.Fatalf("fields order: %.300s", r.body)
	}
	// An item with none of the fields is an empty object.
	folders := 0
	for _, it := range getAssets(t, srv, "?limit=1000&fields=itemCount&sort=id").Response.Items {
		if len(it) == 1 {
			folders++
		} else if len(it) != 0 {
			t.Fatalf("fields=itemCount: %v", it)
		}
	}
	if folders != 15 {
		t.Fatalf("%d folders carry itemCount, want 15", folders)
	}
	// Every attribute named in fields is all attributes.
	named := getAssets(t, srv, "?limit=1000&fields="+strings.Join(assetFields, ",")).Response.Items
	if jsonString(named) != jsonString(getAssets(t, srv, "?limit=1000").Response.Items) {
		t.Fatal("fields naming every attribute differs from no fields")
	}
}

func TestAssetsOne(t *testing.T) {
	srv := newTestServer(t)
	tok := withBearer(srv.Service.AccessToken())
	id := hexID(DefaultSeed, "asset", 3)
	var one struct {
		Response map[string]any `json:"response"`
	}
	callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json", tok).want(t, 200).json(t, &one)
	if one.Response["id"] != id || len(one.Response) < 35 {
		t.Fatalf("asset %v", one.Response)
	}
	one.Response = nil
	callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?fields=id", tok).want(t, 200).json(t, &one)
	if len(one.Response) != 1 {
		t.Fatalf("fields=id: %v", one.Response)
	}
	// The folder link of an asset points at an asset that exists.
	one.Response = nil
	callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?fields=folder", tok).want(t, 200).json(t, &one)
	if f, ok := one.Response["folder"].(map[string]any); ok {
		var folder struct {
			Response map[string]any `json:"response"`
		}
		callAPI(t, srv, http.MethodGet, strings.TrimPrefix(f["href"].(string), srv.URL)+"?fields=type", tok).want(t, 200).json(t, &folder)
		if folder.Response["type"] != "folder" {
			t.Fatalf("folder link to a %v", folder.Response["type"])
		}
	}
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+strings.Repeat("0", 32)+".json", tok), 404, 3004)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?limit=1", tok), 400, 2003)
	wantV3Error(t, callAPI(t, srv, http.MethodGet, AssetsPath+"/assets/"+id+".json?fields=nope", tok), 400, 2001)
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
	encode := func(seed int64, variants bool) string {
		svc := New(WithSeed(seed), WithUsers(30))
		defer svc.Close()
		var b []byte
		for i := range svc.assetList().items {
			b = appendAsset(b, &svc.assetList().items[i], assetFields, "http://tenant", variants)
			b = append(b, '\n')
		}
		return string(b)
	}
	for _, v := range []bool{false, true} {
		if encode(3, v) != encode(3, v) {
			t.Fatalf("assets differ between two services with the same seed (variants %v)", v)
		}
	}
	if encode(3, false) == encode(4, false) {
		t.Fatal("assets are the same for two seeds")
	}
}
