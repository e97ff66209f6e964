package load_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// commitOn commits run id of day with tb alone.
func commitOn(wh *load.Warehouse, id, day string, tb load.Table) error {
	now, _ := time.Parse(time.DateOnly, day)
	run := load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day}
	return wh.Commit(context.Background(), run, []load.Table{tb})
}

// rowsOf is the result of q, a row a line, its values separated by "|"
// (NULL for a null, dates as YYYY-MM-DD).
func rowsOf(t *testing.T, wh *load.Warehouse, q string) string {
	t.Helper()
	rows, err := wh.DB().Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for i, x := range v {
			if i > 0 {
				b.WriteByte('|')
			}
			switch x := x.(type) {
			case nil:
				b.WriteString("NULL")
			case time.Time:
				b.WriteString(x.Format(time.DateOnly))
			default:
				fmt.Fprint(&b, x)
			}
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return b.String()
}

// columnsOf is a table's (or view's) columns and types, in order, a
// column a line.
func columnsOf(t *testing.T, wh *load.Warehouse, table string) string {
	t.Helper()
	return rowsOf(t, wh, `SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '`+table+`' ORDER BY column_index`)
}

// TestFullRefreshRespellsAColumn: a full refresh takes its columns' names
// from the live describe alone, which may spell a field differently than
// the stream's history (DuckDB takes the two for one column, ignoring
// case). The history keeps its column, in its first spelling, widened to
// the new type; the refreshed table takes the new spelling; a later run
// that spells it a third way loads into the same columns (a replace
// stream's view shows that spelling) and counts no new row for a row it
// already holds.
func TestFullRefreshRespellsAColumn(t *testing.T) {
	t.Parallel()
	const history = `id|BIGINT
Name|VARCHAR
Score|VARCHAR
snapshot_date|DATE
`
	const historyRows = `1|a|5|2026-11-23
1|b|x|2026-11-24
1|b|x|2026-11-25
`
	for _, c := range []struct {
		mode          load.WriteMode
		columns, rows string
	}{
		{load.Replace, "id|BIGINT\nNAME|VARCHAR\nscore|VARCHAR\n", "1|b|x\n"},
		{load.Append, "id|BIGINT\nname|VARCHAR\nscore|VARCHAR\n_sepipe_run_id|VARCHAR\n_sepipe_snapshot_date|DATE\n", "1|b|x\n1|b|x\n"},
		{load.Merge, "id|BIGINT\nname|VARCHAR\nscore|VARCHAR\n_sepipe_run_id|VARCHAR\n_sepipe_snapshot_date|DATE\n", "1|b|x\n"},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			lake, wh := newWarehouse(t)
			d1 := stageJSON(t, lake, "r1", []service.Field{{ID: "id", Type: "int"}, {ID: "Name", Type: "string"}, {ID: "Score", Type: "int"}},
				`{"id":1,"Name":"a","Score":5}`)
			d1.Mode = c.mode
			if err := commitOn(wh, "r1", "2026-11-23", d1); err != nil {
				t.Fatal(err)
			}
			d2 := stageJSON(t, lake, "r2", []service.Field{{ID: "id", Type: "int"}, {ID: "name", Type: "string"}, {ID: "score", Type: "string"}},
				`{"id":1,"name":"b","score":"x"}`)
			d2.Mode, d2.FullRefresh = c.mode, true
			if err := commitOn(wh, "r2", "2026-11-24", d2); err != nil {
				t.Fatalf("the full refresh: %v", err)
			}
			d3 := stageJSON(t, lake, "r3", []service.Field{{ID: "id", Type: "int"}, {ID: "NAME", Type: "string"}, {ID: "score", Type: "string"}},
				`{"id":1,"NAME":"b","score":"x"}`)
			d3.Mode = c.mode
			news := int64(-1)
			d3.NewRows = &news
			if err := commitOn(wh, "r3", "2026-11-25", d3); err != nil {
				t.Fatalf("the run after: %v", err)
			}
			if got := columnsOf(t, wh, "thing_history"); got != history {
				t.Errorf("history columns:\n%swant\n%s", got, history)
			}
			if got := rowsOf(t, wh, `SELECT id, name, score, snapshot_date FROM thing_history ORDER BY ALL`); got != historyRows {
				t.Errorf("history rows:\n%swant\n%s", got, historyRows)
			}
			if got := columnsOf(t, wh, "thing"); got != c.columns {
				t.Errorf("table columns:\n%swant\n%s", got, c.columns)
			}
			if got := rowsOf(t, wh, `SELECT id, name, score FROM thing ORDER BY ALL`); got != c.rows {
				t.Errorf("table rows:\n%swant\n%s", got, c.rows)
			}
			if news != 0 {
				t.Errorf("the run after counted %d new rows, want 0 (it brings the row the table holds)", news)
			}
		})
	}
}

