package servicetest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The resource API v3 (section E): the assets collection.

// AssetsPath is the path prefix of the resource API v3.
const AssetsPath = "/api/v3"

// Bounds of the number of assets: about 5 per user, at least MinAssets and
// at most MaxAssets.
const (
	MinAssets = 50
	MaxAssets = 10_000
)

// asset is one v3 asset. Null strings are empty, null sizes are -1.
type asset struct {
	id, name, typ, fileType string
	size                    int64
	created, updated        int64
	owner, division         string
	tags                    []string
	views, shares           int64
}

// assetFields lists the attributes of an asset in the order they are sent.
var assetFields = []string{"id", "name", "type", "fileType", "sizeBytes", "createdAt", "updatedAt",
	"ownerId", "divisionId", "tags", "stats"}

// assetSortable lists the attributes sort accepts.
var assetSortable = []string{"id", "name", "type", "fileType", "sizeBytes", "createdAt", "updatedAt",
	"ownerId", "divisionId"}

var (
	assetKinds = []string{"Playbook", "Battlecard", "One-pager", "Pitch Deck", "Case Study", "Datasheet",
		"Training Video", "Pricing Sheet", "Proposal Template", "ROI Calculator"}
	assetExt   = map[string]string{"pdf": ".pdf", "pptx": ".pptx", "docx": ".docx", "mp4": ".mp4"}
	assetTypes = []string{"pdf", "pptx", "docx", "mp4"}
	assetTags  = []string{"q3-launch", "emea", "enterprise", "competitive", "onboarding", "pricing", "legal-approved"}
	// Names that exercise the encoder.
	assetSpecial = map[int]string{2: `"Give & Get" — Négociation.pdf`, 5: `Deals\Open — Über-Guide.docx`}
)

// assetCount returns the number of assets of a tenant with users users.
func assetCount(users int) int { return min(max(MinAssets, 5*users), MaxAssets) }

// divisionID returns the id of division d (0, 1 or 2).
func divisionID(seed int64, d int) string { return hexID(seed, "division", d) }

// Divisions is the number of divisions of the tenant.
const Divisions = 3

func makeAsset(seed int64, users, i int) asset {
	r := newRnd(uint64(seed), 0xa55e7, i)
	a := asset{id: hexID(seed, "asset", i), size: -1}
	topic := courseTopics[r.intn(len(courseTopics))]
	switch i % 10 {
	case 0:
		a.typ, a.name = "folder", topic
	case 1:
		a.typ, a.name = "link", topic+" — Webinar Recording"
	default:
		a.typ = "file"
		a.fileType = assetTypes[r.intn(len(assetTypes))]
		a.name = topic + " " + assetKinds[r.intn(len(assetKinds))] + " v" + strconv.Itoa(1+i/10) + assetExt[a.fileType]
		a.size = int64(10_000 + r.intn(200_000_000))
	}
	if s, ok := assetSpecial[i]; ok && a.typ == "file" {
		a.name = s
	}
	a.created = anchor - int64(r.intn(720))*day - int64(r.intn(day))
	a.updated = a.created + int64(r.intn(60))*day + int64(r.intn(day))
	a.updated = min(a.updated, anchor)
	a.owner = hexID(seed, "user", r.intn(max(users, 1)))
	if d := r.intn(Divisions + 2); d < Divisions {
		a.division = divisionID(seed, d)
	}
	a.tags = []string{}
	for range r.intn(4) {
		t := assetTags[r.intn(len(assetTags))]
		if !slices.Contains(a.tags, t) {
			a.tags = append(a.tags, t)
		}
	}
	a.views = int64(r.intn(5000))
	a.shares = int64(r.intn(200))
	return a
}

// assetStore holds the tenant's assets, built on first use.
type assetStore struct {
	once  sync.Once
	items []asset
	byID  map[string]int
	mu    sync.Mutex
	sorts map[string][]int // order of items per sort parameter
}

func (s *Service) assetList() *assetStore {
	st := &s.live.assets
	st.once.Do(func() {
		n := assetCount(s.cfg.users)
		st.items = make([]asset, n)
		st.byID = make(map[string]int, n)
		for i := range st.items {
			st.items[i] = makeAsset(s.cfg.seed, s.cfg.users, i)
			st.byID[st.items[i].id] = i
		}
		st.sorts = map[string][]int{}
	})
	return st
}

// value returns the attribute f of a as JSON.
func (a *asset) value(f string) []byte {
	var v any
	switch f {
	case "id":
		v = a.id
	case "name":
		v = a.name
	case "type":
		v = a.typ
	case "fileType":
		if a.fileType != "" {
			v = a.fileType
		}
	case "sizeBytes":
		if a.size >= 0 {
			v = a.size
		}
	case "createdAt":
		v = isoSeconds(time.Unix(a.created, 0))
	case "updatedAt":
		v = isoSeconds(time.Unix(a.updated, 0))
	case "ownerId":
		v = a.owner
	case "divisionId":
		if a.division != "" {
			v = a.division
		}
	case "tags":
		v = a.tags
	case "stats":
		v = struct {
			Views  int64 `json:"views"`
			Shares int64 `json:"shares"`
		}{a.views, a.shares}
	}
	b, _ := json.Marshal(v)
	return b
}

