package transform_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/transform"
)

// fakePages fetches n pages (1000 rows each) of the fake's largest object,
// userCourseProgress, and returns a decoder for them.
func fakePages(tb testing.TB, n int) (*transform.Decoder, [][]byte) {
	tb.Helper()
	srv := servicetest.NewServer(servicetest.WithUsers(n*1000/12 + 1))
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithRateLimit(0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	const object = "userCourseProgress"
	fs, err := c.Describe(ctx, object)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := schemas.FromDescribe(object, fs)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := transform.NewDecoder(s, transform.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		tb.Fatal(err)
	}
	pages := make([][]byte, n)
	for i := range pages {
		p, err := c.QueryPage(ctx, object, extract.Query{Page: i + 1, ResultsPerPage: 1000})
		if err != nil {
			tb.Fatal(err)
		}
		pages[i] = p.Body
	}
	return d, pages
}

// benchDecode decodes pages with d, one page per op, calling check on
// each result.
func benchDecode(b *testing.B, d *transform.Decoder, pages [][]byte, check func(transform.Result)) {
	var size int64
	for _, p := range pages {
		size += int64(len(p))
	}
	b.SetBytes(size / int64(len(pages)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := d.DecodePage(1, pages[i%len(pages)])
		if err != nil {
			b.Fatal(err)
		}
		check(res)
		res.Record.Release()
		i++
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkDecodeFakePage decodes real pages of the fake service
// (userCourseProgress: ints, strings, a picklist, percents, floats and
// dates, some null), one page per op, on one core.
func BenchmarkDecodeFakePage(b *testing.B) {
	d, pages := fakePages(b, 20)
	defer d.Release()
	benchDecode(b, d, pages, func(res transform.Result) {
		if res.RejectedRows > 0 {
			b.Fatalf("rejects: %+v", res.Rejects[0])
		}
	})
}

// BenchmarkMergeStreamPage is the page work of a merge stream
// (userCourseProgress keyed on userId, courseId): the decoder yields each
// row's key in the pass that decodes the page, so the client checks keys
// without parsing the page again. One page of 1000 rows per op.
func BenchmarkMergeStreamPage(b *testing.B) {
	d, pages := fakePages(b, 20)
	d.Release()
	dec, err := transform.NewDecoder(d.Schema(), transform.WithKeyFields(true, "userId", "courseId"))
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Release()
	benchDecode(b, dec, pages, func(res transform.Result) {
		if len(res.Info.Keys) != res.Info.Rows || res.RejectedRows > 0 {
			b.Fatalf("%d keys for %d rows, %d rejected", len(res.Info.Keys), res.Info.Rows, res.RejectedRows)
		}
	})
}
