package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// rowsSeed seeds PageInfo.RowsHash: stable within a process.
var rowsSeed = maphash.MakeSeed()

// PageDecoder turns one results page into a record batch: the transform
// stage as the pipeline sees it. DecodePage is safe for concurrent use;
// Release frees the decoder's buffers once no page is being decoded.
type PageDecoder interface {
	DecodePage(page int, body []byte) (Result, error)
	Release()
}

var _ PageDecoder = (*Decoder)(nil)

// Result is one decoded page.
type Result struct {
	// Record holds the page's valid rows in page order; never nil (it may
	// have zero rows). The caller owns it and must Release it.
	Record arrow.RecordBatch
	// Info is what the page said about itself; Info.Rows counts every row
	// in results, valid or rejected.
	Info service.PageInfo
	// Rejects lists each value that did not fit its field.
	Rejects []Reject
	// RejectedRows counts rows left out of Record: elements of the rows
	// that are not objects, and, with WithKeyFields(true, ...), rows
	// without a value for a key field (a row with two bad values has two
	// Rejects but counts once).
	RejectedRows int
	// NulledValues counts the Rejects of values null in a row that was
	// kept because they did not fit their field (text in an int field, an
	// object where a scalar belongs) or, under WithUnknownRejected, were not
	// in the schema; values too long for WithMaxValueBytes are not counted.
	NulledValues int
	// Misfits counts the Rejects of values whose JSON type or text their
	// column's type cannot hold (not those of missing keys or, under
	// WithUnknownRejected, of unknown members): a collection's cue to
	// widen its schema.
	Misfits int
	// UnknownFields names keys present in rows but absent from the schema,
	// sorted. Their values are not stored.
	UnknownFields []string
	// RepairedValues counts string values stored repaired: their invalid
	// UTF-8 bytes became U+FFFD (the row is kept).
	RepairedValues int
}

type kind uint8

const (
	kInt kind = iota
	kFloat
	kString
	kPicklist
	kDate
	kBool
	kJSON
)

// Option configures a Decoder.
type Option func(*Decoder)

// WithAllocator sets the allocator for record batches (default
// memory.DefaultAllocator).
func WithAllocator(mem memory.Allocator) Option { return func(d *Decoder) { d.mem = mem } }

// WithKeyFields names the fields (by service id) that identify a row: the
// decoder yields every row's key (Result.Info.Keys), so the reader checks
// for duplicates in the same pass. With required set, a row without a
// value for a key field is rejected (a merge cannot place it).
func WithKeyFields(required bool, ids ...string) Option {
	return func(d *Decoder) { d.keyIDs, d.keyRequired = ids, required }
}

// WithUnknownRejected lists the value of every member the schema does not
// know as a Reject ("not in the frozen schema"), instead of only naming
// it in UnknownFields: a collection under the freeze contract keeps its
// shape and loses no value.
func WithUnknownRejected() Option { return func(d *Decoder) { d.unknownRejects = true } }

// WithCredentialsRedacted keeps credentials out of the batch: a string
// value that is an http(s) URL has its password and secret-looking query
// parameters replaced (service.RedactURL), and in a json column whose
// field is named headers every member named value is replaced. For
// webhook subscriptions and delivery logs, whose headers and URLs carry
// the destination's credentials.
func WithCredentialsRedacted() Option { return func(d *Decoder) { d.redact = true } }

// WithDefault fills the field id, in a row that has no value for it,
// with value (JSON text): a delivery log item that does not name its
// subscription gets the id of the subscription it was listed under.
func WithDefault(id string, value []byte) Option {
	return func(d *Decoder) { d.defID, d.defRaw = id, value }
}

// WithMaxValueBytes limits the JSON text of one value to n bytes (0: no
// limit). A longer value is not stored: its field is null, the row is
// kept, and a Reject marked Oversize says where the value lies in the
// page body. A value of hundreds of megabytes would otherwise be copied
// by every stage after the decoder, each copy the size of the value.
func WithMaxValueBytes(n int) Option { return func(d *Decoder) { d.maxValue = n } }

// node is a member name in the items' structure: a column of its own
// (col), members below it (kids, for a flattened object), or both.
type node struct {
	id    int    // index into state.pred
	path  string // the field id this node's column has (or would have)
	col   int    // -1: no column here
	keys  []string
	index map[string]int
	kids  []*node
}

func (n *node) child(key string) *node {
	if i, ok := n.index[key]; ok {
		return n.kids[i]
	}
	c := &node{path: key, col: -1, index: map[string]int{}}
	if n.path != "" {
		c.path = n.path + "__" + key
	}
	n.index[key] = len(n.kids)
	n.keys = append(n.keys, key)
	n.kids = append(n.kids, c)
	return c
}

