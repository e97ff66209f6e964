package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// The collection streams and their tables.
const (
	StreamThemes        = "themes"
	StreamAssets        = "assets"
	StreamSubscriptions = "webhook_subscriptions"
	StreamDeliveryLogs  = "webhook_delivery_logs"
)

// Collections lists the collection streams, in sync order.
var Collections = []string{StreamThemes, StreamAssets, StreamSubscriptions, StreamDeliveryLogs}

// WebhookCollections need the developer API token; the others the access
// token.
var WebhookCollections = []string{StreamSubscriptions, StreamDeliveryLogs}

// isCollection reports whether a stream name is a collection.
func isCollection(name string) bool { return slices.Contains(Collections, name) }

// IsCollection reports whether a stream is a collection (not a report
// object).
func IsCollection(name string) bool { return isCollection(name) }

func seed(id, typ, name string) service.Field {
	f := service.Field{ID: id, DisplayName: name, Type: typ}
	if p := strings.Split(id, "__"); len(p) > 1 {
		f.Path = p
	}
	return f
}

// seedFields are the fields the interface document names for each
// collection (docs/service-interface.md, sections C, D and E): a
// collection's table has them from its first run, typed as the document
// says, whatever its first items hold. Every other column follows the
// data (transform.Inferrer).
var seedFields = map[string][]service.Field{
	StreamThemes: {
		seed("id", service.TypeString, "Theme identifier"), seed("title", service.TypeString, "Theme name"),
		seed("isGlobal", service.TypeBool, "Whether the theme is global"),
		seed("isDefault", service.TypeBool, "Whether the theme is the default"),
		seed("displayData__aboutDescription", service.TypeString, "About text"),
		seed("displayData__logo__url", service.TypeString, "Logo URL"),
		seed("displayData__displayImage__url", service.TypeString, "Display image URL"),
		seed("colorSettings__headerColor", service.TypeString, "Header color (six hex digits)"),
		seed("colorSettings__headerFontColor", service.TypeString, "Header font color"),
		seed("colorSettings__accentColor", service.TypeString, "Accent color"),
		seed("colorSettings__accentFontColor", service.TypeString, "Accent font color"),
		seed("createdAt", service.TypeDate, "Creation instant"), seed("updatedAt", service.TypeDate, "Last update instant"),
		seed("division__id", service.TypeString, "Division of the theme (null for a global theme)"),
	},
	StreamAssets: {seed("id", service.TypeString, "Asset identifier"), seed("name", service.TypeString, "Asset name")},
	StreamSubscriptions: {
		seed("id", service.TypeString, "Subscription identifier"), seed("name", service.TypeString, "Subscription name"),
		seed("url", service.TypeString, "Destination URL (credentials redacted)"),
		seed("method", service.TypeString, "Delivery method (GET or POST)"),
		seed("headers", service.TypeJSON, "Headers sent with each delivery (values redacted)"),
		seed("types", service.TypeJSON, "Event types subscribed to"),
	},
	StreamDeliveryLogs: {
		seed("id", service.TypeString, "Log entry identifier"),
		seed("subscriptionId", service.TypeString, "Subscription the entry was listed under"),
	},
}

// SeedFields are the fields the interface document names for collection
// name (nil for another name): its table has them from its first run.
func SeedFields(name string) []service.Field { return slices.Clone(seedFields[name]) }

// collectionList is the list a collection stream reads (the delivery log
// is read per subscription: see readDeliveryLogs).
func collectionList(name string) extract.List {
	switch name {
	case StreamThemes:
		return extract.ThemeList()
	case StreamAssets:
		return extract.V3List("assets")
	}
	return extract.SubscriptionList()
}

