package transform_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/transform"
)

// FuzzDecodePage: the decoder never panics, never leaks, and never loses a
// row silently: every row it counts is either in the batch or rejected.
func FuzzDecodePage(f *testing.F) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "page_mixed.json"))
	f.Add(seed)
	f.Add(makePage(1, 3))
	f.Add([]byte(`{"results":[{"id":"x","when":"2026-02-29"}]}`))
	f.Add([]byte(`{"results":[{"name":"\ud800\u0041"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		d := newDecoder(t, mem)
		defer d.Release()
		res, err := d.DecodePage(1, body)
		if err != nil {
			if res.Record != nil {
				t.Fatal("error with a record")
			}
			return
		}
		defer res.Record.Release()
		if got := res.Record.NumRows() + int64(res.RejectedRows); got != int64(res.Info.Rows) {
			t.Fatalf("rows in batch %d + rejected %d != rows counted %d", res.Record.NumRows(), res.RejectedRows, res.Info.Rows)
		}
		if res.NulledValues < 0 || res.NulledValues+res.RejectedRows > len(res.Rejects) {
			t.Fatalf("%d values nulled and %d rows left out, for %d rejects", res.NulledValues, res.RejectedRows, len(res.Rejects))
		}
		for i, c := range res.Record.Columns() {
			if int64(c.Len()) != res.Record.NumRows() {
				t.Fatalf("column %d has %d values, batch has %d rows", i, c.Len(), res.Record.NumRows())
			}
		}

		// With a small value limit the same page keeps every row it kept
		// without one, and each value kept out lies in the body.
		const limit = 8
		ld, err := transform.NewDecoder(d.Schema(), transform.WithAllocator(mem), transform.WithMaxValueBytes(limit))
		if err != nil {
			t.Fatal(err)
		}
		defer ld.Release()
		lres, err := ld.DecodePage(1, body)
		if err != nil {
			t.Fatalf("the page decoded without a limit, not with one: %v", err)
		}
		defer lres.Record.Release()
		if lres.Record.NumRows() < res.Record.NumRows() {
			t.Fatalf("a value limit left rows out: %d rows, %d without it", lres.Record.NumRows(), res.Record.NumRows())
		}
		for _, r := range lres.Rejects {
			if r.Oversize && (r.Start < 0 || r.End > len(body) || r.End-r.Start <= limit || r.RawValue != "") {
				t.Fatalf("oversize reject %+v: span outside the body or not over the limit", r)
			}
		}
	})
}