// Decoder decodes the pages of one object. Build it with NewDecoder and
// Release it when done.
type Decoder struct {
	object  string
	schema  *arrow.Schema
	kinds   []kind
	names   []string // field ids, by column
	root    *node
	nodes   int
	options [][]string // picklist options, by column (nil for other kinds)
	secret  []bool     // json columns whose "value" members are redacted
	mem     memory.Allocator
	free    chan *state

	keyIDs         []string
	keyCols        []int // columns of keyIDs
	keyOf          []int // by column: position in keyCols, or -1
	keyRequired    bool
	unknownRejects bool
	redact         bool
	defID          string
	defRaw         []byte
	defCol         int
	maxValue       int
}

// NewDecoder prepares a decoder for pages of the object whose schema is s
// (built by schemas.FromDescribe or schemas.ForCollection).
func NewDecoder(s *arrow.Schema, opts ...Option) (*Decoder, error) {
	d := &Decoder{
		object:  schemas.Object(s),
		schema:  s,
		kinds:   make([]kind, s.NumFields()),
		names:   make([]string, s.NumFields()),
		root:    &node{col: -1, index: map[string]int{}},
		options: make([][]string, s.NumFields()),
		secret:  make([]bool, s.NumFields()),
		keyOf:   make([]int, s.NumFields()),
		mem:     memory.DefaultAllocator,
		free:    make(chan *state, 16),
	}
	for _, o := range opts {
		o(d)
	}
	for i, f := range s.Fields() {
		// Rows are keyed by the service's field ids (a column may be named
		// otherwise, see schemas.FieldID); a nested field by its path.
		d.names[i] = schemas.FieldID(f)
		d.keyOf[i] = -1
		path := schemas.Path(f)
		if len(path) == 0 {
			path = []string{d.names[i]}
		}
		n := d.root
		for _, m := range path {
			n = n.child(m)
		}
		if n.col >= 0 {
			return nil, fmt.Errorf("transform: object %q field %q: two columns for the same member", d.object, d.names[i])
		}
		n.col = i
		// How a column is read is its type's, in the one table of types.
		t, _ := schemas.TypeOfArrow(f.Type)
		switch t.Value {
		case schemas.ValueInt:
			d.kinds[i] = kInt
		case schemas.ValueFloat:
			d.kinds[i] = kFloat
		case schemas.ValueText:
			d.kinds[i] = kString
		case schemas.ValueBool:
			d.kinds[i] = kBool
		case schemas.ValueJSON:
			d.kinds[i] = kJSON
			d.secret[i] = d.redact && strings.EqualFold(path[len(path)-1], "headers")
		case schemas.ValueOption:
			d.kinds[i] = kPicklist
			for _, o := range schemas.Options(f) {
				if !slices.Contains(d.options[i], o) {
					d.options[i] = append(d.options[i], o)
				}
			}
		case schemas.ValueTime:
			d.kinds[i] = kDate
		default:
			return nil, fmt.Errorf("transform: object %q field %q: unsupported Arrow type %s", d.object, f.Name, f.Type)
		}
	}
	var number func(n *node)
	number = func(n *node) {
		n.id = d.nodes
		d.nodes++
		for _, k := range n.kids {
			number(k)
		}
	}
	number(d.root)
	d.defCol = -1
	if d.defID != "" {
		if d.defCol = slices.Index(d.names, d.defID); d.defCol < 0 {
			return nil, fmt.Errorf("transform: object %q: default field %q is not in the schema", d.object, d.defID)
		}
	}
	for _, id := range d.keyIDs {
		col := slices.Index(d.names, id)
		if col < 0 {
			return nil, fmt.Errorf("transform: object %q: key field %q is not in the schema", d.object, id)
		}
		d.keyOf[col] = len(d.keyCols)
		d.keyCols = append(d.keyCols, col)
	}
	return d, nil
}

// Schema returns the schema the decoder produces.
func (d *Decoder) Schema() *arrow.Schema { return d.schema }

// Release frees the builders the decoder keeps for reuse. Batches already
// returned stay valid.
func (d *Decoder) Release() {
	for {
		select {
		case st := <-d.free:
			st.release()
		default:
			return
		}
	}
}

type slotState uint8

const (
	unset slotState = iota
	isNull
	hasValue
)

type slot struct {
	st slotState
	i  int64
	f  float64
	b  []byte
}

// state is one decode in progress: the column builders of the batch being
// built and the parse of the current row. States are reused across pages.
type state struct {
	builders []array.Builder // by column; a picklist's is its index builder
	ints     []*array.Int64Builder
	floats   []*array.Float64Builder
	strs     []*array.StringBuilder
	picks    []*picklist
	times    []*array.TimestampBuilder
	bools    []*array.BooleanBuilder
	rows     int   // rows appended to the builders
	room     int   // rows the builders can take without growing
	strBytes []int // string bytes per column in the last batch, to reserve

	slots    []slot
	scratch  []byte
	repaired int // values repaired in the page being decoded
	unknown  map[string]struct{}
	// pred predicts the next member of each node: pred[n][c] is the child
	// whose key followed child c's in the last row (pred[n][len]: the
	// first key). Rows of one page almost always list their keys in the
	// same order, so most keys are found by one comparison, not a map.
	pred [][]int
	// keyRaw holds the raw JSON of the row's key values, by key position:
	// nil for a key the row lacks (appendKey keys the values as held).
	keyRaw  [][]byte
	keyBuf  []byte // the page's keys so far, back to back
	keyEnds []int  // where each row's key ends in keyBuf; -1: the row has none
	dropRow bool   // the row must be left out: a key field without a value
	// oversize holds the [start, end) body offsets of the row's values
	// over the limit (kept out of RawRow), in order.
	oversize []int
}