// collectionRead reads one collection: its schema comes from its items.
// Every page is decoded as it arrives with the schema known so far (the
// stored fields and the document's, widened by the first page's items)
// and kept in a spool file. When a later page holds what that schema
// cannot (a new member, a wider type) and the contract lets the schema
// change, the read's end infers the schema from every spooled page and
// decodes them again: the collection is typed by all of its items, read
// from the service once.
type collectionRead struct {
	name     string
	contract schemas.Contract
	stored   []service.Field // nil on the first run
	keys     []string        // key field ids the decoder yields
	required bool            // merge: a row without its key is rejected
	spool    string
	// create creates the spool file (load.Lake.CreateSpool: inside the
	// output folder whatever the collection's name).
	create func() (*os.File, error)
	// writers makes the writers of a schema (see objectSink).
	writers func(*arrow.Schema) writerSet
	opts    []transform.Option
	// log takes the warnings of a read that goes on (a subscription's log
	// not read); nil discards them.
	log *slog.Logger

	fields []service.Field // the effective fields so far
	live   []service.Field // as the items call for (recorded as the describe)
	schema *arrow.Schema
	dec    transform.PageDecoder
	// parentDec decodes the pages of the delivery log of subscription
	// parentID (built once per subscription, not per page).
	parentID  string
	parentDec transform.PageDecoder
	sink      *objectSink
	widen     bool // a page held what the schema cannot; decode again at the end
	w         *bufio.Writer
	f         *os.File
	pages     int
	size      int64     // bytes of the spooled pages (buffered ones included)
	mark      spoolMark // where the delivery log being read began
}

// spoolMark is a place in the spool: its size and pages up to there.
type spoolMark struct {
	size  int64
	pages int
}

func (c *collectionRead) open() error {
	f, err := c.create()
	if err != nil {
		return err
	}
	c.f, c.w, c.pages, c.size = f, bufio.NewWriterSize(f, 1<<20), 0, 0
	return nil
}

func (c *collectionRead) close() {
	if c.f != nil {
		_ = c.f.Close()
		_ = os.Remove(c.spool)
		c.f = nil
	}
	c.dropDecoders()
}

func (c *collectionRead) dropDecoders() {
	if c.dec != nil {
		c.dec.Release()
		c.dec = nil
	}
	if c.parentDec != nil {
		c.parentDec.Release()
		c.parentDec, c.parentID = nil, ""
	}
}

// setSchema resolves the inferred fields against what the table has and
// builds the schema, decoder and (first time) sink.
func (c *collectionRead) setSchema(live []service.Field) error {
	base, contract := c.stored, c.contract
	if base == nil {
		// The first run: the document's fields, and whatever the items hold.
		base, contract = seedFields[c.name], schemas.Evolve
	}
	if c.fields != nil {
		base = c.fields
	}
	c.live = live
	c.fields, _ = schemas.ResolveInferred(contract, c.name, base, live)
	schema, err := schemas.ForCollection(c.name, c.fields)
	if err != nil {
		return err
	}
	c.dropDecoders()
	c.schema = schema
	if c.dec, err = c.newDecoder(nil); err != nil {
		return err
	}
	if c.sink == nil {
		c.sink, err = newObjectSink(c.writers(schema))
	} else {
		err = c.sink.restartWith(c.writers(schema))
	}
	return err
}

// page handles one page of the list (parent: the subscription of a
// delivery log page, "" otherwise).
func (c *collectionRead) page(p *extract.Page, parent string, progress Progress) (service.PageInfo, error) {
	if p.Restart && parent != "" {
		// One subscription's log did not add up and is read again: only
		// its pages go, the logs read before it stay.
		return service.PageInfo{}, c.discardFrom(c.mark)
	}
	if p.Restart {
		// The pages did not add up; the list is read again from the start.
		c.widen = false
		if err := c.f.Truncate(0); err != nil {
			return service.PageInfo{}, err
		}
		if _, err := c.f.Seek(0, io.SeekStart); err != nil {
			return service.PageInfo{}, err
		}
		c.w.Reset(c.f)
		c.pages, c.size = 0, 0
		if c.sink != nil {
			return service.PageInfo{}, c.sink.restart()
		}
		return service.PageInfo{}, nil
	}
	if c.dec == nil {
		in := transform.NewInferrer(c.name)
		if err := in.Page(p.Number, p.Body); err != nil {
			return service.PageInfo{}, err
		}
		if err := c.setSchema(in.Fields()); err != nil {
			return service.PageInfo{}, err
		}
	}
	dec, err := c.decoderFor(parent)
	if err != nil {
		return service.PageInfo{}, err
	}
	r, err := dec.DecodePage(p.Number, p.Body)
	if err != nil {
		return service.PageInfo{}, err
	}
	defer r.Record.Release()
	if err := c.keep(p.Number, parent, p.Body); err != nil {
		return service.PageInfo{}, err
	}
	switch {
	case c.contract == schemas.Freeze && c.stored != nil:
	case r.Misfits > 0, c.contract != schemas.Discard && len(r.UnknownFields) > 0:
		c.widen = true
	}
	if !c.widen {
		if err := c.sink.add(r, p.Body); err != nil {
			return service.PageInfo{}, err
		}
	}
	progress.PageDone(c.name, p.Number, r.Info.Rows, -1)
	return r.Info, nil
}

