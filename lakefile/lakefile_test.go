package lakefile_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/lakefile"
)

// TestDayColumnFor: a stream with a field named like the day column in any
// case, Unicode's folding included, gets the other name (the local lake
// folded ASCII and the Iceberg lake Unicode: one rule now).
func TestDayColumnFor(t *testing.T) {
	for names, want := range map[string]string{
		"id,name":           lakefile.DayColumn,
		"id,snapshot_date":  lakefile.DayColumnAlt,
		"Snapshot_Date":     lakefile.DayColumnAlt,
		"ſnapshot_date":     lakefile.DayColumnAlt, // LATIN SMALL LETTER LONG S folds to s
		"snapshot_date_day": lakefile.DayColumn,
	} {
		if got := lakefile.DayColumnFor(strings.Split(names, ",")); got != want {
			t.Errorf("DayColumnFor(%s) = %s, want %s", names, got, want)
		}
	}
}

// TestHugeColumnsSeesEveryTextColumn: a huge value is found in a string,
// a picklist's dictionary and a JSON column (load saw plain strings only),
// never in a number.
func TestHugeColumnsSeesEveryTextColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	huge := strings.Repeat("x", lakefile.HugeValue)
	js, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		t.Fatal(err)
	}
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	s := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "p", Type: dict}, {Name: "j", Type: js}}, nil)
	for _, col := range []string{"s", "p", "j"} {
		b := array.NewRecordBuilder(mem, s)
		b.Field(0).(*array.Int64Builder).Append(1)
		for _, c := range []string{"s", "p", "j"} {
			v := "small"
			if c == col {
				v = huge
			}
			switch fb := b.Field(s.FieldIndices(c)[0]).(type) {
			case *array.StringBuilder:
				fb.Append(v)
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString(v); err != nil {
					t.Fatal(err)
				}
			case *array.ExtensionBuilder:
				fb.StorageBuilder().(*array.StringBuilder).Append(v)
			}
		}
		rec := b.NewRecordBatch()
		if got := lakefile.HugeColumns(rec); len(got) != 1 || got[0] != col {
			t.Errorf("a huge value in %s: HugeColumns says %v", col, got)
		}
		rec.Release()
		b.Release()
	}
	for _, f := range s.Fields() {
		if lakefile.IsText(f.Type) != (f.Name != "n") {
			t.Errorf("IsText(%s) = %v", f.Type, lakefile.IsText(f.Type))
		}
	}
}