func (d *Decoder) get() *state {
	select {
	case st := <-d.free:
		return st
	default:
	}
	n := d.schema.NumFields()
	st := &state{
		builders: make([]array.Builder, n),
		ints:     make([]*array.Int64Builder, n),
		floats:   make([]*array.Float64Builder, n),
		strs:     make([]*array.StringBuilder, n),
		picks:    make([]*picklist, n),
		times:    make([]*array.TimestampBuilder, n),
		bools:    make([]*array.BooleanBuilder, n),
		strBytes: make([]int, n),
		slots:    make([]slot, n),
		unknown:  map[string]struct{}{},
		pred:     make([][]int, d.nodes),
		keyRaw:   make([][]byte, len(d.keyCols)),
	}
	var preds func(nd *node)
	preds = func(nd *node) {
		p := make([]int, len(nd.kids)+1)
		for i := range p {
			p[i] = -1
		}
		st.pred[nd.id] = p
		for _, k := range nd.kids {
			preds(k)
		}
	}
	preds(d.root)
	for i, k := range d.kinds {
		switch k {
		case kInt:
			st.ints[i] = array.NewInt64Builder(d.mem)
			st.builders[i] = st.ints[i]
		case kFloat:
			st.floats[i] = array.NewFloat64Builder(d.mem)
			st.builders[i] = st.floats[i]
		case kString, kJSON:
			st.strs[i] = array.NewStringBuilder(d.mem)
			st.builders[i] = st.strs[i]
		case kBool:
			st.bools[i] = array.NewBooleanBuilder(d.mem)
			st.builders[i] = st.bools[i]
		case kPicklist:
			st.picks[i] = newPicklist(d.mem, d.options[i])
			st.builders[i] = st.picks[i].idx
		case kDate:
			st.times[i] = array.NewTimestampBuilder(d.mem, d.schema.Field(i).Type.(*arrow.TimestampType))
			st.builders[i] = st.times[i]
		}
	}
	return st
}

// hugeText: a string value this long (lakefile.HugeValue, the one bound
// of a huge value) gets room of its exact size in its column's builder,
// instead of the next power of two (a 200 MB value would take 256 MB).
const hugeText = lakefile.HugeValue

// reserve makes room for n more rows in every builder.
func (st *state) reserve(n int) {
	if n <= st.room {
		return
	}
	for i, b := range st.builders {
		b.Reserve(n)
		if sb := st.strs[i]; sb != nil && st.room == 0 && st.rows == 0 {
			sb.ReserveData(st.strBytes[i] + st.strBytes[i]/8)
		}
	}
	st.room = n
}

// newRecord hands the builders' rows over as a record batch; the builders
// start empty.
func (d *Decoder) newRecord(st *state) arrow.RecordBatch {
	cols := make([]arrow.Array, len(st.builders))
	for i, b := range st.builders {
		if p := st.picks[i]; p != nil {
			cols[i] = p.newArray(d.schema.Field(i).Type)
			continue
		}
		if sb := st.strs[i]; sb != nil {
			st.strBytes[i] = sb.DataLen()
		}
		cols[i] = b.NewArray()
		if d.kinds[i] == kJSON {
			storage := cols[i]
			cols[i] = array.NewExtensionArrayWithStorage(schemas.JSONType, storage)
			storage.Release()
		}
	}
	rec := array.NewRecordBatch(d.schema, cols, int64(st.rows))
	for _, c := range cols {
		c.Release()
	}
	st.rows, st.room = 0, 0
	return rec
}

func (st *state) release() {
	for i, b := range st.builders {
		if p := st.picks[i]; p != nil {
			p.release()
			continue
		}
		b.Release()
	}
}

func (d *Decoder) put(st *state) {
	clear(st.unknown)
	select {
	case d.free <- st:
	default:
		st.release()
	}
}

// DecodePage decodes one results page. page is the page number requested,
// used in errors and rejects.
func (d *Decoder) DecodePage(page int, body []byte) (Result, error) {
	st := d.get()
	res, err := d.decode(st, page, body)
	if err != nil {
		// Drop whatever was appended; the builders must start clean.
		rec := d.newRecord(st)
		rec.Release()
	}
	d.put(st)
	return res, err
}

