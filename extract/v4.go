package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Ref is a reference to another resource by id.
type Ref struct {
	ID string `json:"id"`
}

// ShareRequest is the body of a share creation (POST {v4}/shares).
type ShareRequest struct {
	Title  string   // required, at most 200 characters
	Assets []string // asset ids, 1 to 300
	Origin string   // required, at most 20 characters (e.g. "sepipe")
	// DownloadAllowed nil leaves the service's default (true).
	DownloadAllowed *bool
	// ExpiresAt zero means no expiry; sent with milliseconds, in UTC.
	ExpiresAt time.Time
	// ThemeID "" means the global theme.
	ThemeID string
}

// Validate checks the limits the service documents, before sending.
func (r ShareRequest) Validate() error {
	var errs []error
	if n := utf8.RuneCountInString(r.Title); n == 0 || n > 200 {
		errs = append(errs, fmt.Errorf("title: want 1 to 200 characters, got %d", n))
	}
	if n := len(r.Assets); n == 0 || n > 300 {
		errs = append(errs, fmt.Errorf("assets: want 1 to 300, got %d", n))
	}
	for i, a := range r.Assets {
		if a == "" {
			errs = append(errs, fmt.Errorf("assets[%d]: empty id", i))
		}
	}
	if n := utf8.RuneCountInString(r.Origin); n == 0 || n > 20 {
		errs = append(errs, fmt.Errorf("origin: want 1 to 20 characters, got %d", n))
	}
	if len(errs) > 0 {
		return fmt.Errorf("extract: share request: %w", errors.Join(errs...))
	}
	return nil
}

// shareTime is the share date-time format: milliseconds and Z.
const shareTime = "2006-01-02T15:04:05.000Z"

func (r ShareRequest) body() ([]byte, error) {
	w := struct {
		Title             string  `json:"title"`
		Assets            []Ref   `json:"assets"`
		Origin            string  `json:"origin"`
		IsDownloadAllowed *bool   `json:"isDownloadAllowed,omitempty"`
		ExpiresAt         *string `json:"expiresAt,omitempty"`
		Theme             *Ref    `json:"theme,omitempty"`
	}{Title: r.Title, Origin: r.Origin, IsDownloadAllowed: r.DownloadAllowed}
	for _, a := range r.Assets {
		w.Assets = append(w.Assets, Ref{ID: a})
	}
	if !r.ExpiresAt.IsZero() {
		s := r.ExpiresAt.UTC().Format(shareTime)
		w.ExpiresAt = &s
	}
	if r.ThemeID != "" {
		w.Theme = &Ref{ID: r.ThemeID}
	}
	return json.Marshal(w)
}