// appendAsset appends a as a JSON object with the attributes fields.
func appendAsset(dst []byte, a *asset, fields []string) []byte {
	dst = append(dst, '{')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, f), ':')
		dst = append(dst, a.value(f)...)
	}
	return append(dst, '}')
}

// compareAssets orders by the sort attribute f, nulls last, then by id.
func compareAssets(a, b *asset, f string, desc bool) int {
	var c int
	nullA, nullB := false, false
	switch f {
	case "id":
		c = strings.Compare(a.id, b.id)
	case "name":
		c = strings.Compare(a.name, b.name)
	case "type":
		c = strings.Compare(a.typ, b.typ)
	case "fileType":
		nullA, nullB = a.fileType == "", b.fileType == ""
		c = strings.Compare(a.fileType, b.fileType)
	case "sizeBytes":
		nullA, nullB = a.size < 0, b.size < 0
		c = cmp.Compare(a.size, b.size)
	case "createdAt":
		c = cmp.Compare(a.created, b.created)
	case "updatedAt":
		c = cmp.Compare(a.updated, b.updated)
	case "ownerId":
		c = strings.Compare(a.owner, b.owner)
	case "divisionId":
		nullA, nullB = a.division == "", b.division == ""
		c = strings.Compare(a.division, b.division)
	}
	switch {
	case nullA && nullB:
		c = 0
	case nullA:
		return 1
	case nullB:
		return -1
	}
	if desc {
		c = -c
	}
	if c == 0 {
		c = strings.Compare(a.id, b.id)
	}
	return c
}

func (st *assetStore) sorted(sortParam string) []int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if o, ok := st.sorts[sortParam]; ok {
		return o
	}
	f, desc := strings.CutPrefix(sortParam, "-")
	o := make([]int, len(st.items))
	for i := range o {
		o[i] = i
	}
	slices.SortStableFunc(o, func(x, y int) int { return compareAssets(&st.items[x], &st.items[y], f, desc) })
	st.sorts[sortParam] = o
	return o
}

// authorizeResource checks the bearer access token of a v3 or v4 request.
// The limited token (a tenant or user without the Coach licence) reads v3
// and v4 like the full one: only Coach reporting refuses it.
func (s *Service) authorizeResource(r *http.Request) *apiError {
	if bearerToken(r) == s.cfg.limitedToken && s.cfg.limitedToken != "" {
		return nil
	}
	return s.authorize(r)
}

func (s *Service) serveAssets(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, AssetsPath)
	id, one := "", false
	switch {
	case rest == "/assets.json":
	case strings.HasPrefix(rest, "/assets/") && strings.HasSuffix(rest, ".json") &&
		len(rest) > len("/assets/.json") && !strings.Contains(rest[len("/assets/"):], "/"):
		id, one = strings.TrimSuffix(rest[len("/assets/"):], ".json"), true
	default:
		writeError(w, r, errNotFound("no resource at path %q", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, errMethod(r.Method))
		return
	}
	if err := s.authorizeResource(r); err != nil {
		writeError(w, r, err)
		return
	}
	allowed := []string{"limit", "offset", "fields", "sort"}
	if one {
		allowed = []string{"fields"}
	}
	get, qerr := singleQuery(r, allowed...)
	if qerr != nil {
		writeError(w, r, errUnexpected("%v", qerr))
		return
	}
	fields := assetFields
	if v, ok := get("fields"); ok && strings.TrimSpace(v) != "" {
		fields = nil
		for f := range strings.SplitSeq(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if !slices.Contains(assetFields, f) {
				writeError(w, r, errInvalid("unknown attribute %q in fields (attributes: %s)", f, strings.Join(assetFields, ", ")))
				return
			}
			if slices.Contains(fields, f) {
				writeError(w, r, errInvalid("attribute %q is repeated in fields", f))
				return
			}
			fields = append(fields, f)
		}
	}
	st := s.assetList()
	if one {
		i, ok := st.byID[id]
		if !ok {
			writeError(w, r, errNotFound("unknown asset %q", id))
			return
		}
		b := append([]byte(`{"response":`), appendAsset(nil, &st.items[i], fields)...)
		writeBody(w, r, append(b, '}'))
		return
	}
	limit, offset, _, perr := pageParams(get)
	if perr != nil {
		writeError(w, r, errInvalid("%v", perr))
		return
	}
	sortParam := "createdAt"
	if v, ok := get("sort"); ok {
		if f := strings.TrimPrefix(v, "-"); !slices.Contains(assetSortable, f) {
			writeError(w, r, errInvalid("cannot sort by %q (sortable: %s, with - for descending)", v, strings.Join(assetSortable, ", ")))
			return
		}
		sortParam = v
	}
	order := st.sorted(sortParam)
	lo, hi := window(len(order), limit, offset)
	b := append([]byte(`{"meta":{"count":`), strconv.Itoa(len(order))...)
	b = append(b, `},"response":{"items":[`...)
	for k, i := range order[lo:hi] {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendAsset(b, &st.items[i], fields)
	}
	writeBody(w, r, append(b, "]}}"...))
}
