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
// batch; RawRow holds the row as the service sent it.
type Reject struct {
	Object   string
	Page     int
	Row      int // 0-based position of the row in the page's results
	Field    string
	RawValue string // the JSON text of the value
	Reason   string
	RawRow   string // the JSON text of the whole row
}
