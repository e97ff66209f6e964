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

	"github.com/sepipe/sepipe/service"
)

// v3Path is the resource API base below the tenant URL.
const v3Path = "/api/v3"

// maxCollectionLimit is the largest page the offset-paged collections
// (v3, v4 themes, webhooks) accept.
const maxCollectionLimit = 1000

// CollectionQuery selects and pages a list.
type CollectionQuery struct {
	// Limit is the page size; 0 means the client's page size (at most
	// 1000).
	Limit int
	// Fields are the attribute names to return (the v3 `fields`
	// parameter); empty means all. v3 lists only.
	Fields []string
	// Sort is an attribute name, or -name for descending; empty means the
	// service's order. v3 lists and v4 themes only.
	Sort string
}

// List names an offset-paged list of items the client can read: v3
// resource collections, v4 sharing themes, webhook subscriptions and a
// subscription's delivery log. Build one with V3List, ThemeList,
// SubscriptionList or DeliveryLogList.
type List struct {
	Interface string   // IfaceV3, IfaceV4 or IfaceWebhooks
	Path      []string // below the interface's base; each element one path segment
}

// V3List is the v3 resource collection name (GET {tenant}/api/v3/{name}.json,
// e.g. "assets").
func V3List(name string) List { return List{Interface: IfaceV3, Path: []string{name}} }

// ThemeList is the v4 sharing themes (GET {v4}/themes).
func ThemeList() List { return List{Interface: IfaceV4, Path: []string{"themes"}} }

// SubscriptionList is the webhook subscriptions (GET {webhooks}/subscriptions).
func SubscriptionList() List { return List{Interface: IfaceWebhooks, Path: []string{"subscriptions"}} }

// DeliveryLogList is the delivery log of subscription id, newest first
// (GET {webhooks}/subscriptions/{id}/logs).
func DeliveryLogList(id string) List {
	return List{Interface: IfaceWebhooks, Path: []string{"subscriptions", id, "logs"}}
}

func (l List) String() string { return l.Interface + " " + strings.Join(l.Path, "/") }

// CanRead reports whether the client holds the credential an interface
// needs: the access token (or OAuth) for reporting, v3 and v4, the
// developer API token for webhooks.
func (c *Client) CanRead(iface string) bool {
	if iface == IfaceWebhooks {
		return c.apiToken != ""
	}
	return c.token != "" || c.tokens != nil
}

// ReadList reads every page of the list l by offset, q.Limit items a page,
// and hands each raw page to fn, which decodes it and returns what the
// page says about itself: the count (service.PageInfo.TotalResults, -1 when the
// page has none), the items it holds (Rows) and, when it knows the key
// fields, the items' keys (Keys). Page.Offset is the page's offset.
//
// The pages are reconciled against the count: the count must not change
// during the read, every page must hold min(limit, count-offset) items,
// no item key may repeat and no page may repeat the previous one byte for
// byte (a repeated page is fetched again, twice at most, before it counts
// as a failure). The read ends only on two agreeing signals: the items
// reach the count and the last page is short, or, when the last page is
// full, one more page at the end is empty. When the count is absent, the
// read ends at an empty page (after a short page, or after a full one when
// the items fill the last page exactly). A page past the end
// (beyond the count, or after a short page) that the service refuses with
// 400, 404 or 416 reads as empty, as in ReadObject; a refused first page
// is an error. A mismatch is
// healed by reading again from offset 0 (WithHealing times; fn gets a
// Restart page and must discard what it received) and is then an
// *IntegrityError. A page fn finds malformed (service.ErrMalformedPage) is
// fetched again, like a dropped connection.
func (c *Client) ReadList(ctx context.Context, l List, q CollectionQuery, fn PageFunc) (ReadStats, error) {
	if fn == nil {
		return ReadStats{}, errors.New("extract: ReadList: nil PageFunc")
	}
	p, err := c.listPager(l, q)
	if err != nil {
		return ReadStats{}, err
	}
	p.fn = fn
	return p.run(ctx)
}

