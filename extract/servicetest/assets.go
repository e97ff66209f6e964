package servicetest

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The resource API v3 (section E): the assets collection.
//
// The interface document names only id and name; a real tenant sends
// dozens of attributes per asset, with nulls, numbers sent as strings,
// dates with offsets, nested link objects and attributes present on some
// items only. The fake sends the same variety (docs/service-shapes.md,
// section E, lists every attribute); WithShapeVariants adds items whose
// attributes change JSON type.

// AssetsPath is the path prefix of the resource API v3.
const AssetsPath = "/api/v3"

// Bounds of the number of assets: about 5 per user, at least MinAssets and
// at most MaxAssets.
const (
	MinAssets = 50
	MaxAssets = 10_000
)

// WithShapeVariants makes about one v3 asset in seven (a fixed subset
// derived from the seed) send some attributes with another JSON type than
// the other items do: tags as a link object {"href", "id"} instead of an
// array, sizeBytes as a non-numeric string ("1.9 MB", "0 B") or a
// fractional number, isDownloadable as "yes" or "no", isArchived as 0 or 1,
// stats as an array of {name, value}, metadata as a string holding its
// JSON text, updatedAt as Unix seconds (a number), owner as the plain id
// string instead of a link. Each such item changes one or more of these;
// every changed value is a non-null JSON value. The order of sort and the
// other items are unchanged. Off by default: then every attribute keeps
// one JSON type across items, apart from null and the numeric strings
// ("2048", "17") that sizeBytes and commentCount are sometimes sent as.
func WithShapeVariants() Option { return func(c *config) { c.shapeVariants = true } }

// asset is one v3 asset. The comments say how a null or an absent
// attribute is held.
type asset struct {
	id, name, typ string
	fileType      string // "": null
	mime          string // "": null
	size          int64  // -1: null
	sizeText      bool   // sizeBytes is sent as a numeric string
	created       int64
	updated       int64
	updatedZone   int   // index into assetZones (0: UTC with Z)
	published     int64 // 0: null
	publishedZone int
	expires       int64 // 0: absent
	review        int64 // days since 1970-01-01; -1: null

	owner, creator string
	updater        string // "": null
	division       string // "": null
	folder         string // "": null (top level)

	tags                     []string
	views, shares, downloads int64
	lastViewed               int64 // Unix milliseconds; 0: null

	source, region string
	priority       int
	approved       bool
	legalRef       string   // "": null
	languages      []int    // indexes into assetLanguages
	groups         []idName // permission groups

	archived, downloadable, shareable, featured bool

	rating       float64 // < 0: null
	ratingCount  int64
	comments     int64
	commentsText bool // commentCount is sent as a numeric string
	version      int
	status       string
	locale       string
	description  string  // "": null
	checksum     string  // "": null
	external     string  // "": absent (links only)
	duration     float64 // < 0: absent (videos only)
	pages        int     // < 0: absent (documents only)
	items        int     // < 0: absent (folders only)

	variants uint8 // shape variants, sent under WithShapeVariants only
}

// Shape variants of an asset (WithShapeVariants).
const (
	variantTags         = 1 << iota // tags: a link object
	variantSize                     // sizeBytes: "1.9 MB", "0 B" or a fractional number
	variantDownloadable             // isDownloadable: "yes" or "no"
	variantStats                    // stats: an array of {name, value}
	variantMetadata                 // metadata: a string holding its JSON text
	variantUpdated                  // updatedAt: Unix seconds
	variantOwner                    // owner: the plain id
	variantArchived                 // isArchived: 0 or 1
)

// assetFields lists the attributes of an asset in the order they are sent.
// expiresAt, externalUrl, durationSeconds, pageCount and itemCount are
// absent from the items that do not carry them.
var assetFields = []string{
	"id", "name", "type", "fileType", "mimeType", "sizeBytes",
	"createdAt", "updatedAt", "publishedAt", "expiresAt", "reviewDate",
	"ownerId", "divisionId", "owner", "createdBy", "updatedBy", "division", "folder",
	"tags", "stats", "metadata", "languages", "permissions",
	"isArchived", "isDownloadable", "isShareable", "isFeatured",
	"rating", "ratingCount", "commentCount", "version", "status", "locale",
	"description", "thumbnailUrl", "downloadUrl", "checksum",
	"externalUrl", "durationSeconds", "pageCount", "itemCount",
}

