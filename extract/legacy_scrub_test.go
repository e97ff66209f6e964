package extract

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A legacy POST now carries its credentials as a JSON body. A service
// error that echoes the request (as TestNoCredentialInLogsOrErrors's 5xx
// does) holds the password as JSON escapes it (& < > " \ become \u0026,
// \u003c, \"...): scrubValues knows the raw, query- and path-escaped forms
// only, so the password leaks into the error and the debug log. With the
// form body of before, the query-escaped form was scrubbed.
func TestLegacyJSONEscapedPasswordIsScrubbed(t *testing.T) {
	t.Parallel()
	const pw = `Tr0ub4dor&3<horse>"x`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v3err(w, 400, 2001, "InvalidParameterError", "cannot read "+string(body))
	})
	var logs logBuffer
	c, _ := newTestClient(t, h, WithLogger(debugLogger(&logs)))
	_, err := c.PasswordSession(context.Background(), "demo", "admin", pw)
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "Tr0ub4dor") {
		t.Errorf("the password leaks through the error: %v", err)
	}
	if strings.Contains(logs.String(), "Tr0ub4dor") {
		t.Errorf("the password leaks through the log:\n%s", logs.String())
	}
}