func (c *Client) listPager(l List, q CollectionQuery) (*pager, error) {
	if len(l.Path) == 0 {
		return nil, errors.New("extract: ReadList: empty list path")
	}
	for _, seg := range l.Path {
		// A list path element is one name (checkSegment); NUL is under's
		// suffix mark.
		if checkSegment(seg) != nil || strings.ContainsAny(seg, "/?#\x00") {
			return nil, fmt.Errorf("extract: ReadList %s: segment %q: %w", l, seg, ErrBadListPath)
		}
	}
	if q.Limit < 0 || q.Limit > maxCollectionLimit {
		return nil, fmt.Errorf("extract: ReadList %s: limit %d: want 0..%d", l, q.Limit, maxCollectionLimit)
	}
	params := url.Values{}
	p := &pager{c: c, name: strings.Join(l.Path, "/"), limit: c.collectionLimit(q.Limit), params: params}
	switch l.Interface {
	case IfaceV3:
		if len(l.Path) != 1 {
			return nil, fmt.Errorf("extract: ReadList %s: a v3 list is one collection name", l)
		}
		base := *c.base
		base.Path += v3Path
		p.u = under(&base, l.Path[0]+"\x00.json")
		p.info = reqInfo{iface: IfaceV3, op: "list " + l.Path[0], cred: credAccess}
		if len(q.Fields) > 0 {
			params.Set("fields", strings.Join(q.Fields, ","))
		}
	case IfaceV4:
		p.u = under(c.v4, l.Path...)
		p.info = reqInfo{iface: IfaceV4, op: "list " + p.name, cred: credAccess}
	case IfaceWebhooks:
		p.u = under(c.webhooks, l.Path...)
		p.info = reqInfo{iface: IfaceWebhooks, op: "list " + p.name, cred: credAPI}
		if len(l.Path) == 3 {
			p.info.op, p.info.object = "list subscription logs", l.Path[1]
		}
	default:
		return nil, fmt.Errorf("extract: ReadList %s: unknown interface %q", l, l.Interface)
	}
	if (len(q.Fields) > 0 && l.Interface != IfaceV3) || (q.Sort != "" && l.Interface == IfaceWebhooks) {
		return nil, fmt.Errorf("extract: ReadList %s: fields and sort are not parameters of this list", l)
	}
	if q.Sort != "" {
		params.Set("sort", q.Sort)
	}
	return p, nil
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
			Count json.RawMessage `json:"count"`
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
	var count json.RawMessage
	if v.Meta != nil {
		count = v.Meta.Count
	}
	return service.ListCount(count), *v.Response.Items, nil
}

// decodeCountItems reads the v4 and webhook list shape {"count","items"}.
func decodeCountItems(body []byte) (int64, []json.RawMessage, error) {
	var v struct {
		Count json.RawMessage    `json:"count"`
		Items *[]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, nil, err
	}
	if v.Items == nil {
		return 0, nil, errors.New(`no "items" list`)
	}
	return service.ListCount(v.Count), *v.Items, nil
}

// pager reads an offset-paged collection with the integrity rules of
// ReadList.
type pager struct {
	c      *Client
	name   string
	info   reqInfo
	u      *url.URL
	params url.Values // besides limit and offset
	limit  int
	fn     PageFunc

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
		if _, err := p.fn(ctx, &Page{Object: p.name, Read: read + 1, Restart: true}); err != nil {
			return p.stats, fmt.Errorf("extract: %s: %w", p.name, err)
		}
		p.stats.Restarts++
	}
}

// reserve sets the request quota aside for the pages left, or fails the
// read before it spends more (Client.reservePages).
func (p *pager) reserve(pages int) error {
	res, err := p.c.reservePages(pages)
	p.quota = res
	if err != nil {
		return fmt.Errorf("extract: %s: %w", p.name, err)
	}
	return nil
}

func (p *pager) integrity(read int, expected, got int64, format string, args ...any) error {
	return &IntegrityError{Object: p.name, Expected: expected, Got: got, Detail: fmt.Sprintf(format, args...), Reads: read}
}

