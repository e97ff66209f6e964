package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// newRows counts, for the summary, the rows a run brought that the table
// did not hold before: for a merge stream the rows it inserted or changed,
// for replace and append the rows whose content is new. Before the run it
// keeps one hash per row of each table in an in-memory DuckDB (the
// warehouse is attached read-only and detached again, so the run can take
// it); after the run it compares. It is best effort: when it cannot count,
// the summary shows "-".
type newRows struct {
	db     *sql.DB
	path   string
	before map[string]bool // object -> had a table (hashes in pre_<object>)
}

// bookkeeping columns are not part of a row's content.
func contentColumns(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE database_name = 'wh' AND table_name = ? ORDER BY column_index`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		if c != load.ColRunID && c != load.ColSnapshotDate {
			cols = append(cols, load.Ident(c))
		}
	}
	return cols, rows.Err()
}

func rowHash(cols []string) string { return "hash(" + strings.Join(cols, ", ") + ")" }

// snapshotNewRows hashes the rows of the given objects' tables. A locked
// warehouse is returned as an error (the run would fail on it anyway);
// other failures give a nil counter.
func snapshotNewRows(ctx context.Context, out string, objects []string) (*newRows, error) {
	path := load.Lake{Root: out}.WarehousePath()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, nil
	}
	db.SetMaxOpenConns(1)
	n := &newRows{db: db, path: path, before: map[string]bool{}}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return n, nil // first run: every row is new
	}
	if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(path)+" AS wh (READ_ONLY)"); err != nil {
		// Locked or unreadable: no NEW counts this time. The sync itself
		// waits for a lock to go away (pipeline.Config.LockWait) and says
		// so when it does not.
		db.Close()
		return nil, nil
	}
	defer db.ExecContext(ctx, "DETACH wh") //nolint:errcheck
	for i, o := range objects {
		cols, err := contentColumns(ctx, db, o)
		if err != nil || len(cols) == 0 {
			continue
		}
		q := fmt.Sprintf("CREATE TEMP TABLE pre_%d AS SELECT DISTINCT %s AS h FROM wh.%s", i, rowHash(cols), load.Ident(o))
		if _, err := db.ExecContext(ctx, q); err != nil {
			continue
		}
		n.before[o] = true
	}
	return n, nil
}

// count returns the new rows per object of res; objects it could not count
// are missing from the map.
func (n *newRows) count(ctx context.Context, res *pipeline.Result, objects []string) map[string]int64 {
	if n == nil || res == nil {
		return nil
	}
	defer n.db.Close()
	if _, err := n.db.ExecContext(ctx, "ATTACH "+load.Literal(n.path)+" AS wh (READ_ONLY)"); err != nil {
		return nil
	}
	defer n.db.ExecContext(ctx, "DETACH wh") //nolint:errcheck
	out := map[string]int64{}
	for _, o := range res.Objects {
		if o.Err != nil {
			continue
		}
		if !n.before[o.Object] {
			out[o.Object] = o.Rows
			continue
		}
		i := indexOf(objects, o.Object)
		cols, err := contentColumns(ctx, n.db, o.Object)
		if err != nil || i < 0 {
			continue
		}
		where := ""
		if o.Mode == load.Append || o.Mode == load.Merge {
			where = " WHERE " + load.Ident(load.ColRunID) + " = " + load.Literal(res.RunID)
		}
		q := fmt.Sprintf("SELECT count(*) FROM (SELECT %s AS h FROM wh.%s%s) t ANTI JOIN pre_%d p USING (h)",
			rowHash(cols), load.Ident(o.Object), where, i)
		var c int64
		if err := n.db.QueryRowContext(ctx, q).Scan(&c); err == nil {
			out[o.Object] = c
		}
	}
	return out
}

func (n *newRows) close() {
	if n != nil {
		n.db.Close()
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