// assetSortable lists the attributes sort accepts: the scalar attributes
// every item carries. sizeBytes and commentCount sort by their numeric
// value however they are sent.
var assetSortable = []string{"id", "name", "type", "fileType", "mimeType", "sizeBytes",
	"createdAt", "updatedAt", "publishedAt", "reviewDate", "ownerId", "divisionId",
	"rating", "ratingCount", "commentCount", "version", "status", "locale"}

type idName struct{ id, name string }

var (
	assetKinds = []string{"Playbook", "Battlecard", "One-pager", "Pitch Deck", "Case Study", "Datasheet",
		"Training Video", "Pricing Sheet", "Proposal Template", "ROI Calculator"}
	assetExt   = map[string]string{"pdf": ".pdf", "pptx": ".pptx", "docx": ".docx", "mp4": ".mp4"}
	assetTypes = []string{"pdf", "pptx", "docx", "mp4"}
	assetMIME  = map[string]string{"pdf": "application/pdf",
		"pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
		"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"mp4":  "video/mp4"}
	assetTags = []string{"q3-launch", "emea", "enterprise", "competitive", "onboarding", "pricing", "legal-approved"}
	// Names that exercise the encoder.
	assetSpecial = map[int]string{2: `"Give & Get" — Négociation.pdf`, 5: `Deals\Open — Über-Guide.docx`,
		8: "価格表 2026 🚀 Launch Kit.pptx"}
	assetLanguages = []idName{{"en", "English"}, {"de", "Deutsch"}, {"fr", "Français"},
		{"es", "Español"}, {"ja", "日本語"}, {"pt-BR", "Português (Brasil)"}}
	assetGroups = []string{"All Sales", "EMEA Field Team", "Partner Managers",
		`"Tiger Team" (Enterprise)`, "Customer Success", `R&D \ Solutions`}
	assetSources = []string{"upload", "crm-sync", "import", "api"}
	assetRegions = []string{"NA", "EMEA", "APAC", "LATAM"}
	assetLocales = []string{"en-US", "en-GB", "de-DE", "fr-FR", "ja-JP"}
	// assetZones are the offsets dates are written with; zone 0 is UTC
	// written with Z, the last one UTC written +00:00.
	assetZones = []*time.Location{time.UTC, time.FixedZone("", 2*3600), time.FixedZone("", -5*3600),
		time.FixedZone("", 5*3600+1800), time.FixedZone("", 9*3600), time.FixedZone("", -(3*3600 + 1800)),
		time.FixedZone("", 0)}
)

// assetCount returns the number of assets of a tenant with users users.
func assetCount(users int) int { return min(max(MinAssets, 5*users), MaxAssets) }

// divisionID returns the id of division d (0, 1 or 2).
func divisionID(seed int64, d int) string { return hexID(seed, "division", d) }

// Divisions is the number of divisions of the tenant.
const Divisions = 3

// Salts of the asset streams: the original attributes, the added ones and
// the shape variants, so that adding attributes did not change the others.
const (
	saltAsset        = 0xa55e7
	saltAssetMore    = 0xa55e8
	saltAssetVariant = 0x5ba9e
)

func makeAsset(seed int64, users, i int) asset {
	r := newRnd(uint64(seed), saltAsset, i)
	a := asset{id: hexID(seed, "asset", i), size: -1, review: -1, rating: -1, duration: -1, pages: -1, items: -1}
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
	nUsers := max(users, 1)
	a.owner = hexID(seed, "user", r.intn(nUsers))
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

	// The attributes added later draw from their own stream.
	m := newRnd(uint64(seed), saltAssetMore, i)
	switch a.typ {
	case "file":
		a.mime = assetMIME[a.fileType]
		a.sizeText = m.intn(20) == 0 || i%50 == 7 // a few percent, at least one in 50
		a.checksum = hexID(seed, "asset-md5", i)
		a.version = 1 + i/10
		if a.fileType == "mp4" {
			a.duration = float64(50+m.intn(36_000)) / 10
		} else {
			a.pages = 1 + m.intn(120)
		}
	case "link":
		a.mime = "text/html"
		a.external = "https://video.example.com/watch?v=" + hexID(seed, "video", i)[:11] + "&t=30s"
		a.version = 1 + m.intn(3)
	default:
		a.items = m.intn(40)
		a.version = 1
	}
	if m.intn(4) == 0 {
		a.updatedZone = 1 + m.intn(len(assetZones)-1)
	}
	if m.intn(5) > 0 {
		a.published = min(a.created+int64(m.intn(3))*day+int64(m.intn(day)), anchor)
		a.publishedZone = 1 + m.intn(len(assetZones)-1)
	}
	if m.intn(6) == 0 {
		a.expires = max(anchor+int64(m.intn(365)-60)*day+17*3600, a.created+30*day)
	}
	if m.intn(3) > 0 {
		a.review = anchor/day + int64(m.intn(400)) - 100
	}
	a.creator = a.owner
	if m.intn(2) == 0 {
		a.creator = hexID(seed, "user", m.intn(nUsers))
	}
	if m.intn(5) > 0 {
		a.updater = hexID(seed, "user", m.intn(nUsers))
	}
	if m.intn(4) > 0 {
		if j := 10 * m.intn((assetCount(users)+9)/10); j != i {
			a.folder = hexID(seed, "asset", j)
		}
	}
	if m.intn(10) == 0 {
		a.views, a.shares = 0, 0
	}
	a.downloads = int64(m.intn(int(a.views)/4 + 1))
	if a.views > 0 {
		a.lastViewed = max(a.created*1000, anchor*1000-int64(m.intn(90*day*1000)))
	}
	a.source = assetSources[m.intn(len(assetSources))]
	a.region = assetRegions[m.intn(len(assetRegions))]
	a.priority = 1 + m.intn(3)
	a.approved = m.intn(3) > 0
	if m.intn(3) == 0 {
		a.legalRef = "LR-" + strconv.Itoa(1000+m.intn(9000))
	}
	a.languages = []int{}
	if a.typ != "folder" {
		for k := range 1 + m.intn(3) {
			l := 0
			if k > 0 || m.intn(4) == 0 {
				l = m.intn(len(assetLanguages))
			}
			if !slices.Contains(a.languages, l) {
				a.languages = append(a.languages, l)
			}
		}
	}
	a.groups = []idName{}
	seen := 0
	for range m.intn(4) {
		g := m.intn(len(assetGroups))
		if seen&(1<<g) == 0 {
			seen |= 1 << g
			a.groups = append(a.groups, idName{hexID(seed, "group", g), assetGroups[g]})
		}
	}
	a.archived = m.intn(12) == 0
	a.downloadable = a.typ == "file" && m.intn(5) > 0
	a.shareable = m.intn(6) > 0
	a.featured = m.intn(9) == 0
	if m.intn(3) > 0 {
		a.ratingCount = int64(1 + m.intn(60))
		a.rating = float64(2+m.intn(9)) / 2
	}
	a.comments = int64(m.intn(40))
	a.commentsText = m.intn(8) == 0
	switch {
	case a.archived:
		a.status = "archived"
	case a.published == 0:
		a.status = "draft"
	default:
		a.status = "published"
	}
	a.locale = assetLocales[m.intn(len(assetLocales))]
	a.description = assetDescription(&m, topic)

	v := newRnd(uint64(seed), saltAssetVariant, i)
	if v.intn(7) == 0 {
		a.variants = uint8(v.u64())
		if a.variants == 0 {
			a.variants = 1 << (i % 8)
		}
	}
	return a
}

// assetDescription returns a description ("" for null) whose text
// exercises the encoder: quotes, backslashes, non-ASCII, emoji, newlines
// and tabs.
func assetDescription(r *rnd, topic string) string {
	switch r.intn(6) {
	case 0:
		return ""
	case 1:
		return topic + ` — the talk track for "first calls", step by step.`
	case 2:
		return `Master copy on \\fileserver\Sales\` + topic + `\ — do not rename.`
	case 3:
		return "Résumé: " + topic + " für Einsteiger – 見積もりの基本 🚀"
	case 4:
		return topic + ":\n\t1. Why\n\t2. How (see \"FAQ\")"
	default:
		return "Internal only. Owner's notes on " + topic + "."
	}
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

// appendInstant appends the Unix time t as a JSON date-time string in
// assetZones[zone]: with Z for zone 0, with an offset otherwise.
func appendInstant(dst []byte, t int64, zone int) []byte {
	if zone == 0 {
		return appendDate(dst, t)
	}
	dst = append(dst, '"')
	dst = time.Unix(t, 0).In(assetZones[zone]).AppendFormat(dst, "2006-01-02T15:04:05-07:00")
	return append(dst, '"')
}

func appendNullString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, s)
}

func appendBool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// appendLink appends a link object {"href": href, "id": id}.
func appendLink(dst []byte, href, id string) []byte {
	dst = append(dst, `{"href":`...)
	dst = appendJSONString(dst, href)
	dst = append(dst, `,"id":`...)
	dst = appendJSONString(dst, id)
	return append(dst, '}')
}

// appendResourceLink appends a link to the v3 resource collection/id, or
// null when id is empty.
func appendResourceLink(dst []byte, origin, collection, id string) []byte {
	if id == "" {
		return append(dst, "null"...)
	}
	return appendLink(dst, origin+AssetsPath+"/"+collection+"/"+id+".json", id)
}

// humanSize writes n bytes the way a person would ("1.9 MB").
func humanSize(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k:
		return strconv.FormatFloat(float64(n)/(k*k*k), 'f', 1, 64) + " GB"
	case n >= k*k:
		return strconv.FormatFloat(float64(n)/(k*k), 'f', 1, 64) + " MB"
	case n >= k:
		return strconv.FormatFloat(float64(n)/k, 'f', 1, 64) + " KB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// appendMetadata appends the metadata object of a.
func (a *asset) appendMetadata(dst []byte) []byte {
	dst = append(dst, `{"source":`...)
	dst = appendJSONString(dst, a.source)
	dst = append(dst, `,"custom":{"region":`...)
	dst = appendJSONString(dst, a.region)
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendInt(dst, int64(a.priority), 10)
	dst = append(dst, `,"approved":`...)
	dst = appendBool(dst, a.approved)
	dst = append(dst, `,"legalRef":`...)
	dst = appendNullString(dst, a.legalRef)
	return append(dst, "}}"...)
}

func appendLastViewed(dst []byte, ms int64) []byte {
	if ms == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
	return append(dst, '"')
}

// appendValue appends the attribute f of a as JSON, with the shape
// variants of a when variants is set; origin is the tenant's origin, for
// links. It reports false, having appended nothing, when a does not carry
// f.
func (a *asset) appendValue(dst []byte, f, origin string, variants bool) ([]byte, bool) {
	var vr uint8
	if variants {
		vr = a.variants
	}
	switch f {
	case "id":
		return appendJSONString(dst, a.id), true
	case "name":
		return appendJSONString(dst, a.name), true
	case "type":
		return appendJSONString(dst, a.typ), true
	case "fileType":
		return appendNullString(dst, a.fileType), true
	case "mimeType":
		return appendNullString(dst, a.mime), true
	case "sizeBytes":
		switch {
		case vr&variantSize != 0 && a.size < 0:
			return appendJSONString(dst, "0 B"), true
		case vr&variantSize != 0 && a.size%3 == 0:
			return strconv.AppendFloat(dst, float64(a.size)+0.5, 'f', -1, 64), true
		case vr&variantSize != 0:
			return appendJSONString(dst, humanSize(a.size)), true
		case a.size < 0:
			return append(dst, "null"...), true
		case a.sizeText:
			return append(strconv.AppendInt(append(dst, '"'), a.size, 10), '"'), true
		}
		return strconv.AppendInt(dst, a.size, 10), true
	case "createdAt":
		return appendDate(dst, a.created), true
	case "updatedAt":
		if vr&variantUpdated != 0 {
			return strconv.AppendInt(dst, a.updated, 10), true
		}
		return appendInstant(dst, a.updated, a.updatedZone), true
	case "publishedAt":
		if a.published == 0 {
			return append(dst, "null"...), true
		}
		return appendInstant(dst, a.published, a.publishedZone), true
	case "expiresAt":
		if a.expires == 0 {
			return dst, false
		}
		return appendDate(dst, a.expires), true
	case "reviewDate":
		if a.review < 0 {
			return append(dst, "null"...), true
		}
		dst = append(dst, '"')
		dst = time.Unix(a.review*day, 0).UTC().AppendFormat(dst, "2006-01-02")
		return append(dst, '"'), true
	case "ownerId":
		return appendJSONString(dst, a.owner), true
	case "divisionId":
		return appendNullString(dst, a.division), true
	case "owner":
		if vr&variantOwner != 0 {
			return appendJSONString(dst, a.owner), true
		}
		return appendResourceLink(dst, origin, "users", a.owner), true
	case "createdBy":
		return appendResourceLink(dst, origin, "users", a.creator), true
	case "updatedBy":
		return appendResourceLink(dst, origin, "users", a.updater), true
	case "division":
		return appendResourceLink(dst, origin, "divisions", a.division), true
	case "folder":
		return appendResourceLink(dst, origin, "assets", a.folder), true
	case "tags":
		if vr&variantTags != 0 {
			return appendLink(dst, origin+AssetsPath+"/assets/"+a.id+"/tags.json", a.id), true
		}
		dst = append(dst, '[')
		for k, t := range a.tags {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, t)
		}
		return append(dst, ']'), true
	case "stats":
		if vr&variantStats != 0 {
			dst = append(dst, `[{"name":"views","value":`...)
			dst = strconv.AppendInt(dst, a.views, 10)
			dst = append(dst, `},{"name":"shares","value":`...)
			dst = strconv.AppendInt(dst, a.shares, 10)
			dst = append(dst, `},{"name":"downloads","value":`...)
			dst = strconv.AppendInt(dst, a.downloads, 10)
			if a.lastViewed != 0 {
				dst = append(dst, `},{"name":"lastViewedAt","value":`...)
				dst = appendLastViewed(dst, a.lastViewed)
			}
			return append(dst, "}]"...), true
		}
		dst = append(dst, `{"views":`...)
		dst = strconv.AppendInt(dst, a.views, 10)
		dst = append(dst, `,"shares":`...)
		dst = strconv.AppendInt(dst, a.shares, 10)
		dst = append(dst, `,"downloads":`...)
		dst = strconv.AppendInt(dst, a.downloads, 10)
		dst = append(dst, `,"lastViewedAt":`...)
		dst = appendLastViewed(dst, a.lastViewed)
		return append(dst, '}'), true
	case "metadata":
		if vr&variantMetadata != 0 {
			return appendJSONString(dst, string(a.appendMetadata(nil))), true
		}
		return a.appendMetadata(dst), true
	case "languages":
		dst = append(dst, '[')
		for k, l := range a.languages {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendJSONString(dst, assetLanguages[l].id)
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, assetLanguages[l].name)
			dst = append(dst, '}')
		}
		return append(dst, ']'), true
	case "permissions":
		dst = append(dst, '[')
		for k, g := range a.groups {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendJSONString(dst, g.id)
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, g.name)
			dst = append(dst, '}')
		}
		return append(dst, ']'), true
	case "isArchived":
		if vr&variantArchived != 0 {
			if a.archived {
				return append(dst, '1'), true
			}
			return append(dst, '0'), true
		}
		return appendBool(dst, a.archived), true
	case "isDownloadable":
		if vr&variantDownloadable != 0 {
			if a.downloadable {
				return appendJSONString(dst, "yes"), true
			}
			return appendJSONString(dst, "no"), true
		}
		return appendBool(dst, a.downloadable), true
	case "isShareable":
		return appendBool(dst, a.shareable), true
	case "isFeatured":
		return appendBool(dst, a.featured), true
	case "rating":
		if a.rating < 0 {
			return append(dst, "null"...), true
		}
		return strconv.AppendFloat(dst, a.rating, 'f', -1, 64), true
	case "ratingCount":
		return strconv.AppendInt(dst, a.ratingCount, 10), true
	case "commentCount":
		if a.commentsText {
			return append(strconv.AppendInt(append(dst, '"'), a.comments, 10), '"'), true
		}
		return strconv.AppendInt(dst, a.comments, 10), true
	case "version":
		return strconv.AppendInt(dst, int64(a.version), 10), true
	case "status":
		return appendJSONString(dst, a.status), true
	case "locale":
		return appendJSONString(dst, a.locale), true
	case "description":
		return appendNullString(dst, a.description), true
	case "thumbnailUrl":
		if a.typ == "folder" {
			return append(dst, "null"...), true
		}
		return appendJSONString(dst, origin+"/static/assets/"+a.id+"/thumb.png"), true
	case "downloadUrl":
		if !a.downloadable {
			return append(dst, "null"...), true
		}
		return appendJSONString(dst, origin+AssetsPath+"/assets/"+a.id+"/download"), true
	case "checksum":
		return appendNullString(dst, a.checksum), true
	case "externalUrl":
		if a.external == "" {
			return dst, false
		}
		return appendJSONString(dst, a.external), true
	case "durationSeconds":
		if a.duration < 0 {
			return dst, false
		}
		return strconv.AppendFloat(dst, a.duration, 'f', -1, 64), true
	case "pageCount":
		if a.pages < 0 {
			return dst, false
		}
		return strconv.AppendInt(dst, int64(a.pages), 10), true
	case "itemCount":
		if a.items < 0 {
			return dst, false
		}
		return strconv.AppendInt(dst, int64(a.items), 10), true
	}
	return dst, false
}

// appendAsset appends a as a JSON object with the attributes fields (those
// a carries), with its shape variants when variants is set.
func appendAsset(dst []byte, a *asset, fields []string, origin string, variants bool) []byte {
	dst = append(dst, '{')
	n := 0
	for _, f := range fields {
		mark := len(dst)
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, f), ':')
		var ok bool
		if dst, ok = a.appendValue(dst, f, origin, variants); !ok {
			dst = dst[:mark]
			continue
		}
		n++
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
	case "mimeType":
		nullA, nullB = a.mime == "", b.mime == ""
		c = strings.Compare(a.mime, b.mime)
	case "sizeBytes":
		nullA, nullB = a.size < 0, b.size < 0
		c = cmp.Compare(a.size, b.size)
	case "createdAt":
		c = cmp.Compare(a.created, b.created)
	case "updatedAt":
		c = cmp.Compare(a.updated, b.updated)
	case "publishedAt":
		nullA, nullB = a.published == 0, b.published == 0
		c = cmp.Compare(a.published, b.published)
	case "reviewDate":
		nullA, nullB = a.review < 0, b.review < 0
		c = cmp.Compare(a.review, b.review)
	case "ownerId":
		c = strings.Compare(a.owner, b.owner)
	case "divisionId":
		nullA, nullB = a.division == "", b.division == ""
		c = strings.Compare(a.division, b.division)
	case "rating":
		nullA, nullB = a.rating < 0, b.rating < 0
		c = cmp.Compare(a.rating, b.rating)
	case "ratingCount":
		c = cmp.Compare(a.ratingCount, b.ratingCount)
	case "commentCount":
		c = cmp.Compare(a.comments, b.comments)
	case "version":
		c = cmp.Compare(a.version, b.version)
	case "status":
		c = strings.Compare(a.status, b.status)
	case "locale":
		c = strings.Compare(a.locale, b.locale)
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
	origin := requestOrigin(r)
	if one {
		i, ok := st.byID[id]
		if !ok {
			writeError(w, r, errNotFound("unknown asset %q", id))
			return
		}
		b := append([]byte(`{"response":`), appendAsset(nil, &st.items[i], fields, origin, s.cfg.shapeVariants)...)
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
		b = appendAsset(b, &st.items[i], fields, origin, s.cfg.shapeVariants)
	}
	writeBody(w, r, append(b, "]}}"...))
}
