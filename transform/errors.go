package transform

import (
	"fmt"

	"github.com/sepipe/sepipe/service"
)

// ErrMalformedPage is wrapped by every *DecodeError: the page is not the
// JSON shape of a results page. A refetch may help (a truncated body), so
// callers may retry on it.
var ErrMalformedPage = service.ErrMalformedPage

// DecodeError reports a page that could not be decoded at all.
type DecodeError struct {
	Object string
	Page   int
	Offset int    // byte offset in the page body
	Msg    string // what was expected
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("object %q page %d: %v at byte %d: %s", e.Object, e.Page, ErrMalformedPage, e.Offset, e.Msg)
}

func (e *DecodeError) Unwrap() error { return ErrMalformedPage }

// Reject is one value that did not fit its field. Its row is not in the
// batch (unless rows are kept, or the value was only too long); RawRow
// holds the row as the service sent it.
type Reject struct {
	Object   string
	Page     int
	Row      int // 0-based position of the row in the page's results
	Field    string
	RawValue string // the JSON text of the value; empty when Oversize
	Reason   string
	RawRow   string // the JSON text of the whole row, values too long for RawValue as null

	// Oversize: the value's JSON text was longer than the decoder's limit
	// (WithMaxValueBytes). It is not copied: it lies in the page body at
	// [Start, End), for the caller to keep before it reuses the body; the
	// row itself is kept with the field null.
	Oversize   bool
	Start, End int
	// RawFile is where the caller kept an oversize value (set by the
	// caller, not the decoder).
	RawFile string
}