// TestStreamWithoutFields: an object whose describe lists no field has
// no columns to load. The commit refuses it, naming the object, before
// any SQL (which would not parse); its run commits nothing, and the
// stream's earlier days stay. The early load refuses it alike.
func TestStreamWithoutFields(t *testing.T) {
	t.Parallel()
	for _, mode := range []load.WriteMode{load.Replace, load.Append, load.Merge} {
		t.Run(string(mode), func(t *testing.T) {
			lake, wh := newWarehouse(t)
			d1 := stageJSON(t, lake, "r1", []service.Field{{ID: "id", Type: "int"}}, `{"id":1}`)
			d1.Mode = mode
			if err := commitOn(wh, "r1", "2026-11-23", d1); err != nil {
				t.Fatal(err)
			}
			d2 := stageJSON(t, lake, "r2", nil, `{}`, `{}`)
			d2.Mode = mode
			err := commitOn(wh, "r2", "2026-11-24", d2)
			var we *load.WriteError
			if !errors.As(err, &we) || we.Object != "thing" || !errors.Is(err, schemas.ErrNoFields) {
				t.Fatalf("commit of a stream without fields: %v, want a WriteError of thing wrapping ErrNoFields", err)
			}
			if got, want := err.Error(), `object "thing": load thing: the stream has no fields`; got != want {
				t.Errorf("error %q, want %q", got, want)
			}
			if got, want := rowsOf(t, wh, `SELECT id, snapshot_date FROM thing_history ORDER BY ALL`), "1|2026-11-23\n"; got != want {
				t.Errorf("history rows:\n%swant\n%s", got, want)
			}
			if got, want := rowsOf(t, wh, `SELECT run_id FROM _sepipe_runs ORDER BY ALL`), "r1\n"; got != want {
				t.Errorf("runs:\n%swant\n%s", got, want)
			}

			ctx := context.Background()
			day := "2026-11-24"
			now, _ := time.Parse(time.DateOnly, day)
			rl, err := wh.Begin(ctx, load.Run{ID: "r3", Started: now, SnapshotDate: day})
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Rollback()
			err = rl.LoadFiles(ctx, d2)
			if !errors.As(err, &we) || we.Object != "thing" || !errors.Is(err, schemas.ErrNoFields) {
				t.Fatalf("early load of a stream without fields: %v, want a WriteError of thing wrapping ErrNoFields", err)
			}
			if n := rl.Loaded("thing"); n != 0 {
				t.Errorf("the early load took %d files of a stream without fields", n)
			}
		})
	}
}

// TestNewRowsAfterATypeWidened: x was a number, and a run brings text
// (not a number, and a number past INTEGER): the count compares both
// as text, not the text cast to the table's type, which failed the
// run's load ("Could not convert string 'abc'"; found by review).
func TestNewRowsAfterATypeWidened(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	num := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "int"}}
	text := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "string"}}
	d1 := stageJSON(t, lake, "r1", num, `{"id":1,"x":5}`, `{"id":2,"x":6}`)
	d1.Mode = load.Replace
	if err := commitOn(wh, "r1", "2026-11-23", d1); err != nil {
		t.Fatal(err)
	}
	d2 := stageJSON(t, lake, "r2", text, `{"id":1,"x":"5"}`, `{"id":2,"x":"abc"}`)
	d2.Mode = load.Replace
	var news int64
	d2.NewRows = &news
	if err := commitOn(wh, "r2", "2026-11-24", d2); err != nil {
		t.Fatal(err)
	}
	if news != 1 {
		t.Errorf("%d new rows, want 1 (x of id 2 changed)", news)
	}
	if got, want := rowsOf(t, wh, `SELECT id, x FROM thing ORDER BY id`), "1|5\n2|abc\n"; got != want {
		t.Errorf("table rows:\n%swant\n%s", got, want)
	}
}

// TestNewRowsAfterATypeNarrowed: a full refresh reads x as a number where
// the history holds it as text (a wider type, kept); the next run, with
// the same rows, counts none as new (their hashes were of a number
// against text: every row counted as new, on every run after).
func TestNewRowsAfterATypeNarrowed(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	text := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "string"}}
	num := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "int"}}
	d1 := stageJSON(t, lake, "r1", text, `{"id":1,"x":"5"}`, `{"id":2,"x":"6"}`)
	d1.Mode = load.Replace
	if err := commitOn(wh, "r1", "2026-11-23", d1); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		day  string
		rows []string
		news int64
	}{
		{"2026-11-24", []string{`{"id":1,"x":5}`, `{"id":2,"x":6}`}, 0}, // the same values, now numbers
		{"2026-11-25", []string{`{"id":1,"x":5}`, `{"id":2,"x":6}`}, 0},
		{"2026-11-26", []string{`{"id":1,"x":5}`, `{"id":2,"x":7}`}, 1},
	} {
		id := fmt.Sprintf("r%d", i+2)
		d := stageJSON(t, lake, id, num, c.rows...)
		d.Mode, d.FullRefresh = load.Replace, i == 0
		var news int64
		d.NewRows = &news
		if err := commitOn(wh, id, c.day, d); err != nil {
			t.Fatal(err)
		}
		if news != c.news {
			t.Errorf("%s: %d new rows, want %d", c.day, news, c.news)
		}
	}
	if got, want := columnsOf(t, wh, "thing_history"), "id|BIGINT\nx|VARCHAR\nsnapshot_date|DATE\n"; got != want {
		t.Errorf("history columns:\n%swant\n%s", got, want)
	}
}

