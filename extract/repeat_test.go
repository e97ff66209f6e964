package extract_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/transform"
)

// TestRepeatedRowsUnderAnotherPageNumberFailTheRead: a service that
// answers page 3 with page 2's rows (echoing page 3, so the bodies differ)
// is caught by the rows' hash: the read is healed by reading again, then
// fails; nothing is handed on as if it were whole.
func TestRepeatedRowsUnderAnotherPageNumberFailTheRead(t *testing.T) {
	rows := func(p int) string {
		if p == 3 {
			p = 2 // the lie
		}
		return fmt.Sprintf(`[{"id":%d},{"id":%d}]`, 2*p-1, 2*p)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
		var q struct{ Page int }
		json.Unmarshal(raw, &q)
		fmt.Fprintf(w, `{"page":%d,"resultsPerPage":2,"totalResults":6,"totalPages":3,"results":%s}`, q.Page, rows(q.Page))
	}))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1), extract.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	s, err := schemas.FromDescribe("o", []extract.Field{{ID: "id", Type: "int"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	restarts := 0
	_, err = c.ReadObject(context.Background(), "o", extract.Query{ResultsPerPage: 2}, func(ctx context.Context, p *extract.Page) (extract.PageInfo, error) {
		if p.Restart {
			restarts++
			return extract.PageInfo{}, nil
		}
		r, err := d.DecodePage(p.Number, p.Body)
		if err != nil {
			return extract.PageInfo{}, err
		}
		r.Record.Release()
		return r.Info, nil
	})
	var ie *extract.IntegrityError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "holds the same rows as page 2") {
		t.Fatalf("%v, want an integrity error naming the repeated rows", err)
	}
	if restarts == 0 {
		t.Error("the read was not retried before it failed")
	}
}

// TestAbsurdTotalEndsTheRead: page 1 announcing more pages than a read may
// take ends the read at once with a clear error.
func TestAbsurdTotalEndsTheRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"page":1,"resultsPerPage":2,"totalResults":9000000000000,"results":[{"id":1},{"id":2}]}`)
	}))
	defer srv.Close()
	c, _ := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1))
	pages := 0
	_, err := c.ReadObject(context.Background(), "o", extract.Query{ResultsPerPage: 2}, func(ctx context.Context, p *extract.Page) (extract.PageInfo, error) {
		pages++
		return extract.ParsePageInfo(p.Body)
	})
	if !errors.Is(err, extract.ErrEndlessPages) || pages != 1 {
		t.Fatalf("%v after %d pages, want ErrEndlessPages after page 1", err, pages)
	}
}
