package load

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScriptOutlivesItsContext: a script of several statements whose
// context ends at any moment leaves nothing of its database open, so the
// next open of the file in the process returns. duckdb-go leaked the
// database when a context interrupted a script (five to fifteen tries of
// this loop), and DuckDB's instance cache then spun forever on the next
// open, holding the lock every open takes.
func TestScriptOutlivesItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	var script strings.Builder
	for i := range 40 {
		fmt.Fprintf(&script, "CREATE TABLE IF NOT EXISTS t%d (a INTEGER, b VARCHAR);\n", i)
	}
	for i := range 150 {
		db, err := sql.Open("duckdb", path)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
		err = execScript(ctx, db, script.String())
		cancel()
		if cerr := db.Close(); cerr != nil {
			t.Fatal(cerr)
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
		case oerr := <-done:
			if oerr != nil {
				t.Fatalf("open after script %d: %v", i, oerr)
			}
		case <-time.After(time.Minute):
			// The cache spins holding its lock: no later open in this
			// process would get through. Stop here.
			panic(fmt.Sprintf("the open after script %d (%v) has not returned in a minute: the script left its database open", i, err))
		}
	}
}
