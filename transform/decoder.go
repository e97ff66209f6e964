package transform

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/schemas"
)

// rowsSeed seeds PageInfo.RowsHash: stable within a process.
var rowsSeed = maphash.MakeSeed()

// PageDecoder turns one results page into a record batch. Implementations
// are safe for concurrent use.
type PageDecoder interface {
	DecodePage(page int, body []byte) (Result, error)
}

var _ PageDecoder = (*Decoder)(nil)

// Result is one decoded page.
type Result struct {
	// Record holds the page's valid rows in page order; never nil (it may
	// have zero rows). The caller owns it and must Release it.
	Record arrow.RecordBatch
	// Info is what the page said about itself; Info.Rows counts every row
	// in results, valid or rejected.
	Info extract.PageInfo
	// Rejects lists each value that did not fit its field.
	Rejects []Reject
	// RejectedRows counts rows left out of Record (a row with two bad
	// values has two Rejects but counts once).
	RejectedRows int
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
)

// Option configures a Decoder.
type Option func(*Decoder)

// WithAllocator sets the allocator for record batches (default
// memory.DefaultAllocator).
func WithAllocator(mem memory.Allocator) Option { return func(d *Decoder) { d.mem = mem } }

// Decoder decodes the pages of one object. Build it with NewDecoder and
// Release it when done.
type Decoder struct {
	object  string
	schema  *arrow.Schema
	kinds   []kind
	names   []string // field names, by column
	index   map[string]int
	options [][]string // picklist options, by column (nil for other kinds)
	mem     memory.Allocator
	free    chan *state
}

