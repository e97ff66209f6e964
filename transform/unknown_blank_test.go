package transform_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// An unknown member is passed over unnamed when the Inferrer would type
// it no column: null, "" and text that is blank once trimmed ("  ", and
// "\t" written as an escape). A member sent as "  " was still named, so a
// collection widened (decoded its pages twice) and warned on every run,
// and under freeze it was a reject (found by review).
func TestUnknownMembersTheInferrerCannotTypeAreNotNamed(t *testing.T) {
	body := []byte(`{"items":[{"id":"1","error":"  "},{"id":"2","error":"\t"}]}`)
	in := transform.NewInferrer("assets")
	if err := in.Page(1, body); err != nil {
		t.Fatal(err)
	}
	for _, f := range in.Fields() {
		if f.ID == "error" {
			t.Skipf("the Inferrer types error as %s", f.Type)
		}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d := collectionDecoder(t, mem, []service.Field{{ID: "id", Type: "string"}}, transform.WithUnknownRejected())
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if len(res.UnknownFields) > 0 || len(res.Rejects) > 0 {
		t.Errorf("unknown %v, %d rejects: a member the Inferrer gives no column (blank text) is named, so the collection widens for it on every run", res.UnknownFields, len(res.Rejects))
	}
}