// newDecoder builds a decoder of c's schema with the options of every
// collection read (rows kept, credentials redacted, keys, freeze), plus
// extra.
func (c *collectionRead) newDecoder(extra []transform.Option) (transform.PageDecoder, error) {
	var keys []string
	for _, k := range c.keys {
		if slices.ContainsFunc(c.fields, func(f service.Field) bool { return f.ID == k }) {
			keys = append(keys, k)
		} else if c.required {
			return nil, fmt.Errorf("primary key field %q is not a field of %s", k, c.name)
		}
	}
	opts := append(slices.Clone(c.opts), transform.WithCredentialsRedacted())
	if len(keys) > 0 {
		opts = append(opts, transform.WithKeyFields(c.required, keys...))
	}
	if c.contract == schemas.Freeze && c.stored != nil {
		opts = append(opts, transform.WithUnknownRejected())
	}
	return transform.NewDecoder(c.schema, append(opts, extra...)...)
}

// decoderFor is the decoder of a page listed under parent: c.dec, or for
// a delivery log page one whose items that do not name their subscription
// get parent's id.
func (c *collectionRead) decoderFor(parent string) (transform.PageDecoder, error) {
	if parent == "" {
		return c.dec, nil
	}
	if c.parentDec != nil && c.parentID == parent {
		return c.parentDec, nil
	}
	v, err := json.Marshal(parent)
	if err != nil {
		return nil, err
	}
	dec, err := c.newDecoder([]transform.Option{transform.WithDefault("subscriptionId", v)})
	if err != nil {
		return nil, err
	}
	if c.parentDec != nil {
		c.parentDec.Release()
	}
	c.parentID, c.parentDec = parent, dec
	return dec, nil
}

// keep appends a page to the spool: length, page number, parent, body.
func (c *collectionRead) keep(n int, parent string, body []byte) error {
	var hdr [16]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(n))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(parent)))
	if _, err := c.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	if _, err := c.w.WriteString(parent); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	if _, err := c.w.Write(body); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	c.pages++
	c.size += int64(len(hdr) + len(parent) + len(body))
	return nil
}

// discardFrom drops the pages spooled from m on (the delivery log of one
// subscription, read again or gone) and gives the sink again the pages
// before m, decoded again (the sink cannot take back what it was given);
// when the schema is to widen, finish gives it every page anyway.
func (c *collectionRead) discardFrom(m spoolMark) error {
	if c.pages == m.pages {
		return nil
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	if err := c.f.Truncate(m.size); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	c.pages, c.size = m.pages, m.size
	if c.sink != nil {
		if err := c.sink.restart(); err != nil {
			return err
		}
		if !c.widen {
			if err := c.addSpooled(); err != nil {
				return err
			}
		}
	}
	if _, err := c.f.Seek(m.size, io.SeekStart); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	c.w.Reset(c.f)
	return nil
}

// addSpooled decodes every spooled page again, each with the decoder of
// its parent, and gives it to the sink.
func (c *collectionRead) addSpooled() error {
	return c.replay(func(n int, parent string, body []byte) error {
		dec, err := c.decoderFor(parent)
		if err != nil {
			return err
		}
		r, err := dec.DecodePage(n, body)
		if err != nil {
			return err
		}
		defer r.Record.Release()
		return c.sink.add(r, body)
	})
}

// replay calls fn with every spooled page, in order.
func (c *collectionRead) replay(fn func(n int, parent string, body []byte) error) error {
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("spool %s: %w", c.spool, err)
	}
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(c.f, 1<<20)
	var body []byte
	for range c.pages {
		var hdr [16]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("spool %s: %w", c.spool, err)
		}
		size, n, plen := binary.LittleEndian.Uint32(hdr[0:]), binary.LittleEndian.Uint32(hdr[4:]), binary.LittleEndian.Uint32(hdr[8:])
		buf := make([]byte, plen)
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("spool %s: %w", c.spool, err)
		}
		body = slices.Grow(body[:0], int(size))[:size]
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("spool %s: %w", c.spool, err)
		}
		if err := fn(int(n), string(buf), body); err != nil {
			return err
		}
	}
	return nil
}

