package load

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// countNew counts the staged rows whose content is not in the table yet:
// all of them when the table does not exist or lacks one of their columns
// (a merge stream's new rows are counted by its merge: deleteOld).
// Under a memory limit the count runs on one thread, with the room
// countBytes gives it; a failure would fail the run's load (it ends
// DuckDB's transaction), for a count the summary shows. Both are given
// back after it, or, when it fails, by RunLoad.lowerMemory.
func countNew(ctx context.Context, tx *sql.Tx, t Table, room *loadRoom) (int64, error) {
	if len(t.Files) == 0 {
		return 0, nil
	}
	have, err := tableColumns(ctx, tx, t.Object)
	if err != nil {
		return 0, err
	}
	// Both sides' values in the wider of their two types: a hash depends
	// on the type, and a column the table holds wider than the run's
	// field (the history keeps a type a full refresh narrowed) counted
	// every row as new, on every run after; the table's side is cast too
	// when the run's field is the wider (the count runs before the load
	// widens the column, and text cast to a number fails).
	cols := make([]string, 0, t.Schema.NumFields())
	staged := make([]string, 0, t.Schema.NumFields())
	for _, f := range t.Schema.Fields() {
		col, ok := columnNamed(have, f.Name)
		if !ok {
			return t.Rows, nil
		}
		from, err := columnType(f)
		if err != nil {
			return 0, err
		}
		w := from // the same type, however DuckDB spells it: no cast
		if !sameType(have[col], from) {
			w = widerType(have[col], from)
		}
		cols = append(cols, castTo(Ident(col), have[col], w))
		staged = append(staged, castTo(Ident(f.Name), from, w))
	}
	var held int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+Ident(t.Object)).Scan(&held); err != nil {
		return 0, err
	}
	if err := room.oneThread(ctx, tx); err != nil {
		return 0, err
	}
	if _, err := room.set(ctx, tx, t.Object, "count new rows", countBytes(t.Rows+held)); err != nil {
		return 0, err
	}
	q := fmt.Sprintf("SELECT count(*) FROM (SELECT hash(%s) FROM %s EXCEPT ALL SELECT hash(%s) FROM %s)",
		strings.Join(staged, ", "), readStaged(t.Files), strings.Join(cols, ", "), Ident(t.Object))
	var n int64
	if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, err
	}
	if err := room.allThreads(ctx, tx); err != nil {
		return 0, err
	}
	_, err = room.set(ctx, tx, t.Object, "count new rows", 0)
	return n, err
}

