package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// v3Path is the resource API base below the tenant URL.
const v3Path = "/api/v3"

// maxCollectionLimit is the largest page the offset-paged collections
// (v3, v4 themes, webhooks) accept.
const maxCollectionLimit = 1000

// CollectionQuery selects and pages a v3 collection.
type CollectionQuery struct {
	// Limit is the page size; 0 means the client's page size (at most
	// 1000).
	Limit int
	// Fields are the attribute names to return (the `fields` parameter);
	// empty means all.
	Fields []string
	// Sort is an attribute name, or -name for descending; empty means the
	// service's order.
	Sort string
	// KeyFields name the attributes that identify an item; an item read
	// twice is an integrity failure. Empty means "id", checked on the items
	// that carry it.
	KeyFields []string
}

// CollectionPage is one page of a collection, or a restart signal.
type CollectionPage struct {
	Collection string
	Offset     int   // offset asked for
	Total      int64 // count the service reported; -1 if absent
	// Items are the raw JSON items, valid during the call only.
	Items []json.RawMessage
	Read  int // 1 for the first read, 2 after the first restart, ...
	// Restart: the read starts over from offset 0; discard every item
	// handed over earlier in this call. Items is empty.
	Restart bool
}

// CollectionFunc handles one page of a collection. Pages come one at a
// time, in offset order. An error stops the read. When the read fails,
// discard every item received in the call.
type CollectionFunc func(ctx context.Context, p *CollectionPage) error

// ReadCollection reads every item of the v3 collection name (GET
// {tenant}/api/v3/{name}.json, e.g. "assets") by offset, q.Limit items a
// page, and hands each page to fn.
//
// The pages are reconciled against meta.count: the count must not change
// during the read, every page must hold min(limit, count-offset) items,
// no item key may repeat and no page may repeat the previous one byte for
// byte (a repeated page is fetched again, twice at most, before it counts
// as a failure). The read ends only on two agreeing signals: the items
// reach the count and the last page is short, or, when the last page is
// full, one more page at the end is empty. When the count is absent, the
// read ends at a short page followed by an empty one. A mismatch is
// healed by reading again from offset 0 (WithHealing times; fn gets a
// Restart page) and is then an *IntegrityError.
func (c *Client) ReadCollection(ctx context.Context, name string, q CollectionQuery, fn CollectionFunc) (ReadStats, error) {
	if fn == nil {
		return ReadStats{}, errors.New("extract: ReadCollection: nil CollectionFunc")
	}
	p, err := c.v3Pager(name, q)
	if err != nil {
		return ReadStats{}, err
	}
	p.fn = fn
	return p.run(ctx)
}

func (c *Client) v3Pager(name string, q CollectionQuery) (*pager, error) {
	if name == "" || strings.ContainsAny(name, "/?#\x00") {
		return nil, fmt.Errorf("extract: ReadCollection: bad collection name %q", name)
	}
	if q.Limit < 0 || q.Limit > maxCollectionLimit {
		return nil, fmt.Errorf("extract: ReadCollection %q: limit %d: want 0..%d", name, q.Limit, maxCollectionLimit)
	}
	base := *c.base
	base.Path += v3Path
	u := under(&base, name+"\x00.json")
	extra := url.Values{}
	if len(q.Fields) > 0 {
		extra.Set("fields", strings.Join(q.Fields, ","))
	}
	if q.Sort != "" {
		extra.Set("sort", q.Sort)
	}
	return &pager{
		c: c, name: name, limit: c.collectionLimit(q.Limit), keyFields: q.KeyFields,
		info:   reqInfo{iface: IfaceV3, op: "list " + name, cred: credAccess},
		u:      u,
		params: extra,
		decode: decodeV3List,
	}, nil
}

func (c *Client) collectionLimit(limit int) int {
	if limit > 0 {
		return limit
	}
	return min(c.pageSize, maxCollectionLimit)
}