// fetch gets the page at offset into buf.
func (p *pager) fetch(ctx context.Context, offset int, buf *bytes.Buffer) error {
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
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// page fetches the page at offset and hands it to fn; a page fn finds
// malformed is fetched again. A page equal to the previous one byte for
// byte (prevSum) is fetched again before fn sees it.
func (p *pager) page(ctx context.Context, read, offset int, buf *bytes.Buffer, prevSum uint64) (service.PageInfo, uint64, error) {
	for attempt := 1; ; attempt++ {
		if err := p.fetch(ctx, offset, buf); err != nil {
			return service.PageInfo{}, 0, err
		}
		sum := maphash.Bytes(p.seed, buf.Bytes())
		for again := 0; again < repeatRefetches && sum == prevSum; again++ {
			p.c.log.WarnContext(ctx, "page repeats the previous one; fetching it again", "collection", p.name, "offset", offset)
			if err := p.fetch(ctx, offset, buf); err != nil {
				return service.PageInfo{}, 0, err
			}
			sum = maphash.Bytes(p.seed, buf.Bytes())
		}
		if sum == prevSum {
			return service.PageInfo{}, 0, p.integrity(read, 0, 0, "the page at offset %d repeats the previous page byte for byte", offset)
		}
		info, err := p.fn(ctx, &Page{Object: p.name, Number: offset/p.limit + 1, Offset: offset, Body: buf.Bytes(), Read: read})
		if err == nil {
			return info, sum, nil
		}
		if ctx.Err() != nil {
			return service.PageInfo{}, 0, context.Cause(ctx)
		}
		if !errors.Is(err, service.ErrMalformedPage) || attempt >= p.c.maxAttempts {
			return service.PageInfo{}, 0, fmt.Errorf("extract: %s offset %d: %w", p.name, offset, err)
		}
		p.stats.Retries++
		wait := p.c.backoff(attempt)
		p.stats.Waited += wait
		select {
		case <-ctx.Done():
			return service.PageInfo{}, 0, context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

func (p *pager) readOnce(ctx context.Context, read int) error {
	keys := p.c.newKeySet()
	defer p.c.endKeys(ctx, keys, "collection", p.name, "read", read)
	if err := p.readPages(ctx, read, keys); err != nil {
		return err
	}
	d, err := keys.finish()
	if err != nil {
		return fmt.Errorf("extract: %s: the read's end, after its last page: check its item keys: %w", p.name, err)
	}
	if d != nil {
		return p.keyDup(read, d)
	}
	return nil
}

// readPages reads the pages of one read, checking each item's key
// against keys.
func (p *pager) readPages(ctx context.Context, read int, keys *keySet) error {
	p.stats.Pages, p.stats.Rows = 0, 0
	buf := p.c.getBuf()
	defer p.c.putBuf(buf)
	total := int64(-2) // not yet known
	offset := 0
	var prevSum uint64
	prevRows := -1
	for {
		pi, sum, err := p.page(ctx, read, offset, buf, prevSum)
		if err != nil && p.pastEnd(total, offset, prevRows) && pastTheEnd(err) {
			// A service that refuses a page past the end says the same as
			// an empty one: nothing after it.
			p.c.log.DebugContext(ctx, "a page past the end was refused: read as empty", "collection", p.name, "offset", offset, "error", err)
			pi, sum, err = service.PageInfo{TotalResults: total}, 0, nil
		}
		if err != nil {
			return err
		}
		prevSum = sum
		t := pi.TotalResults
		switch {
		case total == -2:
			total = t
			if total/int64(p.limit) > int64(p.c.maxPages) {
				return fmt.Errorf("extract: %s: %w: the count %d at %d per page is more than the %d pages a read may take (requests.max_pages)", p.name, ErrEndlessPages, total, p.limit, p.c.maxPages)
			}
			if total >= 0 {
				// The pages left, and the empty one that may confirm the end.
				left := int((max(total-int64(pi.Rows), 0)+int64(p.limit)-1)/int64(p.limit)) + 1
				if err := p.reserve(left); err != nil {
					return err
				}
			}
		case t != total:
			return p.integrity(read, total, t, "the count changed from %d to %d at offset %d: the data changed during the read", total, t, offset)
		}
		n := pi.Rows
		if n < 0 || (pi.Keys != nil && len(pi.Keys) != n) {
			return p.integrity(read, int64(n), int64(len(pi.Keys)), "the page at offset %d: the PageFunc counted %d items and %d keys", offset, n, len(pi.Keys))
		}
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
		if err := p.checkKeys(read, keys, pi.Keys, offset); err != nil {
			return err
		}
		if n > 0 {
			p.stats.Pages++
			p.stats.Rows += int64(n)
		}
		offset += n
		switch {
		case total >= 0 && int64(offset) >= total && (n < p.limit || prevRows == 0):
			// Count reached and the page was short (or the confirming
			// page was empty).
			return nil
		case total < 0 && n == 0:
			// An empty page: after a short one, after a full one (the
			// items filled the last page exactly; asking for the same
			// offset again would only repeat it), or the first page of an
			// empty collection.
			return nil
		}
		prevRows = n
		if total >= 0 && int64(offset) >= total {
			prevRows = 0 // the next page confirms the end
		}
		if total < 0 && p.stats.Pages >= p.c.maxPages {
			return fmt.Errorf("extract: %s: %w: %d full pages and no end (no count announced; requests.max_pages is %d)", p.name, ErrEndlessPages, p.stats.Pages, p.c.maxPages)
		}
	}
}

// pastEnd reports whether the page at offset may be past the end of the
// list: beyond a known count (the page that confirms the end after a full
// last page), or, without a count, any page after the first (after a
// short page it is; after a full one it may be, the items having filled
// the last page exactly: ReadObject's read without totals takes such a
// refusal as the end too). Only such a page may be refused (pastTheEnd)
// and read as empty; never the first page, whose 404 says the list is not
// there (or not entitled).
func (p *pager) pastEnd(total int64, offset, prevRows int) bool {
	if offset == 0 {
		return false
	}
	if total >= 0 {
		return int64(offset) >= total
	}
	return prevRows >= 0
}

// checkKeys records item keys and reports one read twice.
func (p *pager) checkKeys(read int, seen *keySet, keys []string, offset int) error {
	for i, k := range keys {
		if k == "" {
			continue // an item without a key; the decoder decided what to do with it
		}
		d, err := seen.add(k, offset+i)
		if err != nil {
			return fmt.Errorf("extract: %s offset %d: %w", p.name, offset+i, err)
		}
		if d != nil {
			return p.keyDup(read, d)
		}
	}
	return nil
}

func (p *pager) keyDup(read int, d *keyDup) error {
	return p.integrity(read, 1, 2, "item %s at offset %d was already read at offset %d: a duplicate (moving data or a repeated page)", d.Key, d.At, d.Prev)
}

// collectAll reads a whole list into typed items, decoding each page with
// decode; a restart resets the slice, so the caller never sees a
// discarded read. Items are keyed by their "id".
func collectAll[T any](ctx context.Context, p *pager, decode func([]byte) (int64, []json.RawMessage, error)) ([]T, ReadStats, error) {
	var out []T
	p.fn = func(ctx context.Context, pg *Page) (service.PageInfo, error) {
		if pg.Restart {
			out = out[:0]
			return service.PageInfo{}, nil
		}
		total, items, err := decode(pg.Body)
		if err != nil {
			return service.PageInfo{}, fmt.Errorf("%w: %w", service.ErrMalformedPage, err)
		}
		info := service.PageInfo{TotalResults: total, TotalPages: -1, Rows: len(items), Keys: make([]string, len(items))}
		for i, raw := range items {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return service.PageInfo{}, fmt.Errorf("item %d: %w", pg.Offset+i, err)
			}
			var id struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(raw, &id) == nil && len(id.ID) > 0 && string(id.ID) != "null" {
				info.Keys[i] = string(id.ID)
			}
			out = append(out, v)
		}
		return info, nil
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

// Asset is an item of the v3 assets collection. The interface document
// names only id and name; a tenant sends dozens of other attributes,
// which Raw keeps as sent. (A sync stores every attribute, typed from the
// data: see pipeline and transform.Inferrer.)
type Asset struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Raw is the whole item as the service sent it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON reads id and name and keeps the whole item in Raw.
func (a *Asset) UnmarshalJSON(b []byte) error {
	var v struct {
		ID   json.RawMessage `json:"id"`
		Name json.RawMessage `json:"name"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Asset{ID: jsonText(v.ID), Name: jsonText(v.Name), Raw: append(json.RawMessage(nil), b...)}
	return nil
}

// jsonText is a JSON scalar as text: a string's value, a number's digits,
// "" for null or nothing.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// Assets reads every asset (GET {tenant}/api/v3/assets.json), with the
// integrity rules and healing of ReadList.
func (c *Client) Assets(ctx context.Context, q CollectionQuery) ([]Asset, error) {
	p, err := c.listPager(V3List("assets"), q)
	if err != nil {
		return nil, err
	}
	out, _, err := collectAll[Asset](ctx, p, decodeV3List)
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