func (d *Decoder) decode(st *state, page int, body []byte) (Result, error) {
	res := Result{Info: service.PageInfo{TotalResults: -1, TotalPages: -1}}
	st.repaired = 0
	s := &scanner{buf: body}
	bad := func() error {
		return &DecodeError{Object: d.object, Page: page, Offset: s.at, Msg: s.msg}
	}
	var rowsErr error
	saw, ok := walkPage(s, &res.Info, func(perPage int) {
		// A row takes at least 2 bytes ("{}"): never reserve more rows
		// than the body can hold.
		st.reserve(min(perPage, len(body)/2))
	}, func() bool {
		start := s.pos
		if rowsErr = d.results(st, s, page, body, &res); rowsErr != nil {
			return false
		}
		if res.Info.Rows > 0 {
			res.Info.RowsHash = maphash.Bytes(rowsSeed, body[start:s.pos]) | 1
		}
		return true
	})
	switch {
	case rowsErr != nil:
		return res, rowsErr
	case !ok:
		return res, bad()
	case !saw:
		s.at = 0
		s.msg = `no "results" or "items" array in the page`
		return res, bad()
	}
	res.Record = d.newRecord(st)
	res.RepairedValues = st.repaired
	if len(st.unknown) > 0 {
		for k := range st.unknown {
			res.UnknownFields = append(res.UnknownFields, k)
		}
		sort.Strings(res.UnknownFields)
	}
	return res, nil
}

func (d *Decoder) results(st *state, s *scanner, page int, body []byte, res *Result) error {
	bad := func() error {
		return &DecodeError{Object: d.object, Page: page, Offset: s.at, Msg: s.msg}
	}
	switch s.peek() {
	case 'n':
		if !s.lit("null") {
			return bad()
		}
		return nil
	case '[':
		s.pos++
	default:
		s.fail("the rows are not an array")
		return bad()
	}
	st.keyBuf, st.keyEnds = st.keyBuf[:0], st.keyEnds[:0] // a page that failed may have left some
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for row := 0; ; row++ {
		if s.peek() != '{' {
			// null, a number, a text or an array where a row should be: a
			// row, rejected whole and kept in the rejects (it failed the
			// whole page, read again, and then its stream).
			if !d.notAnObject(st, s, page, row, res) {
				return bad()
			}
		} else if !d.rowAt(st, s, body, page, row, res) {
			return bad()
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			if len(d.keyCols) > 0 {
				res.Info.Keys = st.pageKeys()
			}
			return nil
		default:
			s.fail("expected ',' or ']' after a row")
			return bad()
		}
	}
}

// notAnObject reads a page's element that is not an object (s at it) as a
// row rejected whole: counted (the totals count it), its text in the
// rejects (a note of its size past the decoder's value limit), no key.
func (d *Decoder) notAnObject(st *state, s *scanner, page, row int, res *Result) bool {
	start := s.pos
	if !s.skip() {
		return false
	}
	raw := string(trimSpace(s.buf[start:s.pos]))
	if d.maxValue > 0 && len(raw) > d.maxValue {
		raw = fmt.Sprintf("(%d bytes, more than output.max_value_bytes: not kept)", len(raw))
	}
	res.Info.Rows++
	res.RejectedRows++
	res.Rejects = append(res.Rejects, Reject{Object: d.object, Page: page, Row: row,
		RawValue: raw, Reason: "the row is not an object", RawRow: raw})
	if len(d.keyCols) > 0 {
		st.keyEnds = append(st.keyEnds, -1)
	}
	return true
}

// rowAt reads the row object at s, commits it or leaves it out.
func (d *Decoder) rowAt(st *state, s *scanner, body []byte, page, row int, res *Result) bool {
	start := s.pos
	nrej := len(res.Rejects)
	if !d.row(st, s, page, row, res) {
		return false
	}
	res.Info.Rows++
	if len(d.keyCols) > 0 {
		d.appendKey(st)
	}
	if len(res.Rejects) > nrej {
		raw := st.rawRow(body, start, s.pos)
		for i := nrej; i < len(res.Rejects); i++ {
			res.Rejects[i].RawRow = raw
		}
	}
	// A value that does not fit, or is too long, is null in its row: the
	// row stays (its values' Rejects say what was sent). Only a row that
	// cannot be placed is left out.
	if st.dropRow {
		res.RejectedRows++
	} else {
		res.NulledValues += len(res.Rejects) - nrej - len(st.oversize)/2
		d.commit(st)
	}
	return true
}