// TestWidenedColumnKeepsTheServiceText: a column widened to text holds
// its earlier days' values as the service sends them, as the later days
// hold theirs: a whole number without ".0", an instant as ISO 8601 in
// UTC (a plain cast wrote 2.0 and 2026-01-02 00:00:00+00; found by
// review), and a JSON column a number as a number.
func TestWidenedColumnKeepsTheServiceText(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	typed := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "float"}, {ID: "d", Type: "date"}}
	text := []service.Field{{ID: "id", Type: "int"}, {ID: "x", Type: "string"}, {ID: "d", Type: "string"}}
	d1 := stageJSON(t, lake, "r1", typed, `{"id":1,"x":2,"d":"2026-01-02T00:00:00Z"}`, `{"id":2,"x":2.5,"d":"2026-01-02T03:04:05.25+02:00"}`)
	d1.Mode = load.Replace
	if err := commitOn(wh, "r1", "2026-11-23", d1); err != nil {
		t.Fatal(err)
	}
	d2 := stageJSON(t, lake, "r2", text, `{"id":1,"x":"2","d":"2026-01-02T00:00:00Z"}`, `{"id":3,"x":"abc","d":"soon"}`)
	d2.Mode = load.Replace
	var news int64
	d2.NewRows = &news
	if err := commitOn(wh, "r2", "2026-11-24", d2); err != nil {
		t.Fatal(err)
	}
	want := "1|2|2026-01-02T00:00:00Z|2026-11-23\n2|2.5|2026-01-02T01:04:05.250000Z|2026-11-23\n" +
		"1|2|2026-01-02T00:00:00Z|2026-11-24\n3|abc|soon|2026-11-24\n"
	if got := rowsOf(t, wh, `SELECT id, x, d, snapshot_date FROM thing_history ORDER BY snapshot_date, id`); got != want {
		t.Errorf("history:\n%swant\n%s", got, want)
	}
	if news != 1 {
		t.Errorf("%d new rows, want 1 (id 1 is the same row, as the service sent it)", news)
	}
}

// TestHistoryWidensAsTheSchemasDo: a collection's field was boolean and a
// full refresh reads it as an integer (its stored fields dropped, the
// items alone decide). The warehouse widened the history's column by a
// rule of its own, to BIGINT, turning the earlier days' true into 1, where
// schemas.Widen, the rule of every other stage, makes boolean and int a
// string (issue 41: two owners that disagreed). The history's column is
// now the text the service sent, each day's value as it was.
func TestHistoryWidensAsTheSchemasDo(t *testing.T) {
	t.Parallel()
	lake, wh := newWarehouse(t)
	stage := func(run string, typ string, rows ...string) load.Table {
		t.Helper()
		sch, err := schemas.ForCollection("thing", []service.Field{{ID: "id", Type: service.TypeInt}, {ID: "x", Type: typ}})
		if err != nil {
			t.Fatal(err)
		}
		tb := stageSchema(t, lake, run, sch, rows...)
		tb.Mode = load.Replace
		return tb
	}
	if err := commitOn(wh, "r1", "2026-11-23", stage("r1", service.TypeBool, `{"id":1,"x":true}`)); err != nil {
		t.Fatal(err)
	}
	d2 := stage("r2", service.TypeInt, `{"id":1,"x":5}`)
	d2.FullRefresh = true
	if err := commitOn(wh, "r2", "2026-11-24", d2); err != nil {
		t.Fatal(err)
	}
	want := schemas.Widen(service.TypeBool, service.TypeInt)
	wt, _ := schemas.TypeNamed(want)
	if got := columnsOf(t, wh, "thing_history"); got != "id|BIGINT\nx|"+wt.DuckDB+"\nsnapshot_date|DATE\n" {
		t.Errorf("history columns:\n%swant x as %s (%s), as schemas.Widen decides", got, wt.DuckDB, want)
	}
	if got, want := rowsOf(t, wh, `SELECT x FROM thing_history ORDER BY snapshot_date`), "true\n5\n"; got != want {
		t.Errorf("history values:\n%swant\n%s", got, want)
	}
}
