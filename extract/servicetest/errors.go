package servicetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes and names of the v3 style error body
// {"response":{"code":…,"name":…,"message":…}}. The 2xxx (parameters) and
// 3004 (not found) codes follow docs/service-interface.md (Errors); the 1xxx codes for
// authentication, authorisation and method are the fake's choice and are
// recorded in docs/service-shapes.md.
const (
	codeUnauthorized     = 1001 // 401
	codeForbidden        = 1003 // 403
	codeMethodNotAllowed = 1005 // 405
	codeInvalidParameter = 2001 // 400: a parameter has a wrong value
	codeMalformed        = 2002 // 400: parameters are not Base64 JSON
	codeUnexpected       = 2003 // 400: a query parameter that is not accepted
	codeNotFound         = 3004 // 404
)

// apiError is an error answer of the fake.
type apiError struct {
	status  int
	code    int
	name    string
	message string
	allow   string // Allow header of a 405; "GET, HEAD" when empty
}

func (e *apiError) Error() string {
	return strconv.Itoa(e.status) + " " + e.name + ": " + e.message
}

func newAPIError(status, code int, name, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, name: name, message: fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) *apiError {
	return newAPIError(http.StatusBadRequest, codeInvalidParameter, "InvalidParameterError", format, args...)
}

func errMalformed(format string, args ...any) *apiError {
	return newAPIError(http.StatusBadRequest, codeMalformed, "MalformedParameterError", format, args...)
}

func errUnexpected(format string, args ...any) *apiError {
	return newAPIError(http.StatusBadRequest, codeUnexpected, "UnexpectedParameterError", format, args...)
}

func errNotFound(format string, args ...any) *apiError {
	return newAPIError(http.StatusNotFound, codeNotFound, "ResourceNotFoundError", format, args...)
}

func errUnauthorized(format string, args ...any) *apiError {
	return newAPIError(http.StatusUnauthorized, codeUnauthorized, "AuthenticationError", format, args...)
}

func errForbidden(format string, args ...any) *apiError {
	return newAPIError(http.StatusForbidden, codeForbidden, "PermissionDeniedError", format, args...)
}

func errMethod(method string) *apiError {
	return newAPIError(http.StatusMethodNotAllowed, codeMethodNotAllowed, "MethodNotAllowedError",
		"method %s is not allowed; allowed: GET, HEAD", method)
}

// errMethodAllow is errMethod for an endpoint that allows the methods in
// allow (as written in the Allow header, e.g. "POST").
func errMethodAllow(method, allow string) *apiError {
	e := newAPIError(http.StatusMethodNotAllowed, codeMethodNotAllowed, "MethodNotAllowedError",
		"method %s is not allowed; allowed: %s", method, allow)
	e.allow = allow
	return e
}

// errorBody is the JSON shape of an error answer.
type errorBody struct {
	Response struct {
		Code    int    `json:"code"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"response"`
}

// writeError answers r with e, adding the headers its status calls for.
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	var body errorBody
	body.Response.Code = e.code
	body.Response.Name = e.name
	body.Response.Message = e.message
	b, _ := json.Marshal(body) // cannot fail: strings and ints only
	h := w.Header()
	switch e.status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="reporting", error="invalid_token"`)
	case http.StatusMethodNotAllowed:
		allow := e.allow
		if allow == "" {
			allow = "GET, HEAD"
		}
		h.Set("Allow", allow)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}