// finish decodes the spooled pages again when a page called for a wider
// schema: the schema is inferred from every page, then every page is
// decoded with it.
func (c *collectionRead) finish(progress Progress) error {
	if c.dec == nil {
		// No page at all (an interface with nothing to list): the table
		// still gets the fields known so far.
		return c.setSchema(nil)
	}
	if !c.widen {
		return nil
	}
	in := transform.NewInferrer(c.name)
	if err := c.replay(func(n int, _ string, body []byte) error { return in.Page(n, body) }); err != nil {
		return err
	}
	if err := c.setSchema(in.Fields()); err != nil {
		return err
	}
	return c.addSpooled()
}

// read reads the collection c.name from src into c's sink. The delivery
// log stream lists the subscriptions and reads each one's log in turn. A
// log the client reads again from its start (its pages shifted) discards
// its own pages only. A subscription deleted since the listing (a 404 to
// its log, and no longer listed) and one whose id no URL can name are
// passed over with a warning naming them, what was read of their log
// dropped; any other error of a log fails the stream as a 403 or 404 to
// the list itself does (skipped: no webhooks).
func (c *collectionRead) read(ctx context.Context, src Source, progress Progress) (extract.ReadStats, error) {
	if err := c.open(); err != nil {
		return extract.ReadStats{}, err
	}
	if c.name != StreamDeliveryLogs {
		return src.ReadList(ctx, collectionList(c.name), extract.CollectionQuery{}, func(_ context.Context, p *extract.Page) (service.PageInfo, error) {
			return c.page(p, "", progress)
		})
	}
	ids, total, err := subscriptionIDs(ctx, src)
	if err != nil {
		return total, err // a 403 or 404 here: the tenant has no webhooks (skipped)
	}
	if n := total.Rows - int64(len(ids)); n > 0 {
		c.logger().Warn("subscriptions without an id are listed: their delivery logs cannot be read",
			"stream", c.name, "step", "list subscriptions", "subscriptions", n)
	}
	for _, id := range ids {
		c.mark = spoolMark{size: c.size, pages: c.pages}
		st, err := src.ReadList(ctx, extract.DeliveryLogList(id), extract.CollectionQuery{}, func(_ context.Context, p *extract.Page) (service.PageInfo, error) {
			return c.page(p, id, progress)
		})
		total = addStats(total, st)
		switch {
		case err == nil:
		case errors.Is(err, extract.ErrBadListPath):
			// No URL names its log: the other subscriptions' logs are read.
			c.logger().Warn("a subscription's delivery log is not read: its id cannot be put in the log's URL",
				"stream", c.name, "step", "read log", "subscription", id, "err", err)
		case errors.Is(err, extract.ErrNotFound):
			// Deleted since the list was read: its log went with it
			// (service-interface.md, D), unless it is still listed.
			still, lst, lerr := stillListed(ctx, src, id)
			total = addStats(total, lst)
			if lerr != nil {
				return total, fmt.Errorf("logs of subscription %s: %w; %w", id, err, lerr)
			}
			if still {
				return total, fmt.Errorf("logs of subscription %s (still listed): %w", id, err)
			}
			// What was read of its log before the 404 goes too.
			if err := c.discardFrom(c.mark); err != nil {
				return total, fmt.Errorf("logs of subscription %s: %w", id, err)
			}
			c.logger().Warn("a subscription was deleted since the subscriptions were listed: its log is gone with it and not loaded",
				"stream", c.name, "step", "read log", "subscription", id, "err", err)
		default:
			return total, fmt.Errorf("logs of subscription %s: %w", id, err)
		}
	}
	return total, nil
}