// textLength is the SQL of the total length in bytes of a row's text
// keys (keys: the key fields), 0 without any.
func textLength(keys []arrow.Field) string {
	var parts []string
	for _, f := range keys {
		if isText(f) {
			parts = append(parts, "coalesce(strlen(CAST("+Ident(f.Name)+" AS VARCHAR)), 0)")
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " + ")
}

// mergeRows upserts the staged rows on the primary key and returns the
// rows it inserted, how many it should have (the distinct keys the run
// brought) and, when it counts, how many of them are new: a key the table
// did not hold, or a row whose columns (cols, quoted) differ from every
// row of its key the table held. When the staged rows hold a key twice,
// the one with the latest cursor (or the last one read) wins.
func mergeRows(ctx context.Context, tx *sql.Tx, run Run, t Table, cols []string, src string, counts bool, room *loadRoom) (inserted, want, fresh int64, err error) {
	table := Ident(t.Object)
	colList := strings.Join(cols, ", ")
	pk := make([]string, len(t.PrimaryKey))
	keyFields := make([]arrow.Field, len(t.PrimaryKey))
	var nullCheck []string
	for i, k := range t.PrimaryKey {
		idx := t.Schema.FieldIndices(k)
		if idx == nil {
			return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge", Err: fmt.Errorf("primary key field %q is not a column", k)}
		}
		pk[i], keyFields[i] = Ident(k), t.Schema.Field(idx[0])
		nullCheck = append(nullCheck, pk[i]+" IS NULL")
	}
	// One pass over the staged keys: rows without a key, and whether a
	// key may be held twice. The reader refuses a key read twice, so the
	// staged rows normally hold each key once: then they go in as they
	// are, read straight from the staged files. Only when a key may repeat
	// does a window pick each key's latest row into a temporary table; the
	// window keeps whole rows in memory (it failed a million-row merge
	// under the load's 64 MB).
	//
	// The pass counts distinct hashes of the keys, not the keys: fewer
	// distinct hashes than rows is all a repeated key can show, and a
	// collision of two keys' hashes only sends the rows through the window
	// (which then keeps them all). DuckDB spills either count, but grouping
	// by the keys themselves (two text keys, two threads, 20 M rows) failed
	// under 64 to 112 MB and under 160, and passed under 128, 192 and 224,
	// where the hashes' distinct count passes under keyCheckBytes' room
	// (which the window, when it runs, shares); it is faster too (5 M
	// rows: 0.3 s against 1.1 s).
	//
	// (The reader's own check compares the keys as their columns hold
	// them too, transform's appendKey; this one also takes a key that
	// changed its type between two reads of one run for one.) extra
	// counts the rows past the first of each key.
	if _, err := room.set(ctx, tx, t.Object, "merge: check keys", keyCheckBytes(t.Rows)); err != nil {
		return 0, 0, 0, err
	}
	var staged, nulls, hashes, extra int64
	var textBytes sql.NullFloat64
	q := "SELECT count(*), count(*) FILTER (WHERE " + strings.Join(nullCheck, " OR ") + "), count(DISTINCT hash(" +
		strings.Join(pk, ", ") + ")), avg(" + textLength(keyFields) + ") FROM " + src
	if err := tx.QueryRowContext(ctx, q).Scan(&staged, &nulls, &hashes, &textBytes); err != nil {
		return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge: check keys", Err: err}
	}
	if nulls > 0 {
		return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge", Err: fmt.Errorf("%d rows have a null primary key (%s)", nulls, strings.Join(t.PrimaryKey, ", "))}
	}
	from := src
	if hashes < staged {
		latest, err := latestRows(ctx, tx, t, cols, pk)
		if err != nil {
			return 0, 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE _sepipe_merge AS "+latest); err != nil {
			return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge: keep each key's latest row", Err: err}
		}
		defer tx.ExecContext(ctx, "DROP TABLE IF EXISTS _sepipe_merge") //nolint:errcheck
		// latestRows' copy, if it made one.
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS _sepipe_read"); err != nil {
			return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge: drop the rows read in order", Err: err}
		}
		var kept int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM _sepipe_merge").Scan(&kept); err != nil {
			return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge: count each key's latest row", Err: err}
		}
		from, extra = "_sepipe_merge", staged-kept
	}
	if _, err := room.set(ctx, tx, t.Object, "merge", 0); err != nil {
		return 0, 0, 0, err
	}
	var same int64
	if !t.FullRefresh {
		var compare []string // the columns whose change makes a row new, when counted
		if counts {
			compare = cols
		}
		st, err := deleteOld(ctx, tx, t, from, pk, compare, keyWidth(keyFields, textBytes.Float64), room)
		if err != nil {
			return 0, 0, 0, err
		}
		same = st.same
	}
	q = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) SELECT %s, ?, CAST(? AS DATE) FROM %s",
		table, colList, Ident(ColRunID), Ident(ColSnapshotDate), colList, from)
	res, err := tx.ExecContext(ctx, q, run.ID, run.SnapshotDate)
	if err != nil {
		return 0, 0, 0, &WriteError{Object: t.Object, Step: "merge: insert", Path: t.Object, Err: err}
	}
	n, _ := res.RowsAffected()
	return n, t.Rows - extra, n - same, nil
}