// appendKey adds the row's key to the page's keys: its key values as
// their columns hold them (text quoted, a number in its shortest form, a
// date as its microseconds), joined by 0x1f, or nothing when one is
// missing ("" then). As held, not as sent: 1 and "1" in a text column,
// or 5 and 5.0 in an int column, are one value in the table, so one key
// (as sent they were two, and an item read twice whose id changed its
// JSON type was stored twice). The keys of a page share one string
// (pageKeys), not one each.
func (d *Decoder) appendKey(st *state) {
	for _, r := range st.keyRaw {
		if r == nil {
			st.keyEnds = append(st.keyEnds, -1)
			return
		}
	}
	for i, col := range d.keyCols {
		if i > 0 {
			st.keyBuf = append(st.keyBuf, 0x1f)
		}
		sl := &st.slots[col]
		switch d.kinds[col] {
		case kInt, kDate, kBool:
			st.keyBuf = strconv.AppendInt(st.keyBuf, sl.i, 10)
		case kFloat:
			st.keyBuf = strconv.AppendFloat(st.keyBuf, sl.f, 'g', -1, 64)
		case kString, kPicklist:
			st.keyBuf = strconv.AppendQuote(st.keyBuf, bstr(sl.b)) // no copy: quoted into keyBuf
		default:
			st.keyBuf = append(st.keyBuf, st.keyRaw[i]...)
		}
	}
	st.keyEnds = append(st.keyEnds, len(st.keyBuf))
}

// pageKeys returns the page's keys, slices of one string, and resets the
// buffers for the next page.
func (st *state) pageKeys() []string {
	all := string(st.keyBuf)
	keys := make([]string, len(st.keyEnds))
	from := 0
	for i, end := range st.keyEnds {
		if end < 0 {
			continue // no key: ""
		}
		keys[i] = all[from:end]
		from = end
	}
	st.keyBuf, st.keyEnds = st.keyBuf[:0], st.keyEnds[:0]
	return keys
}

// row parses one row object into st.slots. It returns false only on a
// structural error; values that do not fit become Rejects.
func (d *Decoder) row(st *state, s *scanner, page, row int, res *Result) bool {
	for i := range st.slots {
		st.slots[i].st = unset
	}
	for i := range st.keyRaw {
		st.keyRaw[i] = nil
	}
	st.dropRow = false
	st.oversize = st.oversize[:0]
	st.scratch = st.scratch[:0]
	if !d.members(st, s, d.root, page, row, res, 1) {
		return false
	}
	if d.defCol >= 0 && st.slots[d.defCol].st != hasValue {
		ds := &scanner{buf: d.defRaw}
		if reason, ok := d.value(st, ds, d.defCol, 1); !ok || reason != "" {
			st.slots[d.defCol].st = unset
		}
	}
	if d.keyRequired {
		for k, raw := range st.keyRaw {
			if raw == nil {
				res.Rejects = append(res.Rejects, Reject{Object: d.object, Page: page, Row: row,
					Field: d.keyIDs[k], RawValue: "null", Reason: "no value for the key field"})
				st.dropRow = true
			}
		}
	}
	return true
}

// members parses the members of an object (s at its '{') below node n.
func (d *Decoder) members(st *state, s *scanner, n *node, page, row int, res *Result, depth int) bool {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.pos++ // '{'
	if s.peek() == '}' {
		s.pos++
		return true
	}
	pred := st.pred[n.id]
	prev := len(n.kids) // the object's start
	for {
		key, esc, ok := s.str()
		if !ok || !s.expect(':') {
			return false
		}
		if esc {
			key, _ = unescape(nil, key)
		}
		ci, known := pred[prev], true
		if ci < 0 || n.keys[ci] != string(key) {
			ci, known = n.index[string(key)]
			if known {
				pred[prev] = ci
			}
		}
		if known {
			prev = ci
			if !d.member(st, s, n.kids[ci], page, row, res, depth) {
				return false
			}
		} else if !d.unknownMember(st, s, n, key, page, row, res, depth) {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return s.fail("expected ',' or '}' in a row")
		}
	}
}

// member parses the value of a known member.
func (d *Decoder) member(st *state, s *scanner, c *node, page, row int, res *Result, depth int) bool {
	p := s.peek()
	if c.col >= 0 && (p != '{' || c.kids == nil || d.kinds[c.col] == kJSON) {
		vstart := s.pos
		if d.maxValue > 0 && d.kinds[c.col] == kJSON && p != 'n' && len(s.buf)-vstart > d.maxValue {
			// A json value is compacted into scratch: measure it first
			// (when what is left of the page could be too long at all).
			if !s.skip() {
				return false
			}
			if s.pos-vstart > d.maxValue {
				st.slots[c.col].st = unset
				if k := d.keyOf[c.col]; k >= 0 {
					st.keyRaw[k] = nil
				}
				d.tooLong(st, res, page, row, d.names[c.col], vstart, s.pos)
				return true
			}
			s.pos = vstart
		}
		reason, ok := d.value(st, s, c.col, depth)
		if !ok {
			return false
		}
		switch {
		case d.maxValue > 0 && s.pos-vstart > d.maxValue:
			st.slots[c.col].st = unset
			d.tooLong(st, res, page, row, d.names[c.col], vstart, s.pos)
		case reason != "":
			st.slots[c.col].st = unset
			res.Misfits++
			res.Rejects = append(res.Rejects, Reject{
				Object: d.object, Page: page, Row: row,
				Field:    d.names[c.col],
				RawValue: string(trimSpace(s.buf[vstart:s.pos])),
				Reason:   reason,
			})
		}
		if k := d.keyOf[c.col]; k >= 0 {
			// The key is what the row holds now: a member given twice
			// holds its last value, and a misfit or null one none (the
			// first value's key would otherwise stay beside a null column).
			st.keyRaw[k] = nil
			if st.slots[c.col].st == hasValue {
				st.keyRaw[k] = trimSpace(s.buf[vstart:s.pos])
			}
		}
		return true
	}
	if p == '{' && c.kids != nil {
		return d.members(st, s, c, page, row, res, depth+1)
	}
	// The schema flattens this member's objects into columns, and it holds
	// something else here.
	if p == 'n' {
		return s.lit("null")
	}
	vstart := s.pos
	if !s.skip() {
		return false
	}
	if d.maxValue > 0 && s.pos-vstart > d.maxValue {
		d.tooLong(st, res, page, row, c.path, vstart, s.pos)
		return true
	}
	res.Misfits++
	res.Rejects = append(res.Rejects, Reject{
		Object: d.object, Page: page, Row: row, Field: c.path,
		RawValue: string(trimSpace(s.buf[vstart:s.pos])),
		Reason:   jsonKind(p) + " where the schema has an object (columns " + c.path + "__*)",
	})
	return true
}

