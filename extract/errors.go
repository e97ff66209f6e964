package extract

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	// ErrBadListPath: ReadList refused a list whose path has a segment it
	// cannot put in a URL (empty, "." or "..", or holding / ? # or NUL),
	// e.g. a subscription id with a slash in DeliveryLogList; nothing was
	// sent.
	ErrBadListPath = errors.New("extract: bad list path segment")
	// ErrRateLimited: the service answered 429 and kept doing so until the
	// retry budget (attempts or total wait) ran out.
	ErrRateLimited = errors.New("extract: rate limited")
	// ErrRetriesExhausted: a retryable failure persisted until the retry
	// budget ran out. The error also wraps the last cause.
	ErrRetriesExhausted = errors.New("extract: retries exhausted")
	// ErrQuotaExhausted: the service announced a request quota (window
	// limit, remaining, reset) that is used up, or that would not cover
	// the rest of a read, and the window does not reset within the retry
	// budget's wait; or a 429 asked, by Retry-After, for a wait past that
	// budget. Nothing was sent past the quota.
	ErrQuotaExhausted = errors.New("extract: request quota exhausted")
)

// APIError is a non-success answer of the service. Both error body styles
// are decoded: v3 {"response":{"code","name","message"}} fills Code, Name
// and Message; v4 application/problem+json {type,title,detail,status,meta}
// fills Type, Title and Message (detail plus meta reasons). A body in
// neither style leaves its first 200 bytes in Message.
type APIError struct {
	Interface string // IfaceReporting, IfaceV3, IfaceV4, IfaceWebhooks or IfaceLegacy
	Op        string // "objects", "describe", "query", "create share", ...
	// Credential names the credential a 401 or 403 is about: "reporting
	// access token", "access token (v4)", "developer API token", "legacy
	// session (sid, sky, uid)", "legacy password", ...
	Credential string
	Object     string // object id, if the request was about one
	Page       int    // page number for query requests, else 0
	Status     int    // HTTP status
	Code       int    // v3 error code (2xxx parameter, 3xxx persistence, 4xxx validation, 5xxx body)
	Name       string // v3 error name, e.g. "ResourceNotFoundError"
	Type       string // v4 problem type, e.g. "/errors/not-found"
	Title      string // v4 problem title
	Message    string // v3 message, v4 detail, or the start of an unparseable body
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
	cred := e.Credential
	if cred == "" {
		cred = credentialName(e.Interface)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		fmt.Fprintf(&b, " (the %s is missing, invalid or expired)", cred)
	case http.StatusForbidden:
		fmt.Fprintf(&b, " (the %s is not authorized%s)", cred, forbiddenHint(e.Interface))
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

func forbiddenHint(iface string) string {
	switch iface {
	case IfaceReporting:
		return ": Coach Reports need a Coach license and an Admin or Manager role"
	case IfaceV4:
		return ": shares and themes need an Ultimate, Advanced or Expert plan and administrator access"
	case IfaceLegacy:
		return ": tickets and tokens are for Company Administrators; an SSO-only company allows API sessions only for them"
	}
	return ""
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

// QuotaError is a request refused, or a read deferred, because the
// service's request quota is used up until Reset: an announced quota that
// would not cover it, or a 429 whose Retry-After asks for a wait past the
// retry budget's. It wraps ErrQuotaExhausted; Reset is when the quota
// frees, the earliest a later run can read what it refused.
type QuotaError struct {
	Reset time.Time
	// Exceeds: the read needs more requests than the quota allows in a
	// whole window, so a later run cannot read it within one either.
	Exceeds bool
	Err     error // the message, wrapping ErrQuotaExhausted
}

func (e *QuotaError) Error() string { return e.Err.Error() }

func (e *QuotaError) Unwrap() error { return e.Err }

// quotaError returns a *QuotaError resetting at reset; format and args
// make its message, which must wrap ErrQuotaExhausted.
func quotaError(reset time.Time, format string, args ...any) error {
	return &QuotaError{Reset: reset, Err: fmt.Errorf(format, args...)}
}

// IntegrityError means the pages of an object did not add up: a total that
// does not match the rows read, a short page before the last, a non-empty
// page past the end, a page echoing another page number, or a repeated
// page. Rows already handed to the PageFunc must be discarded.
//
// With healing on (WithHealing), the error is returned only after the read
// started over that many times and still did not add up; Reads says how
// many full reads were tried.
type IntegrityError struct {
	Object   string // report object id, or collection name (e.g. "assets", "themes")
	Expected int64
	Got      int64
	Detail   string
	Reads    int // reads tried (1 + restarts); 0 when not known
}

func (e *IntegrityError) Error() string {
	s := fmt.Sprintf("extract: integrity of %q: expected %d, got %d: %s", e.Object, e.Expected, e.Got, e.Detail)
	if e.Reads > 1 {
		s += fmt.Sprintf(" (still after %d reads from the start)", e.Reads)
	}
	return s
}

// UncertainError is the failure of a request that is not retried blindly:
// a create or update (POST), for which the service has no idempotency key,
// or an e-mailed auto-login token.
//
// Sent false means the request certainly did not take effect (the
// connection could not be made, or the service answered 429 every time):
// retrying is safe. Sent true means the request may have reached the
// service and may have taken effect even though no usable answer came back
// (the connection dropped after the request was written, a 5xx, a body cut
// short): check, e.g. by listing subscriptions, before retrying, or the
// retry may create a duplicate.
type UncertainError struct {
	Interface string
	Op        string
	Object    string
	Sent      bool
	Status    int // HTTP status if an answer came, else 0
	Err       error
}

func (e *UncertainError) Error() string {
	what := e.Interface + " " + e.Op
	if e.Object != "" {
		what += " " + strconv.Quote(e.Object)
	}
	if !e.Sent {
		return fmt.Sprintf("extract: %s was not carried out (the request did not reach the service or was refused); it is safe to retry: %v", what, e.Err)
	}
	answer := "no complete answer came back"
	if e.Status != 0 {
		answer = fmt.Sprintf("the service answered %d", e.Status)
	}
	return fmt.Sprintf("extract: %s may have been carried out: the request was sent but %s; check before retrying, a retry may create a duplicate: %v", what, answer, e.Err)
}

func (e *UncertainError) Unwrap() error { return e.Err }

// MayHaveTakenEffect reports whether the request may have changed
// something at the service.
func (e *UncertainError) MayHaveTakenEffect() bool { return e.Sent }

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
