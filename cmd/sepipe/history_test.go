package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/load"
)

// historyDigest is every history of out's published warehouse, each day's
// rows as a sum of their hashes and a count, by history and day.
func historyDigest(t *testing.T, out string) string {
	t.Helper()
	views := strings.Fields(queryOne(t, out, `SELECT string_agg(view_name, ' ' ORDER BY view_name) FROM duckdb_views() WHERE NOT internal AND suffix(view_name, '_history')`))
	if len(views) < 5 {
		t.Fatalf("only %d histories: %v", len(views), views)
	}
	var b strings.Builder
	for _, v := range views {
		b.WriteString(v + ": " + queryOne(t, out, `SELECT string_agg(d, ' ' ORDER BY d) FROM (SELECT snapshot_date || '=' || count(*) || '/' || sum(hash(COLUMNS(* EXCLUDE (snapshot_date))) % 1000003) AS d
			FROM `+load.Ident(v)+` GROUP BY snapshot_date)`) + "\n")
	}
	return b.String()
}

// TestHistoryRebuild: `sepipe history rebuild` makes the warehouse's
// history again from the lake: after a stream's versions were lost, every
// history answers as it did after the nights were synced; a stream the
// lake has no partition of is an error naming it, and changes nothing.
func TestHistoryRebuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo")
	mustRun(t, "demo", "--out", out, "--users", "20", "--days", "3", "--log-level", "warn")
	want := historyDigest(t, out)
	if strings.Count(want, "=") < 15 {
		t.Fatalf("the demo's histories hold few days:\n%s", want)
	}
	db, err := sql.Open("duckdb", load.Lake{Root: out}.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM course_versions WHERE hash(courseId) % 2 = 0; DROP VIEW user_history`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	mustRun(t, "publish", "--out", out)
	code, _, errOut := runCLI(t, "history", "rebuild", "--out", out, "course", "nosuchstream")
	if code == exitOK || !strings.Contains(errOut, "nosuchstream") {
		t.Errorf("rebuilding a stream the lake has not: exit %d, %q", code, errOut)
	}
	if got := historyDigest(t, filepath.Join(out)); got == want {
		t.Fatal("the damage did not change the histories: the test proves nothing")
	}
	got := mustRun(t, "history", "rebuild", "--out", out)
	for _, s := range []string{"course: 3 days", "user: 3 days", "published"} {
		if !strings.Contains(got, s) {
			t.Errorf("rebuild says:\n%s\nwant %q in it", got, s)
		}
	}
	if got := historyDigest(t, out); got != want {
		t.Errorf("rebuilt histories:\n%s\nwant\n%s", got, want)
	}
}