// latestRows is the query of each key's latest staged row (pk: the
// keys, quoted), for a merge whose staged rows may hold a key twice: the
// row of the latest cursor, then the last one read (files in name order,
// rows in file order). The read names its file fileColumn and its row
// DuckDB's file_row_number; a field of that name (in any case) cannot
// share a read with it ("not supported"), so the rows of such a stream
// are first copied, in the order read, into a temporary table whose row
// ids keep that order, under names of sepipe's own (c0, c1, ...; a field
// called rowid would hide the row ids too). That copy is a rare path: a
// key read twice in one run, by a stream with such a field.
func latestRows(ctx context.Context, tx *sql.Tx, t Table, cols, pk []string) (string, error) {
	var cursor string
	if t.Cursor != "" {
		cursor = Ident(t.Cursor) + " DESC NULLS LAST, "
	}
	if !hasField(t.Schema, "file_row_number") {
		return fmt.Sprintf("SELECT %s FROM %s QUALIFY row_number() OVER (PARTITION BY %s ORDER BY %s%s DESC, file_row_number DESC) = 1",
			strings.Join(cols, ", "), readStaged(t.Files, withFile, "file_row_number = true"), strings.Join(pk, ", "), cursor, fileColumn), nil
	}
	alias := make(map[string]string, len(cols)) // a quoted field's name in the copy
	copied := make([]string, len(cols))
	back := make([]string, len(cols))
	for i, c := range cols {
		alias[c] = fmt.Sprintf("c%d", i)
		copied[i] = c + " AS " + alias[c]
		back[i] = alias[c] + " AS " + c
	}
	keys := make([]string, len(pk))
	for i, k := range pk {
		keys[i] = alias[k]
	}
	if t.Cursor != "" {
		cursor = alias[Ident(t.Cursor)] + " DESC NULLS LAST, "
	}
	fail := func(err error) (string, error) {
		return "", &WriteError{Object: t.Object, Step: "merge: read the rows in order", Err: err}
	}
	var keep string
	if err := tx.QueryRowContext(ctx, "SELECT current_setting('preserve_insertion_order')::VARCHAR").Scan(&keep); err != nil {
		return fail(err)
	}
	if _, err := tx.ExecContext(ctx, "SET preserve_insertion_order = true"); err != nil {
		return fail(err)
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE TEMP TABLE _sepipe_read AS SELECT %s, %s FROM %s",
		strings.Join(copied, ", "), fileColumn, readStaged(t.Files, withFile)))
	if _, rerr := tx.ExecContext(ctx, "SET preserve_insertion_order = "+Literal(keep)); err == nil {
		err = rerr
	}
	if err != nil {
		return fail(err)
	}
	return fmt.Sprintf("SELECT %s FROM _sepipe_read QUALIFY row_number() OVER (PARTITION BY %s ORDER BY %s%s DESC, rowid DESC) = 1",
		strings.Join(back, ", "), strings.Join(keys, ", "), cursor, fileColumn), nil
}

// hasField reports whether s has a field called name, in any case (as
// DuckDB compares names: sameName).
func hasField(s *arrow.Schema, name string) bool {
	for _, f := range s.Fields() {
		if sameName(f.Name, name) {
			return true
		}
	}
	return false
}

// deleteBatchRows is how many row ids one of deleteOld's deletes takes
// at most, a power of two and a whole number of DuckDB's vectors of
// 2,048 rows: its join's hash table stays a few MB (the deletes of 2^19
// ids at once failed under 16 MB).
const (
	deleteBatchShift = 17
	deleteBatchRows  = 1 << deleteBatchShift
)

// deleteStats is what deleteOld did.
type deleteStats struct {
	joinLimit string // the memory limit the join ran under
	deleted   int64
	same      int64 // rows the run brings whose columns a deleted row held
	batches   int
	pinned    int64 // bytes its deletes pin until the next checkpoint
}

