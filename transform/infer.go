package transform

import (
	"bytes"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/service"
)

// Flattening limits: objects are flattened into parent__child columns down
// to maxFlatten members deep (a__b__c); an object deeper than that, or one
// with more than maxMembers distinct members (a map keyed by ids, say), is
// one json column.
const (
	maxFlatten = 3
	maxMembers = 64
)

// What an Inferrer saw at one member path.
const (
	sBool      uint16 = 1 << iota
	sInt              // a JSON integer
	sFloat            // a JSON number that is not a 64-bit integer
	sIntText          // a string holding an integer
	sFloatText        // a string holding a number
	sBoolText         // "true" or "false"
	sTimeText         // an ISO 8601 date or date-time
	sText             // any other string
	sObject           // an object, flattened
	sArray            // an array
	sDeep             // an object below maxFlatten

	sNumbers = sInt | sFloat
	sScalars = sBool | sInt | sFloat | sIntText | sFloatText | sBoolText | sTimeText | sText
)

type inode struct {
	path  []string
	seen  uint16
	keys  []string
	index map[string]int
	kids  []*inode
}

func (n *inode) child(key string) *inode {
	if i, ok := n.index[key]; ok {
		return n.kids[i]
	}
	c := &inode{path: append(slices.Clone(n.path), key), index: map[string]int{}}
	n.index[key] = len(n.kids)
	n.keys = append(n.keys, key)
	n.kids = append(n.kids, c)
	return c
}

// Inferrer learns a collection's fields from its items, the way a report
// object's come from /describe: every member a column named as the service
// names it, a nested object flattened into parent__child columns (dlt's
// convention), arrays and deeper objects as json columns. A member's type
// is the narrowest that holds every value seen: boolean, int, float, date
// (ISO 8601 text), string; numbers sent as text count as numbers when real
// numbers are seen too; a member seen both as an object or array and as
// anything else is json. A member only ever null gets no column. The
// Decoder accepts every value whose type the Inferrer chose, so a schema
// inferred from all the pages it decodes leaves no value rejected for its
// type.
//
// An Inferrer is not safe for concurrent use.
type Inferrer struct {
	name    string
	root    *inode
	scratch []byte // a string value's decoded bytes
}

// NewInferrer starts inferring the fields of the collection object.
func NewInferrer(object string) *Inferrer {
	return &Inferrer{name: object, root: &inode{index: map[string]int{}}}
}

// Page observes the items of one list page, in any shape DecodePage reads.
// page is used in errors only.
func (in *Inferrer) Page(page int, body []byte) error {
	s := &scanner{buf: body}
	var info service.PageInfo
	saw, ok := walkPage(s, &info, nil, func() bool {
		if s.peek() == 'n' {
			return s.lit("null")
		}
		if s.peek() != '[' {
			return s.fail("the rows are not an array")
		}
		return s.array(func() bool {
			if s.peek() != '{' {
				return s.skip() // a row the decoder rejects whole: no member
			}
			return in.object(s, in.root, 1)
		})
	})
	if !ok || !saw {
		if ok {
			s.at, s.msg = 0, `no "results" or "items" array in the page`
		}
		return &DecodeError{Object: in.name, Page: page, Offset: s.at, Msg: s.msg}
	}
	return nil
}

func (in *Inferrer) object(s *scanner, n *inode, depth int) bool {
	return s.object(func(key []byte) bool {
		if i, ok := n.index[string(key)]; ok { // no allocation for a known member
			return in.value(s, n.kids[i], depth)
		}
		return in.value(s, n.child(string(key)), depth)
	})
}

func (in *Inferrer) value(s *scanner, c *inode, depth int) bool {
	switch ch := s.peek(); {
	case ch == 'n':
		return s.lit("null")
	case ch == 't':
		c.seen |= sBool
		return s.lit("true")
	case ch == 'f':
		c.seen |= sBool
		return s.lit("false")
	case ch == '"':
		raw, esc, ok := s.str()
		if !ok {
			return false
		}
		if esc {
			var good bool
			if in.scratch, good = unescape(in.scratch[:0], raw); !good {
				c.seen |= sText
				return true
			}
			raw = in.scratch
		}
		c.seen |= textKind(raw)
		return true
	case ch == '{':
		if depth >= maxFlatten {
			c.seen |= sDeep
			return s.skip()
		}
		c.seen |= sObject
		return in.object(s, c, depth+1)
	case ch == '[':
		c.seen |= sArray
		return s.skip()
	case ch == '-' || (ch >= '0' && ch <= '9'):
		raw, ok := s.num()
		if !ok {
			return false
		}
		switch {
		case isInt(raw):
			c.seen |= sInt
		case isFloat(raw):
			c.seen |= sFloat
		default:
			c.seen |= sText // an integer past 64 bits, a float past its range: kept as text
		}
		return true
	}
	return s.skip()
}

