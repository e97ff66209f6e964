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
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/service"
)

// TestMalformedPageIsFetchedAgain: the client leaves JSON checking of
// results pages to the PageFunc's decoder; a page it rejects with
// ErrMalformedPage (a body cut short with a matching Content-Length) is
// fetched again, and the read ends with every row once.
func TestMalformedPageIsFetchedAgain(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
		var q struct{ Page int }
		json.Unmarshal(raw, &q)
		if q.Page == 0 {
			q.Page = 1
		}
		var rows []string
		for i := 0; i < 2 && (q.Page-1)*2+i < 5; i++ {
			rows = append(rows, fmt.Sprintf(`{"id":%d}`, (q.Page-1)*2+i))
		}
		body := fmt.Sprintf(`{"page":%d,"resultsPerPage":2,"totalResults":5,"totalPages":3,"results":[%s]}`, q.Page, strings.Join(rows, ","))
		if q.Page == 2 && served.Add(1) == 1 {
			body = body[:len(body)/2] // cut short, Content-Length set to match
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write([]byte(body))
	}))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken("t"), extract.WithRateLimit(0, 0), extract.WithPageSize(2),
		extract.WithBackoffForTest(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var calls, rows atomic.Int64
	st, err := c.ReadObject(context.Background(), "thing", extract.Query{}, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
		calls.Add(1)
		info, err := extract.ParsePageInfo(p.Body)
		if err != nil {
			if !errors.Is(err, service.ErrMalformedPage) {
				t.Errorf("ParsePageInfo error %v does not wrap ErrMalformedPage", err)
			}
			return info, err
		}
		rows.Add(int64(info.Rows))
		return info, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows.Load() != 5 || st.Rows != 5 || st.Retries < 1 || calls.Load() != 4 {
		t.Errorf("rows %d (stats %d), retries %d, fn calls %d; want 5, 5, >=1, 4", rows.Load(), st.Rows, st.Retries, calls.Load())
	}
}
