package extract

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Sentinels for control flow. Test for them with errors.Is.
var (
	// ErrUnauthorized: the service answered 401; the reporting access token
	// is missing, invalid or expired. Not retried.
	ErrUnauthorized = errors.New("extract: unauthorized")
	// ErrForbidden: the service answered 403; the reporting access token is
	// valid but not allowed to read Coach reports. Not retried.
	ErrForbidden = errors.New("extract: forbidden")
	// ErrNotFound: the service answered 404 (unknown object). Not retried.
	ErrNotFound = errors.New("extract: not found")
	// ErrRateLimited: the service answered 429 and kept doing so until the
	// retry budget (attempts or total wait) ran out.
	ErrRateLimited = errors.New("extract: rate limited")
	// ErrRetriesExhausted: a retryable failure persisted until the retry
	// budget ran out. The error also wraps the last cause.
	ErrRetriesExhausted = errors.New("extract: retries exhausted")
)

// APIError is a non-success answer of the service. Both error body styles
// are decoded: v3 {"response":{"code","name","message"}} fills Code, Name
// and Message; v4 application/problem+json {type,title,detail,status,meta}
// fills Type, Title and Message (detail plus meta reasons). A body in
// neither style leaves its first 200 bytes in Message.
type APIError struct {
	Interface string // "reporting"
	Op        string // "objects", "describe" or "query"
	Object    string // object id, if the request was about one
	Page      int    // page number for query requests, else 0
	Status    int    // HTTP status
	Code      int    // v3 error code (2xxx parameter, 3xxx persistence, 4xxx validation, 5xxx body)
	Name      string // v3 error name, e.g. "ResourceNotFoundError"
	Type      string // v4 problem type, e.g. "/errors/not-found"
	Title     string // v4 problem title
	Message   string // v3 message, v4 detail, or the start of an unparseable body
}

// Error reads like
// `reporting describe "course": 400 InvalidParameterError (2001): <message>`.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Interface)
	if e.Op != "" {
		b.WriteString(" ")
		b.WriteString(e.Op)
	}
	if e.Object != "" {
		b.WriteString(" ")
		b.WriteString(strconv.Quote(e.Object))
	}
	if e.Page > 0 {
		fmt.Fprintf(&b, " page %d", e.Page)
	}
	fmt.Fprintf(&b, ": %d", e.Status)
	switch {
	case e.Name != "":
		b.WriteString(" " + e.Name)
	case e.Title != "":
		b.WriteString(" " + e.Title)
	case http.StatusText(e.Status) != "":
		b.WriteString(" " + http.StatusText(e.Status))
	}
	switch {
	case e.Code != 0:
		fmt.Fprintf(&b, " (%d)", e.Code)
	case e.Type != "":
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	cred := credentialName(e.Interface)
	switch e.Status {
	case http.StatusUnauthorized:
		fmt.Fprintf(&b, " (the %s is missing, invalid or expired)", cred)
	case http.StatusForbidden:
		fmt.Fprintf(&b, " (the %s is not authorized: Coach Reports need a Coach license and an Admin or Manager role)", cred)
	}
	return b.String()
}

// Unwrap returns the sentinel matching the status (ErrUnauthorized,
// ErrForbidden, ErrNotFound, ErrRateLimited), or nil.
func (e *APIError) Unwrap() error { return statusSentinel(e.Status) }

// Is reports whether target is the sentinel matching the status.
func (e *APIError) Is(target error) bool {
	s := statusSentinel(e.Status)
	return s != nil && target == s
}

func statusSentinel(status int) error {
	switch status {
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusTooManyRequests:
		return ErrRateLimited
	}
	return nil
}

func credentialName(iface string) string {
	if iface == "" {
		return "access token"
	}
	return iface + " access token"
}

// PageError locates a failure (request, PageFunc) on one page of an object.
type PageError struct {
	Object string
	Page   int
	Err    error
}

func (e *PageError) Error() string {
	return fmt.Sprintf("extract: object %q page %d: %v", e.Object, e.Page, e.Err)
}

func (e *PageError) Unwrap() error { return e.Err }

// IntegrityError means the pages of an object did not add up: a total that
// does not match the rows read, a short page before the last, a non-empty
// page past the end, a page echoing another page number, or a repeated
// page. Rows already handed to the PageFunc must be discarded.
type IntegrityError struct {
	Object   string
	Expected int64
	Got      int64
	Detail   string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("extract: integrity of object %q: expected %d, got %d: %s", e.Object, e.Expected, e.Got, e.Detail)
}

// QueryError is a Query that does not fit the object's fields, found by
// Query.Validate before any request is sent.
type QueryError struct {
	Field    string // field id concerned
	Operator string // filter operator, empty for fields/sort problems
	Reason   string
}

func (e *QueryError) Error() string {
	if e.Operator == "" {
		return fmt.Sprintf("extract: query field %q: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("extract: query filter %q %s: %s", e.Field, e.Operator, e.Reason)
}
