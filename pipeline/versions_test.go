package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/longtest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// toDailyCopies makes the working database of out as the release before
// versions left it: each history a table of every day's rows, each
// replace stream's table a view of its history's last day, no versions.
func toDailyCopies(t *testing.T, out string) {
	t.Helper()
	db, err := sql.Open("duckdb", load.Lake{Root: out}.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var last string
	if err := db.QueryRow(`SELECT strftime(max(day), '%Y-%m-%d') FROM _sepipe_history_days`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT view_name FROM duckdb_views() WHERE NOT internal AND suffix(view_name, '_history')`)
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		hist = append(hist, n)
	}
	rows.Close()
	if len(hist) < 5 {
		t.Fatalf("only %d histories: %v", len(hist), hist)
	}
	for _, h := range hist {
		obj := strings.TrimSuffix(h, "_history")
		qs := []string{
			"CREATE TABLE _copy AS SELECT * FROM " + load.Ident(h),
			"DROP VIEW " + load.Ident(h),
			"DROP TABLE " + load.Ident(load.VersionsTable(obj)),
			"ALTER TABLE _copy RENAME TO " + load.Ident(h),
		}
		var kind string
		db.QueryRow(`SELECT 'view' FROM duckdb_views() WHERE view_name = ?`, obj).Scan(&kind)
		if kind == "view" {
			qs = append(qs, "CREATE OR REPLACE VIEW "+load.Ident(obj)+" AS SELECT * EXCLUDE (snapshot_date) FROM "+load.Ident(h)+
				" WHERE snapshot_date = DATE "+load.Literal(last))
		}
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	if _, err := db.Exec("DROP TABLE _sepipe_history_days"); err != nil {
		t.Fatal(err)
	}
}

// sameHistory compares every history of the published warehouses of
// want and got, row for row, on the days up to through.
func sameHistory(t *testing.T, want, got, through string) {
	t.Helper()
	db := warehousetest.Open(t, got)
	if _, err := db.Exec("ATTACH " + load.Literal(filepath.Join(want, "warehouse.duckdb")) + " AS ref (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DETACH ref")
	rows, err := db.Query(`SELECT view_name FROM duckdb_views() WHERE database_name = 'ref' AND NOT internal AND suffix(view_name, '_history') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		hist = append(hist, n)
	}
	rows.Close()
	for _, h := range hist {
		var cols []string
		rows, _ := db.Query(`SELECT column_name FROM duckdb_columns() WHERE database_name = 'ref' AND table_name = ? ORDER BY column_index`, h)
		for rows.Next() {
			var c string
			rows.Scan(&c)
			if l := strings.ToLower(c); !strings.HasSuffix(l, "href") && !strings.HasSuffix(l, "url") {
				cols = append(cols, load.Ident(c))
			}
		}
		rows.Close()
		sel := strings.Join(cols, ", ")
		days := warehousetest.Scalar[int64](t, db, "SELECT count(DISTINCT snapshot_date) FROM ref.main."+load.Ident(h))
		if days < 2 {
			t.Errorf("%s: %d days in the reference", h, days)
		}
		a, b := "ref.main."+load.Ident(h), "warehouse.main."+load.Ident(h)
		for _, pair := range [][2]string{{a, b}, {b, a}} {
			q := fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s WHERE snapshot_date <= DATE %s EXCEPT ALL SELECT %s FROM %s WHERE snapshot_date <= DATE %s)",
				sel, pair[0], load.Literal(through), sel, pair[1], load.Literal(through))
			if n := warehousetest.Scalar[int64](t, db, q); n != 0 {
				t.Errorf("%s: %d rows of %s are not in %s", h, n, pair[0], pair[1])
			}
		}
	}
}

// TestHistoryMigratesFromDailyCopies: an output folder the release before
// versions synced for three nights (each history a table of daily
// copies) is opened by a sync that is killed while it migrates: the
// folder stays as it was; the next sync migrates it, and every history
// answers the three nights exactly as before, with the new night after
// them.
func TestHistoryMigratesFromDailyCopies(t *testing.T) {
	longtest.Skip(t, "syncs five nights and kills a sync")
	ctx := context.Background()
	out, ref := t.TempDir(), t.TempDir()
	for d := range 3 {
		_, c := dayFake(t, d)
		if _, err := pipeline.Sync(ctx, c, killConfig(out, day1.Add(time.Duration(d)*24*time.Hour))); err != nil {
			t.Fatalf("night %d: %v", d+1, err)
		}
	}
	copyDir(t, out, ref)
	toDailyCopies(t, out)
	srv4, c4 := dayFake(t, 3)
	day4 := day1.Add(72 * time.Hour)
	cmd := startChild(t, srv4.URL, out, faults.HistoryMigrated.For(""), day4)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child was not killed while it migrated: %v", err)
	}
	if n := warehousetest.StateScalar[int64](t, out, `SELECT count(*) FROM duckdb_tables() WHERE suffix(table_name, '_versions')`); n != 0 {
		t.Errorf("the killed migration left %d versions tables", n)
	}
	if n := warehousetest.StateScalar[int64](t, out, `SELECT count(*) FROM duckdb_tables() WHERE suffix(table_name, '_history')`); n < 5 {
		t.Errorf("the killed migration left %d daily-copy tables", n)
	}
	if _, err := pipeline.Sync(ctx, c4, killConfig(out, day4)); err != nil {
		t.Fatal(err)
	}
	if n := warehousetest.StateScalar[int64](t, out, `SELECT count(*) FROM duckdb_tables() WHERE suffix(table_name, '_history')`); n != 0 {
		t.Errorf("%d daily-copy tables after the migration", n)
	}
	sameHistory(t, ref, out, day1.Add(48*time.Hour).Format(time.DateOnly))
	if n := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), `SELECT count(*) FROM course_history WHERE snapshot_date = DATE `+load.Literal(day4.Format(time.DateOnly))); n == 0 {
		t.Error("the night after the migration is not in the history")
	}
}
