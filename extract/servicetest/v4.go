package servicetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The v4 interface (section C): shares and sharing themes, and the public
// share pages their links point to.

// V4Path is the path prefix of the v4 interface; SharePagePath is the
// prefix of the links a share answers (anonymousUrl, untrackedUrl,
// dynamicUrl).
const (
	V4Path        = "/v4"
	SharePagePath = "/s"
)

// Limits of a share (docs/service-interface.md, section C).
const (
	MaxShareTitle  = 200
	MaxShareOrigin = 20
	MaxShareAssets = 300
	maxBodyLen     = 1 << 20
)

// --- themes ----------------------------------------------------------------

// themeCount is one global theme plus two per division.
const themeCount = 1 + 2*Divisions

var (
	divisionNames = []string{"North America", "EMEA", "APAC"}
	themeStyles   = []string{"Classic", "Bold"}
)

type ref struct {
	ID string `json:"id"`
}

type urlRef struct {
	URL string `json:"url"`
}

// theme is a sharing theme, in the order of its JSON fields. The fields
// the document names keep its names and shapes; description, layout,
// createdBy, displayData.favicon and colorSettings.linkColor are the
// fake's additions (docs/service-shapes.md): description and createdBy are
// sent on every theme and may be null, the other three only on some themes.
type theme struct {
	ID            string        `json:"id"`
	Title         string        `json:"title"`
	Description   *string       `json:"description"`
	IsGlobal      bool          `json:"isGlobal"`
	IsDefault     bool          `json:"isDefault"`
	DisplayData   displayData   `json:"displayData"`
	ColorSettings colorSettings `json:"colorSettings"`
	Layout        string        `json:"layout,omitempty"`
	CreatedAt     string        `json:"createdAt"`
	UpdatedAt     string        `json:"updatedAt"`
	CreatedBy     *ref          `json:"createdBy"`
	Division      *ref          `json:"division"`
	Experiences   []ref         `json:"experiences,omitempty"` // GET /themes/{id} only

	created, updated int64
}

type displayData struct {
	AboutDescription string  `json:"aboutDescription"`
	Logo             urlRef  `json:"logo"`
	DisplayImage     *urlRef `json:"displayImage"`
	Favicon          *urlRef `json:"favicon,omitempty"`
}

type colorSettings struct {
	HeaderColor     string `json:"headerColor"`
	HeaderFontColor string `json:"headerFontColor"`
	AccentColor     string `json:"accentColor"`
	AccentFontColor string `json:"accentFontColor"`
	LinkColor       string `json:"linkColor,omitempty"`
}

// divisionZones are the offsets the "Bold" theme of each division writes
// its dates with (the other themes write UTC with Z).
var divisionZones = []*time.Location{time.FixedZone("", -5*3600), time.FixedZone("", 2*3600),
	time.FixedZone("", 5*3600+1800)}

func themeID(seed int64, i int) string { return hexID(seed, "theme", i) }

// makeTheme returns theme i; origin prefixes its image URLs. Theme 0 is the
// global default; themes 1+2d and 2+2d belong to division d, the first of
// them ("Classic") being the division's default.
func makeTheme(seed int64, i int, origin string) theme {
	r := newRnd(uint64(seed), 0x7e3e, i)
	t := theme{ID: themeID(seed, i)}
	zone := time.UTC
	if i == 0 {
		t.Title, t.IsGlobal, t.IsDefault = "Corporate Default", true, true
		t.DisplayData.AboutDescription = "Content shared by the Demo Company team."
		desc := "The company-wide look for shared content."
		t.Description, t.Layout = &desc, "list"
	} else {
		d, j := (i-1)/2, (i-1)%2
		t.Title = divisionNames[d] + " — " + themeStyles[j]
		t.IsDefault = j == 0
		t.Division = &ref{divisionID(seed, d)}
		if j == 0 {
			t.DisplayData.AboutDescription = "Your " + divisionNames[d] + " account team, at your service."
		} else {
			t.Layout, zone = "grid", divisionZones[d]
		}
		if i%3 != 1 {
			desc := divisionNames[d] + ` — the "` + themeStyles[j] + `" look`
			t.Description = &desc
		}
		t.CreatedBy = &ref{memberID(seed, legacyUsers[0])}
	}
	base := origin + "/static/themes/" + t.ID
	t.DisplayData.Logo = urlRef{base + "/logo.png"}
	if i%2 == 1 {
		t.DisplayData.DisplayImage = &urlRef{base + "/display.jpg"}
	}
	if i%3 == 0 {
		t.DisplayData.Favicon = &urlRef{base + "/favicon.ico"}
	}
	color := func() string { return strconv.FormatUint(r.u64()&0xffffff|0x1000000, 16)[1:] }
	t.ColorSettings.HeaderColor = color()
	t.ColorSettings.HeaderFontColor = color()
	t.ColorSettings.AccentColor = color()
	t.ColorSettings.AccentFontColor = color()
	t.created = anchor - int64(400-40*i)*day - int64(r.intn(day))
	t.updated = t.created + int64(r.intn(30))*day + int64(r.intn(day))
	if i%2 == 1 {
		t.ColorSettings.LinkColor = color()
	}
	if zone == time.UTC {
		t.CreatedAt, t.UpdatedAt = isoSeconds(time.Unix(t.created, 0)), isoSeconds(time.Unix(t.updated, 0))
	} else {
		const layout = "2006-01-02T15:04:05-07:00"
		t.CreatedAt = time.Unix(t.created, 0).In(zone).Format(layout)
		t.UpdatedAt = time.Unix(t.updated, 0).In(zone).Format(layout)
	}
	if i == 0 {
		t.UpdatedAt = isoMillis(time.Unix(t.updated, 0))
	}
	return t
}