// findOld is the query of table's rows whose key (pk, quoted) is among
// from's rows, which hold each key once: their row ids (r; with byID
// false none, where a column of the table hides DuckDB's rowid) and, with
// cols, a hash of each row's columns (h) and whether the row is the one
// from brings (same). Each side brings only its keys and the hash to the
// join, under names of sepipe's own (k0, k1, ...: a field's name cannot
// take the row id's or the hash's).
func findOld(table, from string, pk, cols []string, byID bool) string {
	var tk, sk, on []string
	for i, k := range pk {
		a := fmt.Sprintf("k%d", i)
		tk, sk = append(tk, k+" AS "+a), append(sk, k+" AS "+a)
		on = append(on, "t."+a+" = s."+a)
	}
	var out []string
	if byID {
		tk, out = append(tk, "rowid AS r"), append(out, "t.r")
	}
	if len(cols) > 0 {
		hash := "hash(" + strings.Join(cols, ", ") + ") AS h"
		tk, sk, out = append(tk, hash), append(sk, hash), append(out, "t.h", "t.h = s.h AS same")
	}
	if len(out) == 0 {
		out = append(out, "true AS found")
	}
	join := " JOIN "
	if len(cols) == 0 {
		join = " SEMI JOIN " // from's columns are not needed
	}
	return "SELECT " + strings.Join(out, ", ") + " FROM (SELECT " + strings.Join(tk, ", ") + " FROM " + table + ") t" +
		join + "(SELECT " + strings.Join(sk, ", ") + " FROM " + from + ") s ON " + strings.Join(on, " AND ")
}

// hidesRowID reports whether one of a table's columns (have) hides
// DuckDB's rowid: a column of that name, in any case (columnNamed), is
// what rowid then names.
func hidesRowID(have map[string]string) bool {
	_, ok := columnNamed(have, "rowid")
	return ok
}

// keepOthers takes the doomed rows out of t's table (t), of held rows,
// total of them doomed, without deleting them one by one (doomed: what the
// table's rows are anti-joined with, "<relation> <alias> ON <condition>":
// their row ids, or the run's keys where a column hides the row ids): it
// copies the table's other rows into a new table, drops the old one and
// gives the new one its name, all in the run's transaction. A new table
// pins nothing, where deletes in most of a table's vectors would pin
// 8 bytes a row of it until the publish (loadRoom.rebuild), and so
// would deleting every row of a table that earlier merges deleted rows of
// (measured: failed under 24 MB at 3 M rows). It writes the other rows
// again instead. Views of the table find the new one by its name; its
// columns' comments are copied over. The counts must match; the
// transaction takes all of it back when they do not.
func keepOthers(ctx context.Context, tx *sql.Tx, t Table, doomed string, held, total int64) error {
	table := Ident(t.Object)
	fail := func(step string, err error) error {
		return &WriteError{Object: t.Object, Step: "merge: keep the other rows: " + step, Path: t.Object, Err: err}
	}
	next := "_sepipe_rebuild_" + t.Object
	if _, err := tx.ExecContext(ctx, "CREATE TABLE "+Ident(next)+" AS SELECT t.* FROM "+table+" t ANTI JOIN "+doomed); err != nil {
		return fail("copy them into "+next, err)
	}
	var kept int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+Ident(next)).Scan(&kept); err != nil {
		return fail("count the rows of "+next, err)
	}
	if kept != held-total {
		return fail("count the rows of "+next, fmt.Errorf("%d rows kept of %d, %d of them hold a key the run brings", kept, held, total))
	}
	// The columns' comments go with the old table: keep them (loadTable
	// sets the schema's own again after the load).
	rows, err := tx.QueryContext(ctx, `SELECT column_name, comment FROM duckdb_columns()
		WHERE schema_name = current_schema() AND table_name = ? AND comment IS NOT NULL`, t.Object)
	if err != nil {
		return fail("read the columns' comments", err)
	}
	var comments [][2]string
	for rows.Next() {
		var c [2]string
		if err := rows.Scan(&c[0], &c[1]); err != nil {
			rows.Close()
			return fail("read the columns' comments", err)
		}
		comments = append(comments, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("read the columns' comments", err)
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE "+table); err != nil {
		return fail("drop the old table", err)
	}
	if _, err := tx.ExecContext(ctx, "ALTER TABLE "+Ident(next)+" RENAME TO "+table); err != nil {
		return fail("rename "+next, err)
	}
	for _, c := range comments {
		if err := commentColumn(ctx, tx, table, c[0], c[1]); err != nil {
			return fail("comment column "+c[0], err)
		}
	}
	return nil
}