// stillListed reports whether the subscription id is listed (again): a
// 404 to its log is a deletion since the first listing only when it is
// not.
func stillListed(ctx context.Context, src Source, id string) (bool, extract.ReadStats, error) {
	ids, st, err := subscriptionIDs(ctx, src)
	if err != nil {
		return false, st, fmt.Errorf("list subscriptions again: %w", err)
	}
	return slices.Contains(ids, id), st, nil
}

func (c *collectionRead) logger() *slog.Logger {
	if c.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.log
}

// subscriptionIDs lists the ids of the webhook subscriptions.
func subscriptionIDs(ctx context.Context, src Source) ([]string, extract.ReadStats, error) {
	ids, _, st, err := ListIDs(ctx, src, extract.SubscriptionList(), 0)
	if err == nil && len(ids) == 0 && st.Rows > 0 {
		err = errors.New("the subscriptions carry no id: their logs cannot be listed")
	}
	return ids, st, err
}

// Readable lists the collections src holds the credentials for, in sync
// order: a sync with no Only syncs them.
func Readable(src Source) []string {
	return slices.DeleteFunc(slices.Clone(Collections), func(c string) bool { return !src.CanRead(streamInterface(c)) })
}

// CountItems returns the count of items a list's first page announces
// (-1 when the page has none), reading one page of one item.
func CountItems(ctx context.Context, src Source, l extract.List) (int64, error) {
	_, total, _, err := ListIDs(ctx, src, l, 1)
	return total, err
}

// ListIDs reads the ids of a list's items, decoded by the one decoder:
// every item, or the first page of n items when n > 0; total is the count
// the first page announced (-1 when none).
func ListIDs(ctx context.Context, src Source, l extract.List, n int) (ids []string, total int64, st extract.ReadStats, err error) {
	total = -1
	schema, err := schemas.ForCollection(l.String(), []service.Field{seed("id", service.TypeString, "")})
	if err != nil {
		return nil, total, st, err
	}
	dec, err := transform.NewDecoder(schema, transform.WithKeyFields(false, "id"))
	if err != nil {
		return nil, total, st, err
	}
	defer dec.Release()
	q := extract.CollectionQuery{Limit: n}
	if l.Interface == extract.IfaceV3 {
		q.Fields = []string{"id"}
	}
	st, err = src.ReadList(ctx, l, q, func(_ context.Context, p *extract.Page) (service.PageInfo, error) {
		if p.Restart {
			ids = ids[:0]
			return service.PageInfo{}, nil
		}
		r, err := dec.DecodePage(p.Number, p.Body)
		if err != nil {
			return service.PageInfo{}, err
		}
		r.Record.Release()
		if p.Offset == 0 {
			total = r.Info.TotalResults
		}
		for _, k := range r.Info.Keys {
			if id := idText(k); id != "" {
				ids = append(ids, id)
			}
		}
		if n > 0 {
			return r.Info, errEnough
		}
		return r.Info, nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, total, st, err
	}
	return ids, total, st, nil
}

var errEnough = errors.New("enough items read")

// idText is an item's id from its raw JSON key: a string's text or a
// number's digits; "" for anything else.
func idText(raw string) string {
	var v any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

func addStats(a, b extract.ReadStats) extract.ReadStats {
	a.Pages += b.Pages
	a.Rows += b.Rows
	a.Requests += b.Requests
	a.Retries += b.Retries
	a.Restarts += b.Restarts
	a.Waited += b.Waited
	return a
}