func (s *Service) themeIndex(id string) int {
	for i := range themeCount {
		if themeID(s.cfg.seed, i) == id {
			return i
		}
	}
	return -1
}

var themeSorts = []string{"title", "-title", "createdAt", "-createdAt", "updatedAt", "-updatedAt"}

func (s *Service) serveThemes(w http.ResponseWriter, r *http.Request) {
	get, err := singleQuery(r, "limit", "offset", "divisionId", "includeGlobal", "isDefault", "title", "sort")
	if err != nil {
		writeProblem(w, r, newProblem(http.StatusBadRequest, "%v", err))
		return
	}
	bad := func(name, format string, args ...any) {
		p := newProblem(http.StatusBadRequest, format, args...)
		p.Meta = []problemMeta{{Name: name, Reason: p.Detail, Category: catValue}}
		writeProblem(w, r, p)
	}
	limit, offset, name, perr := pageParams(get)
	if perr != nil {
		bad(name, "%v", perr)
		return
	}
	boolParam := func(name string) (val, set, ok bool) {
		v, present := get(name)
		if !present {
			return false, false, true
		}
		b, e := strconv.ParseBool(v)
		if e != nil {
			bad(name, "%s must be true or false, got %q", name, v)
			return false, false, false
		}
		return b, true, true
	}
	includeGlobal, igSet, ok := boolParam("includeGlobal")
	if !ok {
		return
	}
	if !igSet {
		includeGlobal = true
	}
	isDefault, idSet, ok := boolParam("isDefault")
	if !ok {
		return
	}
	sortBy := "-createdAt"
	if v, ok := get("sort"); ok {
		if !slices.Contains(themeSorts, v) {
			bad("sort", "sort must be one of %s, got %q", strings.Join(themeSorts, ", "), v)
			return
		}
		sortBy = v
	}
	division, divSet := get("divisionId")
	title, _ := get("title")
	origin := requestOrigin(r)
	var items []theme
	for i := range themeCount {
		t := makeTheme(s.cfg.seed, i, origin)
		switch {
		case t.IsGlobal && !includeGlobal:
			continue
		case divSet && !t.IsGlobal && t.Division.ID != division:
			continue
		case idSet && t.IsDefault != isDefault:
			continue
		case title != "" && !strings.Contains(strings.ToLower(t.Title), strings.ToLower(title)):
			continue
		}
		items = append(items, t)
	}
	f, desc := strings.CutPrefix(sortBy, "-")
	slices.SortStableFunc(items, func(a, b theme) int {
		var c int
		switch f {
		case "title":
			c = strings.Compare(a.Title, b.Title)
		case "createdAt":
			c = int(a.created - b.created)
		case "updatedAt":
			c = int(a.updated - b.updated)
		}
		if desc {
			c = -c
		}
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		return c
	})
	lo, hi := window(len(items), limit, offset)
	writeJSONStatus(w, r, http.StatusOK, struct {
		Count int     `json:"count"`
		Items []theme `json:"items"`
	}{len(items), append([]theme{}, items[lo:hi]...)})
}

func (s *Service) serveTheme(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := singleQuery(r); err != nil {
		writeProblem(w, r, newProblem(http.StatusBadRequest, "%v", err))
		return
	}
	i := s.themeIndex(id)
	if i < 0 {
		writeProblem(w, r, newProblem(http.StatusNotFound, "unknown theme %q", id))
		return
	}
	t := makeTheme(s.cfg.seed, i, requestOrigin(r))
	t.Experiences = []ref{}
	for k := range i % 3 {
		t.Experiences = append(t.Experiences, ref{hexID(s.cfg.seed, "experience", 10*i+k)})
	}
	writeJSONStatus(w, r, http.StatusOK, t)
}

// --- routing -----------------------------------------------------------------