// NewDecoder prepares a decoder for pages of the object whose schema is s
// (built by schemas.FromDescribe).
func NewDecoder(s *arrow.Schema, opts ...Option) (*Decoder, error) {
	d := &Decoder{
		object:  schemas.Object(s),
		schema:  s,
		kinds:   make([]kind, s.NumFields()),
		names:   make([]string, s.NumFields()),
		index:   make(map[string]int, s.NumFields()),
		options: make([][]string, s.NumFields()),
		mem:     memory.DefaultAllocator,
		free:    make(chan *state, 16),
	}
	for _, o := range opts {
		o(d)
	}
	for i, f := range s.Fields() {
		// Rows are keyed by the service's field ids (a column may be named
		// otherwise, see schemas.FieldID).
		d.index[schemas.FieldID(f)] = i
		d.names[i] = schemas.FieldID(f)
		switch {
		case arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Int64):
			d.kinds[i] = kInt
		case arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Float64):
			d.kinds[i] = kFloat
		case arrow.TypeEqual(f.Type, arrow.BinaryTypes.String):
			d.kinds[i] = kString
		case arrow.TypeEqual(f.Type, schemas.PicklistType):
			d.kinds[i] = kPicklist
			for _, o := range schemas.Options(f) {
				if !slices.Contains(d.options[i], o) {
					d.options[i] = append(d.options[i], o)
				}
			}
		case arrow.TypeEqual(f.Type, schemas.TimestampType):
			d.kinds[i] = kDate
		default:
			return nil, fmt.Errorf("transform: object %q field %q: unsupported Arrow type %s", d.object, f.Name, f.Type)
		}
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
	rows     int   // rows appended to the builders
	room     int   // rows the builders can take without growing
	strBytes []int // string bytes per column in the last batch, to reserve

	slots    []slot
	scratch  []byte
	repaired int // values repaired in the page being decoded
	unknown  map[string]struct{}
	// next predicts the column of the next key: next[c] is the column
	// whose key followed column c's in the last row (next[n]: the first
	// key of a row). Rows of one page almost always list their keys in the
	// same order, so most keys are found by one comparison, not a map.
	next []int
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
		strBytes: make([]int, n),
		slots:    make([]slot, n),
		unknown:  map[string]struct{}{},
		next:     make([]int, n+1),
	}
	for i, k := range d.kinds {
		st.next[i] = -1
		switch k {
		case kInt:
			st.ints[i] = array.NewInt64Builder(d.mem)
			st.builders[i] = st.ints[i]
		case kFloat:
			st.floats[i] = array.NewFloat64Builder(d.mem)
			st.builders[i] = st.floats[i]
		case kString:
			st.strs[i] = array.NewStringBuilder(d.mem)
			st.builders[i] = st.strs[i]
		case kPicklist:
			st.picks[i] = newPicklist(d.mem, d.options[i])
			st.builders[i] = st.picks[i].idx
		case kDate:
			st.times[i] = array.NewTimestampBuilder(d.mem, d.schema.Field(i).Type.(*arrow.TimestampType))
			st.builders[i] = st.times[i]
		}
	}
	st.next[n] = -1
	return st
}

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
	res := Result{Info: extract.PageInfo{TotalResults: -1, TotalPages: -1}}
	st.repaired = 0
	s := &scanner{buf: body}
	bad := func() error {
		return &DecodeError{Object: d.object, Page: page, Offset: s.at, Msg: s.msg}
	}
	if !s.expect('{') {
		return res, bad()
	}
	sawResults := false
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			key, esc, ok := s.str()
			if !ok || !s.expect(':') {
				return res, bad()
			}
			if esc {
				key, _ = unescape(nil, key)
			}
			switch string(key) {
			case "page":
				v, ok := s.header()
				if !ok {
					return res, bad()
				}
				res.Info.Page = int(max(v, 0))
			case "resultsPerPage":
				v, ok := s.header()
				if !ok {
					return res, bad()
				}
				res.Info.ResultsPerPage = int(max(v, 0))
				// A row takes at least 2 bytes ("{}"): never reserve
				// more rows than the body can hold.
				st.reserve(min(res.Info.ResultsPerPage, len(body)/2))
			case "totalResults":
				v, ok := s.header()
				if !ok {
					return res, bad()
				}
				res.Info.TotalResults = v
			case "totalPages":
				v, ok := s.header()
				if !ok {
					return res, bad()
				}
				res.Info.TotalPages = int(v)
			case "results":
				sawResults = true
				start := s.pos
				if err := d.results(st, s, page, body, &res); err != nil {
					return res, err
				}
				if res.Info.Rows > 0 {
					res.Info.RowsHash = maphash.Bytes(rowsSeed, body[start:s.pos]) | 1
				}
			default:
				if !s.skip(0) {
					return res, bad()
				}
			}
			if s.peek() == ',' {
				s.pos++
				continue
			}
			if !s.expect('}') {
				return res, bad()
			}
			break
		}
	}
	if s.peek() != 0 {
		s.fail("unexpected data after the page object")
		return res, bad()
	}
	if !sawResults {
		s.at = 0
		s.msg = `no "results" array in the page`
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

// header reads a page-level integer; null reads as -1.
func (s *scanner) header() (int64, bool) {
	switch c := s.peek(); {
	case c == 'n':
		return -1, s.lit("null")
	case c == '"':
		raw, _, ok := s.str()
		if !ok {
			return 0, false
		}
		v, ok := parseInt(raw)
		if !ok {
			return 0, s.fail("page header is not an integer")
		}
		return v, true
	default:
		raw, ok := s.num()
		if !ok {
			return 0, false
		}
		v, ok := parseInt(raw)
		if !ok {
			return 0, s.fail("page header is not an integer")
		}
		return v, true
	}
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
		s.fail(`"results" is not an array`)
		return bad()
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for row := 0; ; row++ {
		if s.peek() != '{' {
			s.fail("a row of results is not an object")
			return bad()
		}
		start := s.pos
		nrej := len(res.Rejects)
		if !d.row(st, s, page, row, res) {
			return bad()
		}
		res.Info.Rows++
		if len(res.Rejects) > nrej {
			raw := string(body[start:s.pos])
			for i := nrej; i < len(res.Rejects); i++ {
				res.Rejects[i].RawRow = raw
			}
			res.RejectedRows++
		} else {
			d.commit(st)
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			s.fail("expected ',' or ']' after a row")
			return bad()
		}
	}
}

// row parses one row object into st.slots. It returns false only on a
// structural error; values that do not fit become Rejects.
func (d *Decoder) row(st *state, s *scanner, page, row int, res *Result) bool {
	for i := range st.slots {
		st.slots[i].st = unset
	}
	st.scratch = st.scratch[:0]
	s.pos++ // '{'
	if s.peek() == '}' {
		s.pos++
		return true
	}
	prev := len(st.slots) // the row's start
	for {
		key, esc, ok := s.str()
		if !ok || !s.expect(':') {
			return false
		}
		if esc {
			key, _ = unescape(nil, key)
		}
		col, known := st.next[prev], true
		if col < 0 || d.names[col] != string(key) {
			col, known = d.index[string(key)]
			if known {
				st.next[prev] = col
			}
		}
		if known {
			prev = col
		}
		if !known {
			if _, seen := st.unknown[string(key)]; !seen {
				st.unknown[string(key)] = struct{}{}
			}
			if !s.skip(1) {
				return false
			}
		} else {
			vstart := s.pos
			reason, ok := d.value(st, s, col)
			if !ok {
				return false
			}
			if reason != "" {
				res.Rejects = append(res.Rejects, Reject{
					Object: d.object, Page: page, Row: row,
					Field:    d.names[col],
					RawValue: string(trimSpace(s.buf[vstart:s.pos])),
					Reason:   reason,
				})
			}
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

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace[b[0]] {
		b = b[1:]
	}
	return b
}

// value parses one value for column col. reason is non-empty when the value
// does not fit; ok is false on a structural error.
func (d *Decoder) value(st *state, s *scanner, col int) (reason string, ok bool) {
	sl := &st.slots[col]
	k := d.kinds[col]
	c := s.peek()
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
		return d.text(sl, k, raw), true
	case c == '-' || (c >= '0' && c <= '9'):
		raw, ok := s.num()
		if !ok {
			return "", false
		}
		switch k {
		case kInt:
			v, good := parseInt(raw)
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
			if _, good := parseFloat(raw); !good {
				return "invalid number", true
			}
			sl.st, sl.b = hasValue, raw // kept as the number's text
		case kDate:
			return "number in a date field (expected an ISO 8601 string)", true
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
		if k == kString || k == kPicklist {
			sl.st, sl.b = hasValue, s.buf[s.pos-len(word):s.pos]
			return "", true
		}
		return "boolean in a " + kindName[k] + " field", true
	case c == '{' || c == '[':
		if !s.skip(1) {
			return "", false
		}
		what := "object"
		if c == '[' {
			what = "array"
		}
		return what + " in a " + kindName[k] + " field", true
	default:
		return "", s.skip(1)
	}
}

var kindName = [...]string{kInt: "int", kFloat: "float", kString: "string", kPicklist: "picklist", kDate: "date"}

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
	for len(t) > 0 && isSpace[t[len(t)-1]] {
		t = t[:len(t)-1]
	}
	if len(t) == 0 { // "" in a typed field is an empty value: null
		sl.st = isNull
		return ""
	}
	switch k {
	case kInt:
		v, ok := parseInt(t)
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
		v, ok := parseTimestamp(t)
		if !ok {
			return "not an ISO 8601 date or date-time"
		}
		sl.st, sl.i = hasValue, v
	}
	return ""
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
		case kString:
			if valid {
				st.strs[i].BinaryBuilder.Append(sl.b)
			} else {
				st.strs[i].AppendNull()
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
