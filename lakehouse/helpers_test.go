package lakehouse

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
)

// The test streams look like sepipe's: an int id, text, a float, a
// picklist (dictionary), a date (timestamp, UTC) and a JSON column.
var (
	picklist  = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	timestamp = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	jsonType  = func() arrow.DataType { t, _ := extensions.NewJSONType(arrow.BinaryTypes.String); return t }()
)

var schemaMeta = arrow.NewMetadata([]string{"sepipe:object"}, []string{"test"})

func testSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true,
			Metadata: arrow.NewMetadata([]string{"sepipe:type", "sepipe:display_name"}, []string{"int", "Id"})},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "team", Type: picklist, Nullable: true},
		{Name: "updated", Type: timestamp, Nullable: true},
		{Name: "attrs", Type: jsonType, Nullable: true},
	}, &schemaMeta)
}

// row is one row as written and as read back.
type row struct {
	ID      int64
	Name    string
	Score   float64
	Team    string
	Updated time.Time
	Attrs   string
	Day     string // snapshot_date, read back
	Run     string // _sepipe_run_id, read back
}

func (r row) String() string {
	return fmt.Sprintf("%d|%s|%g|%s|%s|%s|%s|%s", r.ID, r.Name, r.Score, r.Team, r.Updated.UTC().Format(time.RFC3339Nano), r.Attrs, r.Day, r.Run)
}

// makeRows builds n rows with ids from first, their values derived from
// the id and tag (so two runs' rows differ).
func makeRows(first int64, n int, tag string) []row {
	teams := []string{"north", "south", "east"}
	base := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)
	out := make([]row, n)
	for i := range n {
		id := first + int64(i)
		out[i] = row{ID: id, Name: fmt.Sprintf("%s-%d", tag, id), Score: float64(id) / 4, Team: teams[id%3],
			Updated: base.Add(time.Duration(id) * time.Minute), Attrs: fmt.Sprintf(`{"tag":%q}`, tag)}
	}
	return out
}

// batch builds a record batch of rows with testSchema.
func batch(mem memory.Allocator, rows []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testSchema())
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		b.Field(1).(*array.StringBuilder).Append(r.Name)
		b.Field(2).(*array.Float64Builder).Append(r.Score)
		if err := b.Field(3).(*array.BinaryDictionaryBuilder).AppendString(r.Team); err != nil {
			panic(err)
		}
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Updated.UnixMicro()))
		b.Field(5).(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder).Append(r.Attrs)
	}
	return b.NewRecordBatch()
}