// decodeV3List reads {"meta":{"count"},"response":{"items":[...]}}.
func decodeV3List(body []byte) (int64, []json.RawMessage, error) {
	var v struct {
		Meta *struct {
			Count *int64 `json:"count"`
		} `json:"meta"`
		Response *struct {
			Items *[]json.RawMessage `json:"items"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, nil, err
	}
	if v.Response == nil || v.Response.Items == nil {
		return 0, nil, errors.New(`no "response.items" list`)
	}
	total := int64(-1)
	if v.Meta != nil && v.Meta.Count != nil {
		total = *v.Meta.Count
	}
	return total, *v.Response.Items, nil
}

// decodeCountItems reads the v4 and webhook list shape {"count","items"}.
func decodeCountItems(body []byte) (int64, []json.RawMessage, error) {
	var v struct {
		Count *int64             `json:"count"`
		Items *[]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, nil, err
	}
	if v.Items == nil {
		return 0, nil, errors.New(`no "items" list`)
	}
	total := int64(-1)
	if v.Count != nil {
		total = *v.Count
	}
	return total, *v.Items, nil
}

// pager reads an offset-paged collection with the integrity rules of
// ReadCollection.
type pager struct {
	c         *Client
	name      string
	info      reqInfo
	u         *url.URL
	params    url.Values // besides limit and offset
	limit     int
	keyFields []string
	decode    func([]byte) (int64, []json.RawMessage, error)
	fn        CollectionFunc

	seed  maphash.Seed
	stats ReadStats
	quota *quotaReservation // the request quota set aside for the pages left
}

// repeatRefetches: a page equal to the previous one is fetched again this
// many times before it counts as an integrity failure (public clients of
// the v3 API have seen repeated pages).
const repeatRefetches = 2

func (p *pager) run(ctx context.Context) (ReadStats, error) {
	p.seed = maphash.MakeSeed()
	for read := 1; ; read++ {
		err := p.readOnce(ctx, read)
		p.c.budget.releaseQuota(p.quota)
		p.quota = nil
		ie, ok := err.(*IntegrityError)
		if !ok {
			return p.stats, err
		}
		ie.Reads = read
		if read > p.c.heal {
			return p.stats, ie
		}
		p.c.log.WarnContext(ctx, "pages did not add up; reading the collection again from the start",
			"collection", p.name, "read", read, "cause", ie.Detail)
		if err := p.fn(ctx, &CollectionPage{Collection: p.name, Total: -1, Read: read + 1, Restart: true}); err != nil {
			return p.stats, fmt.Errorf("extract: %s: %w", p.name, err)
		}
		p.stats.Restarts++
	}
}

// reserve sets the request quota aside for the pages left, or fails the
// read before it spends more (see reader.reserve).
func (p *pager) reserve(pages int) error {
	res, ok, free, reset := p.c.budget.reserveQuota(pages)
	p.quota = res
	if ok {
		return nil
	}
	if wait := max(reset.Sub(p.c.now()), 0); wait > p.c.maxWait {
		return fmt.Errorf("extract: %s: %w: %d more pages to read, %d requests left until the window resets at %s (in %s)",
			p.name, ErrQuotaExhausted, pages, free, reset.UTC().Format(time.RFC3339), wait.Round(time.Second))
	}
	return nil
}

func (p *pager) integrity(read int, expected, got int64, format string, args ...any) error {
	return &IntegrityError{Object: p.name, Expected: expected, Got: got, Detail: fmt.Sprintf(format, args...), Reads: read}
}

// fetch gets the page at offset and decodes it.
func (p *pager) fetch(ctx context.Context, offset int, buf *bytes.Buffer) (int64, []json.RawMessage, error) {
	u := *p.u
	v := url.Values{}
	for k, vs := range p.params {
		v[k] = vs
	}
	v.Set("limit", strconv.Itoa(p.limit))
	v.Set("offset", strconv.Itoa(offset))
	u.RawQuery = v.Encode()
	info := p.info
	info.page = offset/p.limit + 1
	info.quota = p.quota
	st, err := p.c.do(ctx, info, &u, buf)
	p.stats.Requests += st.attempts
	p.stats.Retries += st.retries()
	p.stats.Waited += st.waited
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, context.Cause(ctx)
		}
		return 0, nil, err
	}
	total, items, err := p.decode(buf.Bytes())
	if err != nil {
		return 0, nil, fmt.Errorf("%s offset %d: decoding response: %w", info, offset, err)
	}
	return total, items, nil
}

func (p *pager) readOnce(ctx context.Context, read int) error {
	p.stats.Pages, p.stats.Rows = 0, 0
	buf := p.c.getBuf()
	defer p.c.putBuf(buf)
	keys := map[string]int{}
	total := int64(-2) // not yet known
	offset := 0
	var prevSum uint64
	prevRows := -1
	for {
		t, items, err := p.fetch(ctx, offset, buf)
		if err != nil {
			return err
		}
		sum := maphash.Bytes(p.seed, buf.Bytes())
		for again := 0; again < repeatRefetches && len(items) > 0 && sum == prevSum; again++ {
			p.c.log.WarnContext(ctx, "page repeats the previous one; fetching it again", "collection", p.name, "offset", offset)
			if t, items, err = p.fetch(ctx, offset, buf); err != nil {
				return err
			}
			sum = maphash.Bytes(p.seed, buf.Bytes())
		}
		if len(items) > 0 && sum == prevSum {
			return p.integrity(read, 0, int64(len(items)), "the page at offset %d repeats the previous page byte for byte", offset)
		}
		prevSum = sum
		switch {
		case total == -2:
			total = t
			if total/int64(p.limit) > MaxPages {
				return fmt.Errorf("extract: %s: %w: the count %d at %d per page is more than the %d pages a read may take", p.name, ErrEndlessPages, total, p.limit, MaxPages)
			}
			if total >= 0 {
				// The pages left, and the empty one that may confirm the end.
				left := int((max(total-int64(len(items)), 0)+int64(p.limit)-1)/int64(p.limit)) + 1
				if err := p.reserve(left); err != nil {
					return err
				}
			}
		case t != total:
			return p.integrity(read, total, t, "the count changed from %d to %d at offset %d: the data changed during the read", total, t, offset)
		}
		n := len(items)
		if n > p.limit {
			return p.integrity(read, int64(p.limit), int64(n), "the page at offset %d holds %d items, more than the limit %d", offset, n, p.limit)
		}
		if total >= 0 {
			want := max(min(int64(p.limit), total-int64(offset)), 0)
			if int64(n) != want {
				return p.integrity(read, want, int64(n), "the page at offset %d holds %d items, want %d (count %d, limit %d): a gap or moving data", offset, n, want, total, p.limit)
			}
		} else if prevRows >= 0 && prevRows < p.limit && n > 0 {
			return p.integrity(read, 0, int64(n), "the page at offset %d holds %d items after a short page: a page past the end must be empty", offset, n)
		}
		if err := p.checkKeys(read, keys, items, offset); err != nil {
			return err
		}
		if n > 0 {
			if err := p.fn(ctx, &CollectionPage{Collection: p.name, Offset: offset, Total: total, Items: items, Read: read}); err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return fmt.Errorf("extract: %s offset %d: %w", p.name, offset, err)
			}
			p.stats.Pages++
			p.stats.Rows += int64(n)
		}
		offset += n
		switch {
		case total >= 0 && int64(offset) >= total && (n < p.limit || prevRows == 0):
			// Count reached and the page was short (or the confirming
			// page was empty).
			return nil
		case total < 0 && n == 0 && prevRows >= 0 && prevRows < p.limit:
			// A short page, then an empty one.
			return nil
		case total < 0 && n == 0 && offset == 0:
			return nil // an empty collection: an empty first page
		}
		prevRows = n
		if total >= 0 && int64(offset) >= total {
			prevRows = 0 // the next page confirms the end
		}
	}
}

// checkKeys records item keys and reports one read twice.
func (p *pager) checkKeys(read int, keys map[string]int, items []json.RawMessage, offset int) error {
	fields, strict := p.keyFields, true
	if len(fields) == 0 {
		fields, strict = []string{"id"}, false
	}
	for i, it := range items {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(it, &m); err != nil {
			return fmt.Errorf("extract: %s offset %d item %d: %w", p.name, offset, i, err)
		}
		k, err := rowKey(m, fields)
		if err != nil {
			if strict {
				return fmt.Errorf("extract: %s offset %d item %d: %w", p.name, offset, i, err)
			}
			continue
		}
		if at, dup := keys[k]; dup {
			return p.integrity(read, 1, 2, "item %s at offset %d was already read at offset %d: a duplicate (moving data or a repeated page)", k, offset+i, at)
		}
		keys[k] = offset + i
	}
	return nil
}

// collectAll reads a whole collection into typed items; a restart resets
// the slice, so the caller never sees a discarded read.
func collectAll[T any](ctx context.Context, p *pager) ([]T, ReadStats, error) {
	var out []T
	p.fn = func(ctx context.Context, pg *CollectionPage) error {
		if pg.Restart {
			out = out[:0]
			return nil
		}
		for i, raw := range pg.Items {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("item %d: %w", pg.Offset+i, err)
			}
			out = append(out, v)
		}
		return nil
	}
	st, err := p.run(ctx)
	if err != nil {
		return nil, st, err
	}
	if out == nil {
		out = []T{}
	}
	return out, st, nil
}

// Asset is an item of the v3 assets collection. Fields the struct does
// not type (e.g. stats) are kept in Extra.
type Asset struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Type       string    `json:"type"`     // file, folder, link
	FileType   string    `json:"fileType"` // pdf, pptx, ...; "" when null
	SizeBytes  *int64    `json:"sizeBytes"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	OwnerID    string    `json:"ownerId"`
	DivisionID string    `json:"divisionId"` // "" when null
	Tags       []string  `json:"tags"`
	// Extra holds every attribute the struct does not type, as a JSON
	// object (nil when there is none), ready for a JSON column.
	Extra json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
func (a *Asset) UnmarshalJSON(b []byte) error {
	type plain Asset
	return unmarshalExtra(b, (*plain)(a), &a.Extra)
}

// Assets reads every asset (GET {tenant}/api/v3/assets.json), with the
// integrity rules and healing of ReadCollection.
func (c *Client) Assets(ctx context.Context, q CollectionQuery) ([]Asset, error) {
	p, err := c.v3Pager("assets", q)
	if err != nil {
		return nil, err
	}
	out, _, err := collectAll[Asset](ctx, p)
	return out, err
}

// GetAsset reads one asset (GET {tenant}/api/v3/assets/{id}.json); fields
// limits the attributes returned.
func (c *Client) GetAsset(ctx context.Context, id string, fields ...string) (*Asset, error) {
	info := reqInfo{iface: IfaceV3, op: "get asset", object: id, cred: credAccess}
	if id == "" {
		return nil, fmt.Errorf("%s: empty id", info)
	}
	base := *c.base
	base.Path += v3Path
	u := under(&base, "assets", id+"\x00.json")
	if len(fields) > 0 {
		u.RawQuery = url.Values{"fields": {strings.Join(fields, ",")}}.Encode()
	}
	var body struct {
		Response *Asset `json:"response"`
	}
	if err := c.getJSON(ctx, info, u, &body); err != nil {
		return nil, err
	}
	if body.Response == nil {
		return nil, fmt.Errorf("%s: response has no \"response\" object", info)
	}
	return body.Response, nil
}

// getJSON sends a request (GET unless info says otherwise) and decodes
// the success body into v (when v is not nil).
func (c *Client) getJSON(ctx context.Context, info reqInfo, u *url.URL, v any) error {
	buf := c.getBuf()
	defer c.putBuf(buf)
	if _, err := c.do(ctx, info, u, buf); err != nil {
		return err
	}
	if v == nil || buf.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		info = info.withDefaults()
		err = fmt.Errorf("%s: decoding response: %s", info, c.scrub(err.Error(), info.secrets...))
		if info.method == "POST" {
			// It was carried out; only the answer is unreadable.
			return &UncertainError{Interface: info.iface, Op: info.op, Object: info.object, Sent: true, Status: 200, Err: err}
		}
		return err
	}
	return nil
}

// knownKeys caches the JSON names of a struct type's fields.
var knownKeys sync.Map // reflect.Type → map[string]bool

func jsonNames(t reflect.Type) map[string]bool {
	if m, ok := knownKeys.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[strings.ToLower(name)] = true
	}
	knownKeys.Store(t, m)
	return m
}

// unmarshalExtra decodes b into dst (a pointer to a struct) and puts the
// members dst does not type into *extra as a JSON object (nil if none).
// Names are matched case-insensitively, as encoding/json does.
func unmarshalExtra(b []byte, dst any, extra *json.RawMessage) error {
	if err := json.Unmarshal(b, dst); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	known := jsonNames(reflect.TypeOf(dst).Elem())
	for k := range all {
		if known[strings.ToLower(k)] {
			delete(all, k)
		}
	}
	*extra = nil
	if len(all) == 0 {
		return nil
	}
	out, err := json.Marshal(all)
	if err != nil {
		return err
	}
	*extra = out
	return nil
}