func (s *Service) serveV4(w http.ResponseWriter, r *http.Request) {
	if s.cfg.noV4 {
		writeProblem(w, r, newProblem(http.StatusForbidden,
			"the tenant's plan does not include the sharing API (it needs an Ultimate, Advanced or Expert plan)"))
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, V4Path)
	var allow string
	var serve func()
	switch {
	case rest == "/shares":
		allow, serve = "POST", func() { s.createShare(w, r) }
	case rest == "/themes":
		allow, serve = "GET, HEAD", func() { s.serveThemes(w, r) }
	case strings.HasPrefix(rest, "/themes/") && len(rest) > len("/themes/") && !strings.Contains(rest[len("/themes/"):], "/"):
		id := rest[len("/themes/"):]
		allow, serve = "GET, HEAD", func() { s.serveTheme(w, r, id) }
	default:
		writeProblem(w, r, newProblem(http.StatusNotFound, "no resource at path %q", r.URL.Path))
		return
	}
	// Cross-origin requests are accepted only from the tenant's own origin.
	if o := r.Header.Get("Origin"); o != "" {
		own := requestOrigin(r)
		if o != own {
			writeProblem(w, r, newProblem(http.StatusForbidden,
				"cross-origin requests are accepted only from the tenant's domain %s, not %s", own, o))
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", own)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", allow)
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		writeProblem(w, r, methodProblem(r.Method, allow))
		return
	}
	if err := s.authorizeResource(r); err != nil {
		writeProblem(w, r, problemFrom(err))
		return
	}
	serve()
}

// --- shares ------------------------------------------------------------------

// share is a created share, in the order of its JSON fields.
type share struct {
	ID                string  `json:"id"`
	Title             string  `json:"title"`
	Assets            []ref   `json:"assets"`
	Origin            string  `json:"origin"`
	IsDownloadAllowed bool    `json:"isDownloadAllowed"`
	ExpiresAt         *string `json:"expiresAt"`
	Theme             ref     `json:"theme"`
	AnonymousURL      string  `json:"anonymousUrl"`
	UntrackedURL      string  `json:"untrackedUrl"`
	DynamicURL        string  `json:"dynamicUrl"`
	CreatedAt         string  `json:"createdAt"`

	expires int64 // Unix seconds; 0 when it never expires
}

var expiresAtRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// decodeShare validates a share creation body against the tenant at now.
func (s *Service) decodeShare(body []byte, now time.Time) (*share, *problem) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, newProblem(http.StatusBadRequest, "the body must be a JSON object")
	}
	var meta []problemMeta
	fail := func(name, category, format string, args ...any) {
		meta = append(meta, problemMeta{Name: name, Reason: fmt.Sprintf(format, args...), Category: category})
	}
	present := func(k string) bool { v, ok := raw[k]; return ok && string(v) != "null" }
	text := func(k string, maxLen int) string {
		if !present(k) {
			fail(k, catRequired, "%s is required", k)
			return ""
		}
		var v string
		if json.Unmarshal(raw[k], &v) != nil {
			fail(k, catType, "%s must be a string", k)
			return ""
		}
		switch n := utf8.RuneCountInString(v); {
		case strings.TrimSpace(v) == "":
			fail(k, catRequired, "%s is required and must not be blank", k)
		case n > maxLen:
			fail(k, catLength, "%s is %d characters long; at most %d are allowed", k, n, maxLen)
		}
		return v
	}
	sh := &share{IsDownloadAllowed: true}
	sh.Title = text("title", MaxShareTitle)
	assets := s.assetList()
	var items []json.RawMessage
	switch {
	case !present("assets"):
		fail("assets", catRequired, "assets is required")
	case json.Unmarshal(raw["assets"], &items) != nil:
		fail("assets", catType, "assets must be a list of {\"id\": string}")
	case len(items) == 0 || len(items) > MaxShareAssets:
		fail("assets", catLength, "assets has %d items; 1 to %d are allowed", len(items), MaxShareAssets)
	default:
		seen := map[string]bool{}
		for i, it := range items {
			name := "assets[" + strconv.Itoa(i) + "].id"
			var a struct {
				ID *string `json:"id"`
			}
			if json.Unmarshal(it, &a) != nil || a.ID == nil {
				fail(name, catRequired, "%s is required and must be a string", name)
				continue
			}
			if _, ok := assets.byID[*a.ID]; !ok {
				fail(name, catReference, "unknown asset %q", *a.ID)
				continue
			}
			if seen[*a.ID] {
				fail(name, catDuplicate, "asset %q is listed twice", *a.ID)
				continue
			}
			seen[*a.ID] = true
			sh.Assets = append(sh.Assets, ref{*a.ID})
		}
	}
	sh.Origin = text("origin", MaxShareOrigin)
	if present("isDownloadAllowed") && json.Unmarshal(raw["isDownloadAllowed"], &sh.IsDownloadAllowed) != nil {
		fail("isDownloadAllowed", catType, "isDownloadAllowed must be true or false")
	}
	if present("expiresAt") {
		var v string
		if json.Unmarshal(raw["expiresAt"], &v) != nil {
			fail("expiresAt", catType, "expiresAt must be a string")
		} else if t, err := time.Parse("2006-01-02T15:04:05.000Z", v); err != nil || !expiresAtRE.MatchString(v) {
			fail("expiresAt", catFormat, "expiresAt must be YYYY-MM-DDTHH:MM:SS.sssZ, got %q", v)
		} else if !t.After(now) {
			fail("expiresAt", catValue, "expiresAt %s is not after the tenant's clock %s", v, isoMillis(now))
		} else {
			sh.ExpiresAt, sh.expires = &v, t.Unix()
		}
	}
	sh.Theme = ref{themeID(s.cfg.seed, 0)}
	if present("theme") {
		var t struct {
			ID *string `json:"id"`
		}
		if json.Unmarshal(raw["theme"], &t) != nil || t.ID == nil {
			fail("theme.id", catRequired, "theme must be {\"id\": string}")
		} else if s.themeIndex(*t.ID) < 0 {
			fail("theme.id", catReference, "unknown theme %q", *t.ID)
		} else {
			sh.Theme = ref{*t.ID}
		}
	}
	if meta != nil {
		return nil, validationProblem(meta)
	}
	return sh, nil
}