// reader yields rows in batches of size.
func reader(t testing.TB, mem memory.Allocator, rows []row, size int) array.RecordReader {
	t.Helper()
	var recs []arrow.RecordBatch
	for i := 0; i < len(rows); i += size {
		recs = append(recs, batch(mem, rows[i:min(i+size, len(rows))]))
	}
	rdr, err := array.NewRecordReader(testSchema(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	return rdr
}

// stageCommit stages rows for spec and commits them; it returns the intent.
func stageCommit(t testing.TB, l *Lakehouse, spec TableSpec, run Run, rows []row) Intent {
	t.Helper()
	ctx := context.Background()
	rdr := reader(t, l.mem, rows, 7)
	defer rdr.Release()
	in, err := l.Stage(ctx, spec, run, rdr)
	if err != nil {
		t.Fatalf("stage %s %s: %v", spec.Stream, run.ID, err)
	}
	if in.Rows != int64(len(rows)) {
		t.Fatalf("stage %s %s: intent has %d rows, wrote %d", spec.Stream, run.ID, in.Rows, len(rows))
	}
	// The intent survives the caller's storage as JSON.
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back Intent
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, back); err != nil {
		t.Fatalf("commit %s %s: %v", spec.Stream, run.ID, err)
	}
	return back
}

// readTable reads a table's current snapshot through iceberg-go's scan.
func readTable(t testing.TB, l *Lakehouse, ns, stream string) []row {
	t.Helper()
	tbl, err := l.LoadTable(context.Background(), ns, stream)
	if err != nil {
		t.Fatal(err)
	}
	return scanRows(t, tbl)
}

func scanRows(t testing.TB, tbl *table.Table) []row {
	t.Helper()
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan %v: %v", tbl.Identifier(), err)
	}
	defer at.Release()
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	var out []row
	for tr.Next() {
		rec := tr.RecordBatch()
		col := func(name string) arrow.Array {
			ix := rec.Schema().FieldIndices(name)
			if len(ix) == 0 {
				return nil
			}
			return rec.Column(ix[0])
		}
		dayCol := DayColumn
		for r := range int(rec.NumRows()) {
			var x row
			if c, ok := col("id").(*array.Int64); ok {
				x.ID = c.Value(r)
			} else if c, ok := col("id").(*array.Int32); ok {
				x.ID = int64(c.Value(r))
			}
			if c := col("name"); c != nil && !c.IsNull(r) {
				x.Name = c.ValueStr(r)
			}
			switch c := col("score").(type) {
			case *array.Float64:
				if !c.IsNull(r) {
					x.Score = c.Value(r)
				}
			case *array.Float32:
				if !c.IsNull(r) {
					x.Score = float64(c.Value(r))
				}
			}
			if c := col("team"); c != nil && !c.IsNull(r) {
				x.Team = c.ValueStr(r)
			}
			if c, ok := col("updated").(*array.Timestamp); ok && !c.IsNull(r) {
				x.Updated = time.UnixMicro(int64(c.Value(r))).UTC()
			}
			if c := col("attrs"); c != nil && !c.IsNull(r) {
				x.Attrs = c.ValueStr(r)
			}
			if c, ok := col(dayCol).(*array.Date32); ok {
				x.Day = c.Value(r).FormattedString()
			}
			if c := col(ColRunID); c != nil {
				x.Run = c.ValueStr(r)
			}
			out = append(out, x)
		}
	}
	return out
}

// sameRows compares rows as multisets, reporting the first differences.
func sameRows(t testing.TB, what string, got, want []row) {
	t.Helper()
	g, w := strs(got), strs(want)
	if slices.Equal(g, w) {
		return
	}
	var missing, extra []string
	gi, wi := 0, 0
	for gi < len(g) || wi < len(w) {
		switch {
		case gi == len(g):
			missing = append(missing, w[wi])
			wi++
		case wi == len(w):
			extra = append(extra, g[gi])
			gi++
		case g[gi] == w[wi]:
			gi++
			wi++
		case g[gi] < w[wi]:
			extra = append(extra, g[gi])
			gi++
		default:
			missing = append(missing, w[wi])
			wi++
		}
	}
	t.Fatalf("%s: read %d rows, want %d; missing %d (first %v), unexpected %d (first %v)", what, len(got), len(want),
		len(missing), first(missing, 3), len(extra), first(extra, 3))
}

func strs(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.String()
	}
	slices.Sort(out)
	return out
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// stamped copies rows with the day and run they are written by.
func stamped(rows []row, day, run string) []row {
	out := slices.Clone(rows)
	for i := range out {
		out[i].Day, out[i].Run = day, run
	}
	return out
}

// sqliteConfig is a SQLite catalog and a file:// warehouse in dir.
func sqliteConfig(dir string) Config {
	return Config{
		Catalog:   CatalogConfig{Type: CatalogSQL, Driver: DriverSQLite, URI: filepath.Join(dir, "catalog.db")},
		Warehouse: "file://" + filepath.ToSlash(filepath.Join(dir, "warehouse")),
	}
}

func open(t testing.TB, cfg Config, opts ...Option) *Lakehouse {
	t.Helper()
	l, err := Open(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// runSummaries lists the run ids of a table's snapshots, oldest first.
func runSummaries(t testing.TB, l *Lakehouse, ns, stream string) []string {
	t.Helper()
	tbl, err := l.LoadTable(context.Background(), ns, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range tbl.Metadata().Snapshots() {
		run := ""
		if s.Summary != nil {
			run = s.Summary.Properties[SummaryRunID]
		}
		out = append(out, run)
	}
	return out
}

func trimFile(p string) string { return strings.TrimPrefix(p, "file://") }