// isInt reports whether a JSON number is an integer the Decoder stores in
// an int column as it is (no fraction, no exponent).
func isInt(raw []byte) bool {
	if _, ok := service.ParseInt(raw); !ok {
		return false
	}
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// emptyMemberID names the column of an item's member called "".
const emptyMemberID = "empty_member_name"

// isFloat reports whether a number's text is one the Decoder stores in a
// float column without loss: finite, and not an integer (an integer isInt
// refuses is past 64 bits, and a float would drop its last digits:
// 18446744073709551615 became 1.8446744073709552e+19).
func isFloat(raw []byte) bool {
	if !validNumber(raw) {
		return false
	}
	if bytes.IndexAny(raw, ".eE") < 0 {
		return false // an integer isInt refused
	}
	_, ok := parseFloat(raw)
	return ok
}

// textKind classifies a string by what the Decoder could read it as.
func textKind(raw []byte) uint16 {
	t := trimSpace(raw)
	switch {
	case len(t) == 0:
		return 0 // "" reads as null in any typed column
	case isInt(t):
		return sIntText
	case isFloat(t):
		return sFloatText
	}
	if _, ok := parseBool(t); ok {
		return sBoolText
	}
	if len(t) >= 10 && t[4] == '-' {
		if _, ok := service.ParseTimestamp(t); ok {
			return sTimeText
		}
	}
	return sText
}

// typeOf is the field type for what was seen at a member; "" for none.
func typeOf(seen uint16) string {
	scalars := seen & sScalars
	switch {
	case seen&(sObject|sArray|sDeep) != 0:
		return "json"
	case scalars == 0:
		return ""
	case scalars&sBool != 0 && scalars&^(sBool|sBoolText) == 0:
		return "boolean"
	case scalars&sNumbers != 0 && scalars&^(sNumbers|sIntText|sFloatText) == 0:
		if scalars&(sFloat|sFloatText) != 0 {
			return "float"
		}
		return "int"
	case scalars == sTimeText:
		return "date"
	}
	return "string"
}

// Fields returns the fields the items seen so far call for, in the order
// their members first appeared.
func (in *Inferrer) Fields() []service.Field {
	asJSON := map[*inode]bool{}
	for {
		var out []service.Field
		ids := map[string]*inode{}
		var clash *inode
		var walk func(n *inode)
		walk = func(n *inode) {
			for _, c := range n.kids {
				if clash != nil {
					return
				}
				flatten := c.seen&sObject != 0 && c.seen&^sObject == 0 && len(c.kids) <= maxMembers && !asJSON[c]
				if flatten {
					walk(c)
					continue
				}
				t := typeOf(c.seen)
				if c.seen&sObject != 0 {
					t = "json"
				}
				if t == "" {
					continue
				}
				id := strings.Join(c.path, "__")
				if id == "" {
					// A member named "" (legal JSON): a column of a name of
					// its own, the member kept in its path (an empty id
					// failed the stream's schema).
					id = emptyMemberID
				}
				if prev, dup := ids[id]; dup {
					// "a__b" sent as a member and a.b nested: the nested
					// one's top object stays one json column.
					clash = c
					if len(prev.path) > len(c.path) {
						clash = prev
					}
					return
				}
				ids[id] = c
				f := service.Field{ID: id, DisplayName: strings.Join(c.path, "."), Type: t}
				if len(c.path) > 1 || id == emptyMemberID {
					f.Path = slices.Clone(c.path)
				}
				out = append(out, f)
			}
		}
		walk(in.root)
		if clash == nil {
			return out
		}
		top := in.root.kids[in.root.index[clash.path[0]]]
		asJSON[top] = true
	}
}
