package transform_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/transform"
)

// A value longer than WithMaxValueBytes is not stored and not copied: its
// field is null, its row stays, and the Reject says where the value lies
// in the body; the raw row shows it as null.
func TestValuesOverTheLimitKeepTheirRow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := schemas.FromDescribe("thing", testFields)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s, transform.WithAllocator(mem), transform.WithMaxValueBytes(64))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	long := `"` + strings.Repeat("é", 40) + `"` // 82 bytes of JSON text
	escaped := `"` + strings.Repeat(`\n`, 40) + `"`
	body := `{"results":[` +
		`{"id":1,"name":` + long + `,"score":1.5},` +
		`{"id":2,"name":"short","score":` + long + `},` + // too long and a misfit: too long wins, the row stays
		`{"id":3,"name":` + escaped + `,"score":"x"},` + // too long, and a misfit: both null, the row stays
		`{"id":4,"name":"fine"}]}`
	res, err := d.DecodePage(1, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if got := res.Record.NumRows(); got != 4 {
		t.Fatalf("rows %d, want 4", got)
	}
	ids := res.Record.Column(0).(*array.Int64)
	names := res.Record.Column(1).(*array.String)
	scores := res.Record.Column(2)
	for i, want := range []int64{1, 2, 3, 4} {
		if ids.Value(i) != want {
			t.Errorf("row %d: id %d, want %d", i, ids.Value(i), want)
		}
	}
	if !names.IsNull(0) || names.Value(1) != "short" || !names.IsNull(2) || names.Value(3) != "fine" {
		t.Errorf("names: %v", names)
	}
	if scores.IsNull(0) || !scores.IsNull(1) || !scores.IsNull(2) {
		t.Errorf("scores: %v", scores)
	}
	if res.RejectedRows != 0 || res.Misfits != 1 || res.NulledValues != 1 {
		t.Errorf("rejected rows %d, misfits %d, nulled %d; want 0, 1 and 1", res.RejectedRows, res.Misfits, res.NulledValues)
	}
	var over []transform.Reject
	for _, r := range res.Rejects {
		if r.Oversize {
			over = append(over, r)
		}
	}
	if len(over) != 3 {
		t.Fatalf("oversize rejects %d, want 3: %+v", len(over), res.Rejects)
	}
	for i, want := range []struct {
		row   int
		field string
		raw   string
	}{{0, "name", long}, {1, "score", long}, {2, "name", escaped}} {
		r := over[i]
		if r.Row != want.row || r.Field != want.field || body[r.Start:r.End] != want.raw || r.RawValue != "" {
			t.Errorf("reject %d: row %d field %q raw %q value %q; want row %d field %q raw %q and no value",
				i, r.Row, r.Field, body[r.Start:r.End], r.RawValue, want.row, want.field, want.raw)
		}
		if strings.Contains(r.RawRow, want.raw) || !strings.Contains(r.RawRow, `:null`) {
			t.Errorf("reject %d: raw row %q should show the value as null", i, r.RawRow)
		}
		if !strings.Contains(r.Reason, "longer than the limit of 64") {
			t.Errorf("reject %d: reason %q", i, r.Reason)
		}
	}
}

// A collection's json column is measured before it is compacted.
func TestJSONValueOverTheLimit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	big := `[` + strings.Repeat(`{"a": 1}, `, 10) + `{"a": 1}]`
	body := []byte(`{"items":[{"id":"a","tags":` + big + `},{"id":"b","tags":[{"a":2}]}]}`)
	fields := inferFields(t, body)
	d := collectionDecoder(t, mem, fields, transform.WithMaxValueBytes(64))
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if res.Record.NumRows() != 2 || len(res.Rejects) != 1 || !res.Rejects[0].Oversize {
		t.Fatalf("rows %d, rejects %+v", res.Record.NumRows(), res.Rejects)
	}
	if r := res.Rejects[0]; string(body[r.Start:r.End]) != big {
		t.Errorf("span %q, want %q", body[r.Start:r.End], big)
	}
}