// Share is a created share. Fields the struct does not type are kept in
// Extra.
type Share struct {
	ID                string          `json:"id"`
	Title             string          `json:"title"`
	Assets            []Ref           `json:"assets"`
	Origin            string          `json:"origin"`
	IsDownloadAllowed bool            `json:"isDownloadAllowed"`
	ExpiresAt         *time.Time      `json:"expiresAt"`
	Theme             *Ref            `json:"theme"`
	AnonymousURL      string          `json:"anonymousUrl"`
	UntrackedURL      string          `json:"untrackedUrl"`
	DynamicURL        string          `json:"dynamicUrl"`
	CreatedAt         time.Time       `json:"createdAt"`
	Extra             json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
// expiresAt and createdAt are read in any ISO 8601 form (see times.go); one
// in no form read leaves ExpiresAt nil, CreatedAt zero.
func (s *Share) UnmarshalJSON(b []byte) error {
	type plain Share
	return unmarshalTimes(b, (*plain)(s), &s.Extra,
		timeField{name: "expiresAt", opt: &s.ExpiresAt}, timeField{name: "createdAt", t: &s.CreatedAt})
}

// CreateShare creates a share of assets (POST {v4}/shares). It is never
// retried once it may have reached the service (there is no idempotency
// key and no endpoint to read shares back): such a failure is an
// *UncertainError whose Sent says whether the share may exist.
func (c *Client) CreateShare(ctx context.Context, r ShareRequest) (*Share, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	info := reqInfo{iface: IfaceV4, op: "create share", method: http.MethodPost, body: body,
		contentType: "application/json", cred: credAccess}
	var s Share
	if err := c.getJSON(ctx, info, under(c.v4, "shares"), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Theme is a sharing theme. Top-level fields the struct does not type
// (e.g. ones added later) are kept in Extra.
type Theme struct {
	ID            string          `json:"id"`
	Title         string          `json:"title"`
	IsGlobal      bool            `json:"isGlobal"`
	IsDefault     bool            `json:"isDefault"`
	DisplayData   ThemeDisplay    `json:"displayData"`
	ColorSettings ThemeColors     `json:"colorSettings"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	Division      *Ref            `json:"division"`    // nil for the global theme
	Experiences   []Ref           `json:"experiences"` // on GET /themes/{id}
	Extra         json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
// createdAt and updatedAt are read in any ISO 8601 form (see times.go); one
// in no form read is left zero, the theme kept.
func (t *Theme) UnmarshalJSON(b []byte) error {
	type plain Theme
	return unmarshalTimes(b, (*plain)(t), &t.Extra,
		timeField{name: "createdAt", t: &t.CreatedAt}, timeField{name: "updatedAt", t: &t.UpdatedAt})
}

// ThemeDisplay is a theme's displayData.
type ThemeDisplay struct {
	AboutDescription string `json:"aboutDescription"`
	Logo             *Image `json:"logo"`
	DisplayImage     *Image `json:"displayImage"`
}

// Image is an image by URL.
type Image struct {
	URL string `json:"url"`
}

// ThemeColors are six hex digits each, without '#'.
type ThemeColors struct {
	HeaderColor     string `json:"headerColor"`
	HeaderFontColor string `json:"headerFontColor"`
	AccentColor     string `json:"accentColor"`
	AccentFontColor string `json:"accentFontColor"`
}

// ThemeQuery filters and pages the theme list. Zero values are not sent.
type ThemeQuery struct {
	DivisionID    string
	IncludeGlobal *bool
	IsDefault     *bool
	Title         string // contains
	// Sort: title, -title, createdAt, -createdAt, updatedAt, -updatedAt
	// (service default -createdAt).
	Sort string
	// Limit is the page size (0: the client's page size, at most 1000).
	Limit int
}

// Themes reads every theme matching q (GET {v4}/themes), paging by offset
// with the integrity rules and healing of ReadList.
func (c *Client) Themes(ctx context.Context, q ThemeQuery) ([]Theme, error) {
	switch q.Sort {
	case "", "title", "-title", "createdAt", "-createdAt", "updatedAt", "-updatedAt":
	default:
		return nil, fmt.Errorf("extract: themes: sort %q: want title, createdAt or updatedAt, optionally with a leading -", q.Sort)
	}
	if q.Limit < 0 || q.Limit > maxCollectionLimit {
		return nil, fmt.Errorf("extract: themes: limit %d: want 0..%d", q.Limit, maxCollectionLimit)
	}
	v := url.Values{}
	if q.DivisionID != "" {
		v.Set("divisionId", q.DivisionID)
	}
	if q.IncludeGlobal != nil {
		v.Set("includeGlobal", strconv.FormatBool(*q.IncludeGlobal))
	}
	if q.IsDefault != nil {
		v.Set("isDefault", strconv.FormatBool(*q.IsDefault))
	}
	if q.Title != "" {
		v.Set("title", q.Title)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	p, err := c.listPager(ThemeList(), CollectionQuery{Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	p.params = v
	out, _, err := collectAll[Theme](ctx, p, decodeCountItems)
	return out, err
}

// GetTheme reads one theme (GET {v4}/themes/{id}).
func (c *Client) GetTheme(ctx context.Context, id string) (*Theme, error) {
	info := reqInfo{iface: IfaceV4, op: "get theme", object: id, cred: credAccess}
	if err := checkSegment(id); err != nil {
		return nil, fmt.Errorf("%s: id: %w", info, err)
	}
	var t Theme
	if err := c.getJSON(ctx, info, under(c.v4, "themes", id), &t); err != nil {
		return nil, err
	}
	return &t, nil
}
