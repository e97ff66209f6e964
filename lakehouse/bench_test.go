package lakehouse

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkStageCommit stages and commits 200,000 rows (append, then a
// merge of 50,000 of them) to a file:// warehouse with the SQLite catalog.
func BenchmarkStageCommit(b *testing.B) {
	ctx := context.Background()
	rows := makeRows(0, 200_000, "bench")
	upd := makeRows(75_000, 50_000, "upd")
	for i := range b.N {
		l := open(b, sqliteConfig(b.TempDir()))
		rdr := reader(b, l.mem, rows, 8192)
		spec := TableSpec{Stream: "bench", Schema: testSchema(), Mode: Merge, PrimaryKey: []string{"id"}}
		in, err := l.Stage(ctx, spec, Run{ID: fmt.Sprintf("r%d", i), Day: days[0]}, rdr)
		rdr.Release()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Commit(ctx, in); err != nil {
			b.Fatal(err)
		}
		rdr = reader(b, l.mem, upd, 8192)
		in, err = l.Stage(ctx, spec, Run{ID: fmt.Sprintf("u%d", i), Day: days[1]}, rdr)
		rdr.Release()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Commit(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