// unknownMember passes over a member the schema does not know, naming it
// in UnknownFields (by its would-be field id) and, under
// WithUnknownRejected, keeping its value as a Reject. A member that is
// null, "" or blank text holds nothing to keep (each reads as null in any
// typed column, and the Inferrer types none), so it is passed over
// unnamed: a
// collection whose items all sent "error": "" warned on every run that
// its contract kept a field out, and read its pages twice to widen a
// schema the field never joined.
func (d *Decoder) unknownMember(st *state, s *scanner, n *node, key []byte, page, row int, res *Result, depth int) bool {
	vstart := s.pos
	if !s.skip() {
		return false
	}
	if v := trimSpace(s.buf[vstart:s.pos]); string(v) == "null" || blankText(v) {
		return true // nothing the Inferrer could type
	}
	name := key
	if n.path != "" {
		st.keyBuf = append(append(append(st.keyBuf[:0], n.path...), "__"...), key...)
		name = st.keyBuf
	}
	if _, seen := st.unknown[string(name)]; !seen {
		st.unknown[string(name)] = struct{}{}
	}
	if d.unknownRejects && d.maxValue > 0 && s.pos-vstart > d.maxValue {
		d.tooLong(st, res, page, row, string(name), vstart, s.pos)
		return true
	}
	if d.unknownRejects {
		res.Rejects = append(res.Rejects, Reject{
			Object: d.object, Page: page, Row: row, Field: string(name),
			RawValue: string(trimSpace(s.buf[vstart:s.pos])),
			Reason:   "field not in the schema, which the contract freeze keeps",
		})
	}
	return true
}

// tooLong records the value at body[start:end], longer than the limit,
// as an Oversize Reject: not copied, and not a reason to leave its row out.
func (d *Decoder) tooLong(st *state, res *Result, page, row int, field string, start, end int) {
	st.oversize = append(st.oversize, start, end)
	res.Rejects = append(res.Rejects, Reject{
		Object: d.object, Page: page, Row: row, Field: field,
		Reason:   fmt.Sprintf("value of %d bytes is longer than the limit of %d; stored as null", end-start, d.maxValue),
		Oversize: true, Start: start, End: end,
	})
}

// rawRow is the row's JSON text, body[start:end], with its values over
// the limit as null.
func (st *state) rawRow(body []byte, start, end int) string {
	if len(st.oversize) == 0 {
		return string(body[start:end])
	}
	var b strings.Builder
	at := start
	for i := 0; i < len(st.oversize); i += 2 {
		b.Write(body[at:st.oversize[i]])
		b.WriteString("null")
		at = st.oversize[i+1]
	}
	b.Write(body[at:end])
	return b.String()
}

func jsonKind(c byte) string {
	switch {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	}
	return "number"
}

// blankText reports whether raw is a JSON string that is empty or white
// space once its escapes are read ("", "  ", "\t"), as the Inferrer sees
// it (textKind).
func blankText(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return len(trimSpace(in)) == 0
	}
	var text string
	return json.Unmarshal(raw, &text) == nil && len(trimSpace([]byte(text))) == 0
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace[b[0]] {
		b = b[1:]
	}
	for len(b) > 0 && isSpace[b[len(b)-1]] {
		b = b[:len(b)-1]
	}
	return b
}

