package transform_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// 09b0435 passes over an unknown member whose value is null or "" because
// the Inferrer types neither, so naming it only made a collection widen
// (decode its pages twice) and warn on every run for a field that never
// gets a column. The Inferrer types no text that is blank once trimmed
// (textKind: "   " too), but unknownMember checks the raw value for ""
// only: a member sent as "  " is still named, still widens every run and,
// under freeze, is still a reject.
func TestRev4UnknownMembersTheInferrerCannotTypeAreNotNamed(t *testing.T) {
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
