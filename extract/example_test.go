package extract_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/service"
)

func ExampleClient_ReadObject() {
	// A stand-in for a tenant: 25 curricula, 10 per page.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var page struct{ Page int }
		raw, err := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
		if err == nil {
			err = json.Unmarshal(raw, &page)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"page":%d,"resultsPerPage":10,"totalResults":25,"totalPages":3,"results":[`, page.Page)
		for i := (page.Page - 1) * 10; i < min(page.Page*10, 25); i++ {
			if i%10 != 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"curriculumTitle":"Curriculum %d"}`, i)
		}
		fmt.Fprint(w, "]}")
	}))
	defer srv.Close()

	c, err := extract.New(srv.URL, extract.WithAccessToken("secret"), extract.WithPageSize(10))
	if err != nil {
		panic(err)
	}
	var rows atomic.Int64
	st, err := c.ReadObject(context.Background(), "curriculum",
		extract.Query{Fields: []string{"curriculumTitle"}},
		func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
			info, err := extract.ParsePageInfo(p.Body) // or decode p.Body yourself
			rows.Add(int64(info.Rows))
			return info, err
		})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Pages, "pages,", rows.Load(), "rows")
	// Output: 3 pages, 25 rows
}