// value parses one value for column col. reason is non-empty when the value
// does not fit; ok is false on a structural error.
func (d *Decoder) value(st *state, s *scanner, col, depth int) (reason string, ok bool) {
	sl := &st.slots[col]
	k := d.kinds[col]
	c := s.peek()
	if k == kJSON {
		return d.jsonValue(st, s, sl, col, depth)
	}
	switch {
	case c == 'n':
		sl.st = isNull
		return "", s.lit("null")
	case c == '"':
		raw, esc, ok := s.str()
		if !ok {
			return "", false
		}
		if esc {
			from := len(st.scratch)
			var good bool
			st.scratch, good = unescape(st.scratch, raw)
			if !good {
				return "invalid escape in string", true
			}
			raw = st.scratch[from:]
		}
		if (k == kString || k == kPicklist) && !utf8.Valid(raw) {
			// Text that cannot be stored as sent is repaired, not lost:
			// invalid bytes become U+FFFD, and the page counts it.
			from := len(st.scratch)
			st.scratch = append(st.scratch, bytes.ToValidUTF8(raw, []byte("\uFFFD"))...)
			raw = st.scratch[from:]
			st.repaired++
		}
		if k == kString && d.redact {
			raw = redactURL(raw)
		}
		return d.text(sl, k, raw), true
	case c == '-' || (c >= '0' && c <= '9'):
		raw, ok := s.num()
		if !ok {
			return "", false
		}
		switch k {
		case kInt:
			v, good := service.ParseInt(raw)
			if !good {
				return "number is not a 64-bit integer", true
			}
			sl.st, sl.i = hasValue, v
		case kFloat:
			v, good := parseFloat(raw)
			if !good {
				return "not a finite number", true
			}
			sl.st, sl.f = hasValue, v
		case kString, kPicklist:
			if !validNumber(raw) {
				return "invalid number", true
			}
			sl.st, sl.b = hasValue, raw // kept as the number's text, past a float's range too
		case kDate:
			return "number in a date field (expected an ISO 8601 string)", true
		case kBool:
			return "number in a boolean field", true
		}
		return "", true
	case c == 't' || c == 'f':
		word := "true"
		if c == 'f' {
			word = "false"
		}
		if !s.lit(word) {
			return "", false
		}
		switch k {
		case kString, kPicklist:
			sl.st, sl.b = hasValue, s.buf[s.pos-len(word):s.pos]
			return "", true
		case kBool:
			sl.st, sl.i = hasValue, 0
			if c == 't' {
				sl.i = 1
			}
			return "", true
		}
		return "boolean in a " + kindName[k] + " field", true
	case c == '{' || c == '[':
		if !s.skip() {
			return "", false
		}
		what := "object"
		if c == '[' {
			what = "array"
		}
		return what + " in a " + kindName[k] + " field", true
	default:
		return "", s.skip()
	}
}

// jsonValue stores any value, compacted, as the JSON text of a json
// column (null as SQL NULL).
func (d *Decoder) jsonValue(st *state, s *scanner, sl *slot, col, depth int) (reason string, ok bool) {
	if s.peek() == 'n' {
		sl.st = isNull
		return "", s.lit("null")
	}
	from := len(st.scratch)
	j := jsonWriter{s: s, secret: d.secret[col]}
	st.scratch, ok = j.value(st.scratch, depth)
	if !ok {
		return "", false
	}
	if j.bad != "" {
		return j.bad, true
	}
	raw := st.scratch[from:]
	if !utf8.Valid(raw) {
		st.scratch = append(st.scratch, bytes.ToValidUTF8(raw, []byte("\uFFFD"))...)
		raw = st.scratch[from+len(raw):]
		st.repaired++
	}
	sl.st, sl.b = hasValue, raw
	return "", true
}

var kindName = [...]string{kInt: "int", kFloat: "float", kString: "string", kPicklist: "picklist", kDate: "date", kBool: "boolean", kJSON: "json"}

// redactURL returns b with the credentials of an http(s) URL replaced
// (see service.RedactURL); other text comes back as it is.
func redactURL(b []byte) []byte {
	if !(bytes.HasPrefix(b, []byte("http://")) || bytes.HasPrefix(b, []byte("https://"))) || bytes.IndexAny(b, "@?#") < 0 {
		return b
	}
	u, err := url.Parse(string(b))
	if err != nil {
		return []byte("(unparseable URL, not stored)")
	}
	return []byte(service.RedactURL(u))
}

// text stores a JSON string's decoded bytes for a column of kind k.
func (d *Decoder) text(sl *slot, k kind, b []byte) string {
	switch k {
	case kString, kPicklist:
		if b == nil {
			b = []byte{}
		}
		sl.st, sl.b = hasValue, b
		return ""
	}
	t := trimSpace(b)
	if len(t) == 0 { // "" in a typed field is an empty value: null
		sl.st = isNull
		return ""
	}
	switch k {
	case kInt:
		v, ok := service.ParseInt(t)
		if !ok {
			return "text is not an integer"
		}
		sl.st, sl.i = hasValue, v
	case kFloat:
		if t[len(t)-1] == '%' {
			t = t[:len(t)-1]
		}
		v, ok := parseFloat(t)
		if !ok {
			return "text is not a number"
		}
		sl.st, sl.f = hasValue, v
	case kDate:
		v, ok := service.ParseTimestamp(t)
		if !ok {
			return "not an ISO 8601 date or date-time"
		}
		sl.st, sl.i = hasValue, v
	case kBool:
		v, ok := parseBool(t)
		if !ok {
			return "text is not a boolean"
		}
		sl.st, sl.i = hasValue, v
	}
	return ""
}