// deleteOld deletes the rows of t's table whose key (pk, quoted) is among
// the rows from brings, each key once, making room for what the deletes
// pin (room). With cols (quoted) it also counts the rows from brings that
// a deleted row of their key held unchanged (deleteStats.same): a hash of
// cols on each side of the join, the hashes countNew compares (its EXCEPT
// ALL of them over the whole table took about a third of a second of a
// nightly merge's load of 1 M rows, on one thread; the hashes cost the
// join about 0.1 s). It does not delete by one join of the two: DuckDB's
// delete could not spill that
// join (a merge of 5 M rows over as many failed under 64 MB, passing
// only under 160 MB, sometimes not under 128). It finds the doomed rows'
// ids first, a join whose result DuckDB spills, then deletes them in
// batches of at most deleteBatchRows ids, each a range of row ids (ranges
// of 2^deleteBatchShift ids, merged while their ids fit in one batch):
// a small join, the table's row groups outside the range skipped (the
// same merge: peak 177 MB under 64 MB). The limit
// is raised for the first join when it needs more (joinBytes), and for
// what the deletes pin (loadRoom). When they would pin too much
// (loadRoom.rebuild), it copies the table's other rows into a new one
// instead (keepOthers), as it does, whatever the pins, for a table of
// which a column hides DuckDB's row ids (a field called rowId, say): the
// ids would be that column's values.
func deleteOld(ctx context.Context, tx *sql.Tx, t Table, from string, pk, cols []string, keyBytes int64, room *loadRoom) (deleteStats, error) {
	table := Ident(t.Object)
	var st deleteStats
	fail := func(step string, err error) (deleteStats, error) {
		return st, &WriteError{Object: t.Object, Step: "merge: " + step, Path: t.Object, Err: err}
	}
	var held int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&held); err != nil {
		return fail("count the table's rows", err)
	}
	if held == 0 {
		return st, nil // a first sync: no join over the run's keys for nothing
	}
	have, err := tableColumns(ctx, tx, t.Object)
	if err != nil {
		return fail("read the table's columns", err)
	}
	byID := !hidesRowID(have)
	limit, err := room.set(ctx, tx, t.Object, "merge: find the old versions", joinBytes(held, t.Rows, keyBytes))
	if err != nil {
		return st, err
	}
	st.joinLimit = limit
	const gone = "_sepipe_gone"
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+gone+" AS "+findOld(table, from, pk, cols, byID)); err != nil {
		return fail("find the old versions", err)
	}
	defer tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+gone) //nolint:errcheck // a temporary table, gone with the connection
	if len(cols) > 0 {
		// The staged rows that a held row of their key matches: distinct
		// hashes, so that a key the table holds twice (a stream that was
		// an append stream) counts once. The hash covers the key.
		if err := tx.QueryRowContext(ctx, "SELECT count(DISTINCT h) FILTER (WHERE same) FROM "+gone).Scan(&st.same); err != nil {
			return fail("count the unchanged rows", err)
		}
	}
	if !byID {
		// A column hides DuckDB's row ids: keep the other rows, found by
		// their keys.
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+gone).Scan(&st.deleted); err != nil {
			return fail("count the old versions", err)
		}
		on := make([]string, len(pk))
		for i, k := range pk {
			on[i] = "t." + k + " = s." + k
		}
		if err := keepOthers(ctx, tx, t, from+" s ON "+strings.Join(on, " AND "), held, st.deleted); err != nil {
			return st, err
		}
		_, err := room.set(ctx, tx, t.Object, "merge", 0)
		return st, err
	}

	// The doomed rows by ranges of deleteBatchRows ids: how many in each,
	// and how many of DuckDB's vectors of the range they may delete in
	// part. A vector starts at its row group's start, which row ids do
	// not show (a load on several threads leaves row groups short), so
	// the blocks of 2,048 ids counted here need not be vectors. A vector
	// overlaps at most two blocks and is deleted in part only where one
	// of them is, or where a run of blocks deleted whole ends: a run of k
	// blocks deleted in part overlaps about k+1 vectors, a run deleted
	// whole leaves at most two vectors at its ends deleted in part. The
	// count is that (where blocks are vectors, as in a table loaded on one
	// thread, it overcounts by a vector or two a run; a row group shorter
	// than a block inside one adds a vector it misses, which the margin of
	// vectorDeleteBytes over the 17.2 KiB measured covers).
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT v >> %d AS b, sum(n)::BIGINT,
			count(*) FILTER (WHERE n < 2048) + count(*) FILTER (WHERE first AND n < 2048) + 2 * count(*) FILTER (WHERE first AND n = 2048)
		FROM (SELECT v, n, v - 1 IS DISTINCT FROM lag(v) OVER (PARTITION BY n = 2048 ORDER BY v) AS first
			FROM (SELECT r >> 11 AS v, count(*) AS n FROM %s GROUP BY v))
		GROUP BY b ORDER BY b`, deleteBatchShift-11, gone))
	if err != nil {
		return fail("group the old versions", err)
	}
	type batch struct{ lo, hi, rows int64 }
	var batches []batch
	var total, partial int64
	for rows.Next() {
		var b, n, p int64
		if err := rows.Scan(&b, &n, &p); err != nil {
			rows.Close()
			return fail("group the old versions", err)
		}
		total, partial = total+n, partial+p
		lo, hi := b*deleteBatchRows, (b+1)*deleteBatchRows
		if last := len(batches) - 1; last >= 0 && batches[last].rows+n <= deleteBatchRows {
			batches[last].hi, batches[last].rows = hi, batches[last].rows+n
			continue
		}
		batches = append(batches, batch{lo, hi, n})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("group the old versions", err)
	}
	if room.rebuild(partial, held) {
		// Deletes all over a large table: keep its other rows instead,
		// which pins nothing, under the join's room (the copy is a join
		// too, of whole rows).
		st.deleted = total
		if err := keepOthers(ctx, tx, t, gone+" g ON t.rowid = g.r", held, total); err != nil {
			return st, err
		}
		_, err := room.set(ctx, tx, t.Object, "merge", 0)
		return st, err
	}
	st.pinned = partial * vectorDeleteBytes
	room.w.deletePins += st.pinned
	if _, err := room.set(ctx, tx, t.Object, "merge", 0); err != nil {
		return st, err
	}
	var deleted int64
	for _, b := range batches {
		res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE rowid >= %d AND rowid < %d AND rowid IN (SELECT r FROM %s WHERE r >= %d AND r < %d)",
			table, b.lo, b.hi, gone, b.lo, b.hi))
		if err != nil {
			return fail(fmt.Sprintf("delete old versions (row ids %d to %d)", b.lo, b.hi-1), err)
		}
		n, _ := res.RowsAffected()
		deleted += n
		st.batches++
	}
	st.deleted = deleted
	if deleted != total {
		return fail("delete old versions", fmt.Errorf("deleted %d rows, %d hold a key the run brings", deleted, total))
	}
	return st, nil
}