func (s *Service) createShare(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyLen+1))
	if err != nil || len(body) > maxBodyLen {
		writeProblem(w, r, newProblem(http.StatusBadRequest, "cannot read the body (at most %d bytes)", maxBodyLen))
		return
	}
	now := s.Now()
	sh, p := s.decodeShare(body, now)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	l := s.live
	l.mu.Lock()
	sh.ID = hexID(s.cfg.seed, "share", l.shareCount)
	l.shareCount++
	l.shares[sh.ID] = sh
	l.mu.Unlock()
	link := requestOrigin(r) + SharePagePath + "/" + sh.ID
	sh.AnonymousURL, sh.UntrackedURL, sh.DynamicURL = link+"?a=1", link+"?u=1", link+"?d=1"
	sh.CreatedAt = isoMillis(now)
	w.Header().Set("Location", V4Path+"/shares/"+sh.ID)
	writeJSONStatus(w, r, http.StatusCreated, sh)

	admin := legacyUsers[0]
	s.emit(EventSharedSpaceCreated, now, map[string]any{
		"share": map[string]any{"id": sh.ID, "title": sh.Title, "assets": sh.Assets},
		"user":  map[string]any{"id": memberID(s.cfg.seed, admin), "name": admin.first + " " + admin.last},
	})
}

// memberID is the 32-hex id of a known user in the v4 and webhook data.
func memberID(seed int64, u *legacyUser) string { return hexID(seed, "member", int(u.uid)) }

// Shares returns the number of shares created so far.
func (s *Service) Shares() int {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return s.live.shareCount
}

// serveSharePage answers the public links of a share: GET or HEAD
// /s/{id}?a=1 (anonymous), ?u=1 (untracked) or ?d=1 (dynamic, which takes
// extra query parameters such as recipient and platform and emits
// content-viewed). No credentials are needed: the links are public.
func (s *Service) serveSharePage(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, SharePagePath+"/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, errMethod(r.Method))
		return
	}
	l := s.live
	l.mu.Lock()
	sh := l.shares[id]
	l.mu.Unlock()
	now := s.Now()
	if sh == nil || (sh.expires != 0 && now.Unix() >= sh.expires) {
		writeError(w, r, errNotFound("no share %q, or it has expired", id))
		return
	}
	q := r.URL.Query()
	access := "direct"
	switch {
	case q.Get("a") == "1":
		access = "anonymous"
	case q.Get("u") == "1":
		access = "untracked"
	case q.Get("d") == "1":
		access = "dynamic"
	}
	params := map[string]string{}
	for k := range q {
		if k != "a" && k != "u" && k != "d" {
			params[k] = q.Get(k)
		}
	}
	writeJSONStatus(w, r, http.StatusOK, map[string]any{
		"id": sh.ID, "title": sh.Title, "assets": sh.Assets, "theme": sh.Theme,
		"isDownloadAllowed": sh.IsDownloadAllowed, "access": access, "parameters": params,
	})
	if access == "dynamic" && r.Method == http.MethodGet {
		s.emit(EventContentViewed, now, map[string]any{
			"share":      map[string]any{"id": sh.ID, "title": sh.Title},
			"recipient":  q.Get("recipient"),
			"platform":   q.Get("platform"),
			"parameters": params,
		})
	}
}
