package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// endsAt is a context that ends at the k-th look at its Err (Done is nil,
// so only those looks see it): a sweep over k ends a statement at every
// point where the driver looks.
type endsAt struct {
	context.Context
	looks, k int
}

func (c *endsAt) Err() error {
	c.looks++
	if c.looks >= c.k {
		return context.Canceled
	}
	return nil
}

func (c *endsAt) Done() <-chan struct{} { return nil }

// TestCloseAfterAnEndedStatement: a statement (or a script of two) whose
// context ends at any point the driver looks leaves nothing of its
// database open after closeDuckDB, so the next open of the file in the
// process returns. Closed plainly, a statement ended between DuckDB's
// preparing and running it (the seventh look) kept the database alive,
// and the next open spun forever in DuckDB's instance cache.
func TestCloseAfterAnEndedStatement(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.duckdb")
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS t (a INTEGER)",
		"CREATE TABLE IF NOT EXISTS t (a INTEGER); CREATE TABLE IF NOT EXISTS u (b VARCHAR)",
	} {
		var ended, ran bool
		for k := 1; k <= 30; k++ {
			db, err := sql.Open("duckdb", path)
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			if err := db.Ping(); err != nil {
				t.Fatal(err)
			}
			_, err = db.ExecContext(&endsAt{Context: context.Background(), k: k}, q)
			switch {
			case errors.Is(err, context.Canceled):
				ended = true
			case err == nil:
				ran = true
			default:
				t.Fatalf("%q, context ended at look %d: %v", q, k, err)
			}
			if err := closeDuckDB(db); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				db, err := sql.Open("duckdb", path)
				if err == nil {
					err = db.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("open after %q ended at look %d: %v", q, k, err)
				}
			case <-time.After(30 * time.Second):
				// A spinning open cannot be stopped, and every later open
				// of the file would spin too: end the test binary here.
				panic(fmt.Sprintf("the open after %q, its context ended at look %d, has not returned in 30 s: the database stayed open", q, k))
			}
		}
		if !ended || !ran {
			t.Errorf("%q: ended %v, ran %v: the sweep did not span the statement", q, ended, ran)
		}
	}
}
