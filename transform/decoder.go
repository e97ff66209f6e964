package transform

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/schemas"
)

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
	object string
	schema *arrow.Schema
	kinds  []kind
	index  map[string]int
	mem    memory.Allocator
	free   chan *state
}

// NewDecoder prepares a decoder for pages of the object whose schema is s
// (built by schemas.FromDescribe).
func NewDecoder(s *arrow.Schema, opts ...Option) (*Decoder, error) {
	d := &Decoder{
		object: schemas.Object(s),
		schema: s,
		kinds:  make([]kind, s.NumFields()),
		index:  make(map[string]int, s.NumFields()),
		mem:    memory.DefaultAllocator,
		free:   make(chan *state, 16),
	}
	for _, o := range opts {
		o(d)
	}
	for i, f := range s.Fields() {
		d.index[f.Name] = i
		switch {
		case arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Int64):
			d.kinds[i] = kInt
		case arrow.TypeEqual(f.Type, arrow.PrimitiveTypes.Float64):
			d.kinds[i] = kFloat
		case arrow.TypeEqual(f.Type, arrow.BinaryTypes.String):
			d.kinds[i] = kString
		case arrow.TypeEqual(f.Type, schemas.PicklistType):
			d.kinds[i] = kPicklist
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
			st.rb.Release()
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

type state struct {
	rb      *array.RecordBuilder
	ints    []*array.Int64Builder
	floats  []*array.Float64Builder
	strs    []*array.StringBuilder
	dicts   []*array.BinaryDictionaryBuilder
	times   []*array.TimestampBuilder
	slots   []slot
	scratch []byte
	unknown map[string]struct{}
}

func (d *Decoder) get() *state {
	select {
	case st := <-d.free:
		return st
	default:
	}
	n := d.schema.NumFields()
	st := &state{
		rb:      array.NewRecordBuilder(d.mem, d.schema),
		ints:    make([]*array.Int64Builder, n),
		floats:  make([]*array.Float64Builder, n),
		strs:    make([]*array.StringBuilder, n),
		dicts:   make([]*array.BinaryDictionaryBuilder, n),
		times:   make([]*array.TimestampBuilder, n),
		slots:   make([]slot, n),
		unknown: map[string]struct{}{},
	}
	for i, k := range d.kinds {
		switch b := st.rb.Field(i); k {
		case kInt:
			st.ints[i] = b.(*array.Int64Builder)
		case kFloat:
			st.floats[i] = b.(*array.Float64Builder)
		case kString:
			st.strs[i] = b.(*array.StringBuilder)
		case kPicklist:
			st.dicts[i] = b.(*array.BinaryDictionaryBuilder)
		case kDate:
			st.times[i] = b.(*array.TimestampBuilder)
		}
	}
	return st
}

func (d *Decoder) put(st *state) {
	clear(st.unknown)
	select {
	case d.free <- st:
	default:
		st.rb.Release()
	}
}

// DecodePage decodes one results page. page is the page number requested,
// used in errors and rejects.
func (d *Decoder) DecodePage(page int, body []byte) (Result, error) {
	st := d.get()
	res, err := d.decode(st, page, body)
	if err != nil {
		// Drop whatever was appended; the builder must start clean.
		rec := st.rb.NewRecordBatch()
		rec.Release()
	}
	d.put(st)
	return res, err
}

func (d *Decoder) decode(st *state, page int, body []byte) (Result, error) {
	res := Result{Info: extract.PageInfo{TotalResults: -1, TotalPages: -1}}
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
				st.rb.Reserve(res.Info.ResultsPerPage)
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
				if err := d.results(st, s, page, body, &res); err != nil {
					return res, err
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
	res.Record = st.rb.NewRecordBatch()
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
	for {
		key, esc, ok := s.str()
		if !ok || !s.expect(':') {
			return false
		}
		if esc {
			key, _ = unescape(nil, key)
		}
		col, known := d.index[string(key)]
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
					Field:    d.schema.Field(col).Name,
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
		if !utf8.Valid(b) {
			return "invalid UTF-8 in string"
		}
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
	for i, k := range d.kinds {
		sl := &st.slots[i]
		if sl.st != hasValue {
			st.rb.Field(i).AppendNull()
			continue
		}
		switch k {
		case kInt:
			st.ints[i].Append(sl.i)
		case kFloat:
			st.floats[i].Append(sl.f)
		case kString:
			st.strs[i].BinaryBuilder.Append(sl.b)
		case kPicklist:
			_ = st.dicts[i].Append(sl.b) // errors only for non-byte inputs
		case kDate:
			st.times[i].Append(arrow.Timestamp(sl.i))
		}
	}
}
