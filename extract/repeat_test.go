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
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// TestRepeatedRowsUnderAnotherPageNumberFailTheRead: a service that
// answers page 3 with page 2's rows (echoing page 3, so the bodies differ)
// is caught by the rows' hash: the read is healed by reading again, then
// fails; nothing is handed on as if it were whole.
func TestRepeatedRowsUnderAnotherPageNumberFailTheRead(t *testing.T) {
	t.Parallel()
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
	s, err := schemas.FromDescribe("o", []service.Field{{ID: "id", Type: "int"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	restarts := 0
	_, err = c.ReadObject(context.Background(), "o", extract.Query{ResultsPerPage: 2}, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
		if p.Restart {
			restarts++
			return service.PageInfo{}, nil
		}
		r, err := d.DecodePage(p.Number, p.Body)
		if err != nil {
			return service.PageInfo{}, err
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
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"page":1,"resultsPerPage":2,"totalResults":9000000000000,"results":[{"id":1},{"id":2}]}`)
	}))
	defer srv.Close()
	c, _ := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1))
	pages := 0
	_, err := c.ReadObject(context.Background(), "o", extract.Query{ResultsPerPage: 2}, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
		pages++
		return extract.ParsePageInfo(p.Body)
	})
	if !errors.Is(err, extract.ErrEndlessPages) || pages != 1 {
		t.Fatalf("%v after %d pages, want ErrEndlessPages after page 1", err, pages)
	}
}

// TestBytesInFlightAreBounded: however many workers, the page bodies the
// client holds at once stay within WithMaxBytesInFlight.
func TestBytesInFlightAreBounded(t *testing.T) {
	t.Parallel()
	const rows, pages = 2000, 8 // ~100 KB a page
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
		var q struct{ Page int }
		json.Unmarshal(raw, &q)
		var b strings.Builder
		fmt.Fprintf(&b, `{"page":%d,"resultsPerPage":%d,"totalResults":%d,"totalPages":%d,"results":[`, q.Page, rows, rows*pages, pages)
		for i := range rows {
			if q.Page > pages {
				break // past the end
			}
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%d,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, q.Page*rows+i)
		}
		b.WriteString("]}")
		w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
		w.Write([]byte(b.String()))
	}))
	defer srv.Close()
	pageSize := int64(2000 * 52)
	c, err := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1),
		extract.WithConcurrency(4), extract.WithMaxBytesInFlight(2*pageSize+pageSize/2))
	if err != nil {
		t.Fatal(err)
	}
	var now, peak atomic.Int32
	_, err = c.ReadObject(context.Background(), "o", extract.Query{ResultsPerPage: rows}, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		return extract.ParsePageInfo(p.Body)
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 2 || p < 1 {
		t.Fatalf("%d pages held at once, want at most 2 (the budget's worth)", p)
	}
}