// parseBool reads true or false in any case as 1 or 0.
func parseBool(t []byte) (int64, bool) {
	switch {
	case bytes.EqualFold(t, []byte("true")):
		return 1, true
	case bytes.EqualFold(t, []byte("false")):
		return 0, true
	}
	return 0, false
}

// commit appends the parsed row in st.slots to the builders.
func (d *Decoder) commit(st *state) {
	if st.room == 0 {
		st.reserve(max(st.rows, 64))
	}
	for i, k := range d.kinds {
		sl := &st.slots[i]
		valid := sl.st == hasValue
		switch k {
		case kInt:
			if valid {
				st.ints[i].UnsafeAppend(sl.i)
			} else {
				st.ints[i].UnsafeAppendBoolToBitmap(false)
			}
		case kFloat:
			if valid {
				st.floats[i].UnsafeAppend(sl.f)
			} else {
				st.floats[i].UnsafeAppendBoolToBitmap(false)
			}
		case kString, kJSON:
			if valid {
				if sb := st.strs[i]; len(sl.b) >= hugeText && sb.DataCap()-sb.DataLen() < len(sl.b) {
					// Room for this value exactly: Append would round up to
					// the next power of two.
					sb.ReserveData(len(sl.b))
				}
				st.strs[i].BinaryBuilder.Append(sl.b)
			} else {
				st.strs[i].AppendNull()
			}
		case kBool:
			if valid {
				st.bools[i].UnsafeAppend(sl.i != 0)
			} else {
				st.bools[i].UnsafeAppendBoolToBitmap(false)
			}
		case kPicklist:
			p := st.picks[i]
			if valid {
				p.idx.UnsafeAppend(p.index(sl.b))
			} else {
				p.idx.UnsafeAppendBoolToBitmap(false)
			}
		case kDate:
			if valid {
				st.times[i].UnsafeAppend(arrow.Timestamp(sl.i))
			} else {
				st.times[i].UnsafeAppendBoolToBitmap(false)
			}
		}
	}
	st.rows++
	st.room--
}

// picklist builds a picklist column: int32 indices into a dictionary that
// starts as the field's options, in their order, so that every batch of the
// object has the same dictionary (the Parquet writer then writes the
// indices as they are). A value that is not an option is added after them,
// for this batch only.
type picklist struct {
	mem     memory.Allocator
	idx     *array.Int32Builder
	options int      // values[:options] are the field's options
	values  []string // the batch's dictionary
	last    int32    // index of the last value looked up
	byValue map[string]int32
}

// linearMax is the dictionary size up to which index scans the values
// instead of using a map.
const linearMax = 16

func newPicklist(mem memory.Allocator, options []string) *picklist {
	p := &picklist{mem: mem, idx: array.NewInt32Builder(mem), options: len(options), values: slices.Clone(options)}
	p.reset()
	return p
}

func (p *picklist) reset() {
	p.values = p.values[:p.options]
	p.last = 0
	p.byValue = nil
	if len(p.values) > linearMax {
		p.byValue = make(map[string]int32, len(p.values))
		for i, v := range p.values {
			p.byValue[v] = int32(i)
		}
	}
}

// index returns v's index in the dictionary, adding it if it is new.
func (p *picklist) index(v []byte) int32 {
	if int(p.last) < len(p.values) && p.values[p.last] == string(v) {
		return p.last
	}
	if p.byValue != nil {
		if i, ok := p.byValue[string(v)]; ok {
			p.last = i
			return i
		}
	} else {
		for i, x := range p.values {
			if x == string(v) {
				p.last = int32(i)
				return p.last
			}
		}
	}
	i := int32(len(p.values))
	p.values = append(p.values, string(v))
	if p.byValue != nil {
		p.byValue[p.values[i]] = i
	} else if len(p.values) > linearMax {
		p.byValue = make(map[string]int32, 2*len(p.values))
		for j, x := range p.values {
			p.byValue[x] = int32(j)
		}
	}
	p.last = i
	return i
}

// newArray hands the batch's indices over as a dictionary array of type dt
// and starts the next batch.
func (p *picklist) newArray(dt arrow.DataType) arrow.Array {
	db := array.NewStringBuilder(p.mem)
	defer db.Release()
	db.AppendValues(p.values, nil)
	dict := db.NewArray()
	defer dict.Release()
	idx := p.idx.NewArray()
	defer idx.Release()
	p.reset()
	return array.NewDictionaryArray(dt, idx, dict)
}

func (p *picklist) release() { p.idx.Release() }
