package load_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/service"
)

// versionsModel is what a stream's history must answer: the rows of each
// read day, as canonical text (id|name|score|extra, NULL for null).
type versionsModel map[string][]string

// canonical is the SQL of a history row's canonical text; extra is false
// while the stream has no such column.
func canonical(extra bool) string {
	e := "'NULL'"
	if extra {
		e = "coalesce(CAST(extra AS VARCHAR), 'NULL')"
	}
	return "coalesce(CAST(id AS VARCHAR), 'NULL') || '|' || coalesce(CAST(name AS VARCHAR), 'NULL') || '|' || coalesce(CAST(score AS VARCHAR), 'NULL') || '|' || " + e
}

// historyByDay reads thing_history as the model holds it.
func historyByDay(t *testing.T, wh *load.Warehouse, q string) versionsModel {
	t.Helper()
	rows, err := wh.DB().Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	got := versionsModel{}
	for rows.Next() {
		var day time.Time
		var row string
		if err := rows.Scan(&row, &day); err != nil {
			t.Fatal(err)
		}
		d := day.Format(time.DateOnly)
		got[d] = append(got[d], row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func hasExtra(t *testing.T, wh *load.Warehouse) bool {
	return count(t, wh.DB(), `SELECT count(*) FROM duckdb_columns() WHERE table_name = 'thing_history' AND column_name = 'extra'`) > 0
}

// checkHistory compares thing_history, day by day and row for row, with
// the model, and the versions with their rules: no two current versions
// of the same values, and no version that only continues another (the
// same values and count, opened on the day the other closed).
func checkHistory(t *testing.T, wh *load.Warehouse, want versionsModel, step string) {
	t.Helper()
	got := historyByDay(t, wh, "SELECT "+canonical(hasExtra(t, wh))+", snapshot_date FROM thing_history")
	for d := range want {
		if _, ok := got[d]; !ok {
			got[d] = nil // a day read with no row
		}
	}
	for _, m := range []versionsModel{got, want} {
		for d := range m {
			m[d] = slices.Sorted(slices.Values(m[d]))
		}
	}
	for d, rows := range want {
		if !slices.Equal(got[d], rows) {
			t.Errorf("%s: history of %s:\n%v\nwant\n%v", step, d, got[d], rows)
		}
	}
	for d := range got {
		if _, ok := want[d]; !ok {
			t.Errorf("%s: history has day %s, which was not read", step, d)
		}
	}
	cols := "id, name, score"
	if hasExtra(t, wh) {
		cols += ", extra"
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM (SELECT `+cols+` FROM thing_versions WHERE _sepipe_valid_to IS NULL GROUP BY ALL HAVING count(*) > 1)`); n != 0 {
		t.Errorf("%s: %d values have more than one current version", step, n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_versions a JOIN thing_versions b ON a._sepipe_valid_to = b._sepipe_valid_from
		AND a._sepipe_rows = b._sepipe_rows AND (a.id, a.name, a.score) IS NOT DISTINCT FROM (b.id, b.name, b.score)`+
		map[bool]string{true: " AND a.extra IS NOT DISTINCT FROM b.extra", false: ""}[hasExtra(t, wh)]); n != 0 {
		t.Errorf("%s: %d versions only continue another", step, n)
	}
}

// vrow is a row of TestVersionsAnswerEveryDay's stream ("" for null).
type vrow struct {
	id                 int
	name, score, extra string
}

func (v vrow) json(scoreText bool) string {
	q := func(s string) string {
		if s == "" {
			return "null"
		}
		return `"` + s + `"`
	}
	score := v.score
	if scoreText {
		score = q(score)
	}
	return fmt.Sprintf(`{"id":%d,"name":%s,"score":%s,"extra":%s}`, v.id, q(v.name), score, q(v.extra))
}

func (v vrow) canon() string {
	n := func(s string) string {
		if s == "" {
			return "NULL"
		}
		return s
	}
	return fmt.Sprintf("%d|%s|%s|%s", v.id, n(v.name), n(v.score), n(v.extra))
}

// TestVersionsAnswerEveryDay runs a stream through thirty runs of random
// rows (rows repeated, gone and back, null values, days with no row, runs
// that skip days), in every write mode (some runs a full refresh), with a
// column added and a column widened (int to text) on the way, reruns of the last day and runs of a
// day before it (a clock set back): after each, its history answers,
// for every day read, exactly that day's rows, as the daily copies did,
// and a replace stream's table is the run's day.
func TestVersionsAnswerEveryDay(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			lake, wh := newWarehouse(t)
			r := rand.New(rand.NewPCG(seed, 43))
			model := versionsModel{}
			first := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
			next := 0 // the next new day, as days after first
			var prev []vrow
			for i := range 30 {
				var day int
				switch last := next - 1; {
				case i > 0 && r.IntN(7) == 0:
					day = last // a rerun of the last day
				case i > 3 && r.IntN(8) == 0:
					day = r.IntN(last) // a day before the last, read or not
				default:
					day = next + r.IntN(2) // sometimes a day without a run
					next = day + 1
				}
				D := first.AddDate(0, 0, day).Format(time.DateOnly)
				fields := []service.Field{{ID: "id", Type: "int"}, {ID: "name", Type: "string"}, {ID: "score", Type: "int"}}
				if i >= 10 {
					fields = append(fields, service.Field{ID: "extra", Type: "string"})
				}
				if i >= 20 {
					fields[2].Type = "string"
				}
				// Most of a day's rows are the day before's (as a tenant's
				// are), some gone, some new.
				var kept []vrow
				for _, v := range prev {
					if r.IntN(4) > 0 {
						kept = append(kept, v)
					}
				}
				for range r.IntN(6) {
					v := vrow{id: r.IntN(15), name: []string{"a", "b", ""}[r.IntN(3)], score: fmt.Sprint(r.IntN(3))}
					if i >= 20 && r.IntN(2) == 0 {
						v.score = "x"
					}
					if i >= 10 && r.IntN(2) == 0 {
						v.extra = "e"
					}
					kept = append(kept, v)
				}
				prev = kept
				var rows, canon []string
				for _, v := range kept {
					rows = append(rows, v.json(i >= 20))
					canon = append(canon, v.canon())
				}
				id := fmt.Sprintf("r%02d", i)
				tb := stageJSON(t, lake, id, fields, rows...)
				tb.Mode, tb.PrimaryKey = []load.WriteMode{load.Replace, load.Replace, load.Append, load.Merge}[r.IntN(4)], []string{"id"}
				tb.FullRefresh = r.IntN(6) == 0 // the stream's table rebuilt from this read; its history folds the day as any
				now := first.AddDate(0, 0, day).Add(time.Hour)
				if err := wh.Commit(ctx, load.Run{ID: id, Started: now, Finished: now, Status: "succeeded", SnapshotDate: D}, []load.Table{tb}); err != nil {
					t.Fatalf("run %s of %s: %v", id, D, err)
				}
				model[D] = canon
				step := fmt.Sprintf("run %s (%s, %s, full refresh %v)", id, D, tb.Mode, tb.FullRefresh)
				checkHistory(t, wh, model, step)
				if tb.Mode == load.Replace {
					got := historyByDay(t, wh, "SELECT "+canonical(i >= 10)+", DATE "+load.Literal(D)+" FROM thing")
					if g, w := slices.Sorted(slices.Values(got[D])), slices.Sorted(slices.Values(canon)); !slices.Equal(g, w) {
						t.Errorf("%s: the table holds\n%v\nwant the day's\n%v", step, g, w)
					}
				}
			}
			// Versions, not copies: at most the rows of all days, and here
			// fewer, for rows that stay across days share a version.
			var all int64
			for _, rows := range model {
				all += int64(len(rows))
			}
			if v := count(t, wh.DB(), `SELECT count(*) FROM thing_versions`); v >= all {
				t.Errorf("%d versions for %d rows of %d days", v, all, len(model))
			}
		})
	}
}

