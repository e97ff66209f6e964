package service

import "errors"

// PageInfo is what a page says about itself.
type PageInfo struct {
	Page, ResultsPerPage int   // as echoed by the page; 0 if absent
	TotalResults         int64 // -1 if absent
	TotalPages           int   // -1 if absent
	Rows                 int   // rows in "results"
	// RowsHash identifies the page's rows (a hash of the bytes of its
	// results array), 0 when the PageFunc does not say: two pages with the
	// same rows under different page numbers are a paging fault.
	RowsHash uint64
	// Keys, when the PageFunc's decoder knows the stream's key fields,
	// hold each row's key in page order (rejected rows included; "" for a
	// row without one). A key read twice is an integrity failure.
	Keys []string
}

// ErrMalformedPage is what a PageFunc wraps when a results page is not
// valid JSON of the expected shape (a body cut short with a matching
// Content-Length, say). ReadObject then fetches the page again, within the
// client's retry budget, as it does for a dropped connection: a PageFunc
// must not have kept anything of a page it rejects this way.
var ErrMalformedPage = errors.New("malformed results page")
