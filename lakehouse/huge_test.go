package lakehouse

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestHugeValues: a batch holding a text value of a megabyte or more goes
// into a data file of its own, without dictionary or statistics on its
// text columns (so the writer holds one such batch, once); the batches
// around it share files as usual, and the table reads back whole.
func TestHugeValues(t *testing.T) {
	l := open(t, sqliteConfig(t.TempDir()))
	spec := TableSpec{Stream: "blobs", Schema: testSchema(), Mode: Replace}
	rows := makeRows(0, 21, "r") // batches of 7: rows 0-6, 7-13, 14-20
	rows[9].Name = strings.Repeat("x", 2<<20)
	in := stageCommit(t, l, spec, Run{ID: "run-1", Day: days[0]}, rows)
	if len(in.Files) != 3 {
		t.Fatalf("files %v, want 3: before, the huge batch, after", in.Files)
	}
	sameRows(t, "huge values", readTable(t, l, "", "blobs"), stamped(rows, days[0], "run-1"))
	for i, p := range in.Files {
		pf, err := file.OpenParquetFile(trimFile(p), false)
		if err != nil {
			t.Fatal(err)
		}
		rg := pf.MetaData().RowGroup(0)
		idx := pf.MetaData().Schema.ColumnIndexByName("name")
		cc, err := rg.ColumnChunk(idx)
		if err != nil {
			t.Fatal(err)
		}
		stats, _ := cc.StatsSet()
		if huge := i == 1; cc.HasDictionaryPage() == huge || stats == huge {
			t.Errorf("file %d (huge %v): name has a dictionary %v, statistics %v", i, huge, cc.HasDictionaryPage(), stats)
		}
		pf.Close()
	}
}