// TestVersionsMigrateDailyCopies: a warehouse an earlier release wrote,
// whose history is a table of daily copies (a day with no row among its
// runs), is migrated when it is opened: the history answers the same rows
// on the same days, the daily copies are gone, and the next run folds
// into the versions.
func TestVersionsMigrateDailyCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := load.Lake{Root: t.TempDir()}
	wh, err := load.OpenState(ctx, lake)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE thing_history (id BIGINT, name VARCHAR, snapshot_date DATE, score BIGINT)`,
		`INSERT INTO thing_history VALUES (1, 'a', '2026-11-01', NULL), (2, 'b', '2026-11-01', NULL), (2, 'b', '2026-11-01', NULL),
			(1, 'a', '2026-11-02', 5), (2, 'b', '2026-11-02', NULL), (1, 'a', '2026-11-04', 5), (3, NULL, '2026-11-04', 7)`,
		`INSERT INTO _sepipe_runs (run_id, started_at, status, snapshot_date) VALUES ('r1', now(), 'succeeded', '2026-11-01'),
			('r2', now(), 'succeeded', '2026-11-02'), ('r3', now(), 'succeeded', '2026-11-03'), ('r4', now(), 'succeeded', '2026-11-04')`,
		`INSERT INTO _sepipe_run_objects (run_id, object, rows, rejected_rows, status) VALUES ('r1', 'thing', 3, 0, 'committed'),
			('r2', 'thing', 2, 0, 'committed'), ('r3', 'thing', 0, 0, 'committed'), ('r4', 'thing', 2, 0, 'committed')`,
		`CREATE VIEW thing AS SELECT id, name, score FROM thing_history WHERE snapshot_date = DATE '2026-11-04'`,
	} {
		if _, err := wh.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	want := versionsModel{
		"2026-11-01": {"1|a|NULL|NULL", "2|b|NULL|NULL", "2|b|NULL|NULL"},
		"2026-11-02": {"1|a|5|NULL", "2|b|NULL|NULL"},
		"2026-11-03": nil,
		"2026-11-04": {"1|a|5|NULL", "3|NULL|7|NULL"},
	}
	wh.Close()
	if wh, err = load.OpenState(ctx, lake); err != nil {
		t.Fatalf("open the earlier release's folder: %v", err)
	}
	defer wh.Close()
	if n := count(t, wh.DB(), `SELECT count(*) FROM duckdb_views() WHERE view_name = 'thing_history'`); n != 1 {
		t.Fatal("the history is not a view after the migration")
	}
	checkHistory(t, wh, want, "migrated")
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing`); n != 2 {
		t.Errorf("the table shows %d rows, want its day's 2", n)
	}
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_versions`); n != 6 {
		t.Errorf("%d versions, want 6 (1|a|5 twice: gone on the day of no row)", n)
	}
	tb := stageJSON(t, lake, "r5", []service.Field{{ID: "id", Type: "int"}, {ID: "name", Type: "string"}, {ID: "score", Type: "int"}},
		`{"id":1,"name":"a","score":5}`)
	tb.Mode = load.Replace
	now := time.Date(2026, 11, 5, 1, 0, 0, 0, time.UTC)
	if err := wh.Commit(ctx, load.Run{ID: "r5", Started: now, Finished: now, Status: "succeeded", SnapshotDate: "2026-11-05"}, []load.Table{tb}); err != nil {
		t.Fatal(err)
	}
	want["2026-11-05"] = []string{"1|a|5|NULL"}
	checkHistory(t, wh, want, "the run after")
	if n := count(t, wh.DB(), `SELECT count(*) FROM thing_versions WHERE _sepipe_valid_to IS NULL`); n != 1 {
		t.Errorf("%d current versions, want 1", n)
	}
	if !strings.Contains(rowsOf(t, wh, `SELECT sql FROM duckdb_views() WHERE view_name = 'thing'`), "thing_versions") {
		t.Error("the table is not a view of the versions after the run")
	}
}
