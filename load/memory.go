package load

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// threadRoom is the memory limit a merge's statements need at least for
// the connection's threads (the configured ones, or forTable's): their rules (keyCheckBytes, joinBytes) were
// measured on two threads, and more need more, threadBytes each, which a
// limit that gave them (threadsUnder) has and one a caller set beside
// more threads (WithThreads) may not.
func (w *Warehouse) threadRoom(threads int) int64 {
	if threads <= 2 {
		return 0
	}
	return int64(threads) * threadBytes
}

// threadBytes is the memory limit DuckDB needs for each thread of a
// load: each thread builds row groups of its own, and hash tables of its
// own for a merge's checks and joins. Measured on the machine of
// docs/performance.md, with the default limit of 64 MB: a replace
// stream of 300,000 rows failed its load on 8 threads ("could not
// allocate block"), and passed with 1 M rows on 2, 3 and 4; on 8 threads,
// 1 M rows passed under 128 MiB; each thread added 30-60 MB of memory
// DuckDB does not count against its limit (peak RSS 230 MB on 2 threads,
// 308 MB on 4, 440 MB on 8).
const threadBytes = 32 << 20

// numCPU is the processors the process may use: GOMAXPROCS, which
// follows a container's CPU quota where runtime.NumCPU does not (a
// variable for tests).
var numCPU = func() int { return runtime.GOMAXPROCS(0) }

// threadsUnder is how many threads a load gets under a memory limit of
// limit bytes: one for each threadBytes of it, at least two and at most
// one per processor. DuckDB's own default, one a processor, made the
// load of a few hundred thousand rows fail on a machine of eight
// processors under the default limit; the limit, not the processors,
// bounds what a load may use.
func threadsUnder(limit int64) int {
	if limit <= 0 {
		return 0 // no limit: DuckDB's default
	}
	return max(1, min(numCPU(), max(2, int(limit/threadBytes))))
}

// SizeBytes reads a DuckDB size such as "64MB", "2GB" or "512MiB"; 0
// when it cannot.
func SizeBytes(s string) int64 {
	s = strings.ToUpper(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || n < 0 {
				return 0
			}
			return int64(n * float64(u.mult))
		}
	}
	return 0
}

// limitFor is the memory limit for a load that keeps pinned bytes of huge
// values: the configured one, raised to what is pinned when that is more.
// DuckDB cannot spill one value, and it keeps the huge values a
// transaction inserts pinned until the commit (measured: "failed to pin
// block of size 200.0 MiB" at commit otherwise).
func limitFor(configured string, pinned int64) string {
	if pinned > 64<<20 && pinned > SizeBytes(configured) {
		return mib(pinned)
	}
	return configured
}

// mib is n bytes as a DuckDB size, rounded up to the next MiB.
func mib(n int64) string { return fmt.Sprintf("%dMiB", n>>20+1) }

// vectorDeleteBytes is what DuckDB pins, until the next checkpoint (a
// commit does not free it, nor does a rollback all of it; the publish
// checkpoints, closeDB), for each vector
// of 2,048 rows of which a transaction deletes some rows but not all: the
// vector's version info, a transaction number a row. Measured on a table
// of 5 M rows with one row in 500 deleted: 41 MiB for its 2,441 vectors,
// 17.2 KiB each. A vector deleted whole pins none of it, nor does a
// delete's join (deleteOld keeps that under the limit).
const vectorDeleteBytes = 20 << 10

// joinBytes is what DuckDB needs, on two threads, to find the rows of a
// table of held rows whose key is among brought rows (deleteOld's join,
// which spills), with, when it counts the merge's new rows, a hash of
// each row's columns on both sides. Measured first with keys of one
// number: 1 M over 1 M passed under 24 MB and failed under 16 in one run
// of six; 5 M over 5 M passed under 32 and failed under 24; 20 M over
// 20 M passed under 64 and failed under 48, and 5 M under 20 M failed
// under 48. Keys of two text columns (21 and 10 bytes) need more, and
// the hashes more again: 20 M over 20 M failed under 104 MiB without the
// hashes (the rule then, 24 MiB and 2 bytes a row, gave 101) and passed
// under 140; with them it failed under 104 and 138 MiB and passed under
// 150, 200 and 280; 10 M over 10 M passed under 80 and 100, 5 M over 5 M
// failed under 40 and 43, and passed under 44 to 80. Keys of two text
// columns of 32 characters each (resource ids) need more again: 20 M over
// 20 M failed under 177 and 200 MiB and passed under 225, 250 and 320
// (staged row groups of 30,720 rows, as the writer makes them). DuckDB's
// external join partitions both sides, so its need grows with both, and
// with the keys' width: keyBytes is what a row's keys take in DuckDB
// (keyWidth). This rule, 1 byte a row and one for every 16 of keyBytes
// or part of them, at least 4, leaves room above each of those (the text
// keys above: 63 bytes, 5 a row, 215 MiB at 20 M; the resource ids: 96
// bytes, 7 a row, 291 MiB; a number: 4 a row, 177 MiB).
func joinBytes(held, brought, keyBytes int64) int64 {
	return 24<<20 + (held+brought)*max(4, 1+(keyBytes+15)/16)
}

// keyWidth is what a row's keys take in DuckDB, from the key columns'
// types (keys: their fields) and the average length of the text ones
// (textBytes, the staged rows' average of all text keys together): 16
// bytes for each text key (DuckDB's string header) and its text, 8 for
// any other.
func keyWidth(keys []arrow.Field, textBytes float64) int64 {
	var n int64
	for _, f := range keys {
		if isText(f) {
			n += 16
		} else {
			n += 8
		}
	}
	return n + int64(textBytes)
}

// keyCheckBytes is what DuckDB needs, on two threads, to count the
// distinct hashes of the keys of rows staged rows (mergeRows' check for
// repeated keys, which spills). Measured with two text keys of 10 and 19
// bytes: DuckDB sizes its tables by the limit, so a small one fails
// whatever the rows (1 M rows failed under 48 MB and passed under 40;
// 3 M failed under 48 and passed under 52 to 256), and past some 20 M
// rows the rows count (50 M failed under 64 to 96 MB, and passed under
// 128 to 256). This rule passed for 100,000 to 50 M rows, each several
// times. With more threads each needs more (on 8 threads 3 M rows passed
// only from 112 MiB), which threadsUnder's room for each thread covers.
func keyCheckBytes(rows int64) int64 { return 64<<20 + 2*rows }

// insertBytes is what DuckDB needs to insert rows into a table of cols
// columns on threads threads, (1.6 × threads − 0.6) MiB a column: each
// thread fills row groups of its own, a column at a time, and reads
// the staged files' row groups (which ParquetWriter keeps to
// lakefile.RowGroupBytes). Measured with 13 to 200 columns of text, numbers
// and timestamps, without preserving insertion order: on one thread a
// table of 25 columns passed under 24 MiB, 50 under 48, 100 under 64 to
// 80 and 200 under 128 (each failed under the size before: 16, 32, 48,
// 96); on two, 25 columns passed under 64 MiB, 50 under 128, 100 under
// 256 and 200 under 512 (not under 48, 96, 192, 384), no faster than one
// thread on so many columns. The fake's usual report objects have up to
// 16 columns (on two threads: 42 MiB); a real tenant's report objects and
// v3 items have dozens (as the fake's wide object, 66, and its assets):
// under the default 64 MB their loads failed ("could not allocate
// block"; measured at 100,000 to 300,000 rows).
func insertBytes(cols, threads int) int64 {
	return int64(cols) * int64(8*threads-3) << 20 / 5
}

// commitBytes is what DuckDB needs to commit a run that inserted rows
// into a table of cols columns, 1.6 MiB a column: the commit writes the
// row groups the inserts left unfinished. A second day of 100,000 rows of
// 62 columns of short text failed its commit under 1.3 MiB a column (81
// MiB) and passed under 1.5 (93 MiB), where the inserts had passed under
// 62 MiB on one thread.
func commitBytes(cols int) int64 { return int64(cols) * 8 << 20 / 5 }

// loadRoom raises DuckDB's memory limit, when one is set, for a run's
// merges and counts: for the count of a run's new rows (countBytes), the
// check of a merge's keys (keyCheckBytes) and the join that finds its old
// versions (joinBytes), each with what huge values pin, while it runs,
// and for what deletes pin
// (Warehouse.deletePins), on top of the configured limit: DuckDB can
// neither spill nor free that before a checkpoint, and a delete that left
// the next statements no room failed ("could not allocate block": a merge
// of 10,000 rows spread over a table of 5 M, under 64 MB).
type loadRoom struct {
	w            *Warehouse
	raised       bool // the limit is not the configured one; lowerMemory gives it back
	fewerThreads bool // oneThread lowered the threads; allThreads gives them back
	// What inserting rows into the run's widest table needs (forTable),
	// the least room any statement gets until the transaction ends (with
	// writtenSum on top at the commit), and
	// the threads forTable left the table being loaded when fewer than the
	// configured ones (0: those), until doneTable.
	table        int64
	tableThreads int
	// What the tables the transaction has written rows to hold until the
	// commit (writes), by stream, and their sum, which every statement's
	// room holds on top of its own once the commit loads (committing).
	written    map[string]int64
	writtenSum int64
	committing bool
}

// rebuild reports whether a merge whose deletes would leave partial of
// the vectors of a table of held rows deleted in part keeps the table's
// other rows instead (keepOthers): when what deletes would pin, with what
// earlier ones of the session still pin, passes four times the configured
// limit, and at least 256 MiB (a table of about 26 M rows changed all
// over, under the default 64 MB), and the deletes touch most of the
// table's vectors. Below that the deletes cost memory (8 bytes a row of
// the table at most, until the publish); above it, the copy costs time
// (the table written again: 5.8–7.3 s for 5 M rows under 64 MB, against
// 4.3 s for the deletes). A few changes spread over a huge table do not
// rewrite it: they pin one vector each.
func (d *loadRoom) rebuild(partial, held int64) bool {
	over := d.w.rebuildOver
	if over <= 0 {
		over = max(256<<20, 4*SizeBytes(d.w.memoryLimit))
	}
	return d.w.deletePins+partial*vectorDeleteBytes > over && partial*2048 >= held/2
}

// set makes room for a statement of the run (step, for errors) that needs
// need bytes on two threads (0: none, the limit back to the configured
// one, or to the table's room, forTable and forCommit): the limit becomes
// Warehouse.roomLimit of need, with what the tables written hold once the
// commit loads (writes), what huge values pin and, unless oneThread or
// forTable lowered them, the connection's threads' room
// (Warehouse.threadRoom).
func (d *loadRoom) set(ctx context.Context, tx *sql.Tx, object, step string, need int64) (string, error) {
	need = max(need, d.table)
	if d.committing {
		need += d.writtenSum
	}
	if need > 0 {
		if !d.fewerThreads {
			need = max(need, d.w.threadRoom(d.threads()))
		}
		need += d.w.pinned
	}
	base := SizeBytes(d.w.memoryLimit)
	if base <= 0 || (!d.raised && d.w.deletePins == 0 && need <= base) {
		return d.w.memoryLimit, nil // DuckDB's own limit (a share of the machine's memory), or room enough
	}
	limit := d.w.roomLimit(need)
	if _, err := tx.ExecContext(ctx, "SET memory_limit = "+Literal(limit)); err != nil {
		return "", &WriteError{Object: object, Step: step + ": memory limit " + limit, Path: object, Err: err}
	}
	d.raised = limit != d.w.memoryLimit
	return limit, nil
}

// roomLimit is the memory limit for a statement that needs need bytes:
// the configured limit or need, the larger, plus what deletes still pin
// (deletePins).
func (w *Warehouse) roomLimit(need int64) string {
	base := SizeBytes(w.memoryLimit)
	if base <= 0 || (need <= base && w.deletePins == 0) {
		return w.memoryLimit
	}
	return mib(max(base, need) + w.deletePins)
}

// oneThread puts the connection on one thread, under a memory limit,
// until allThreads (or RunLoad.lowerMemory, when the transaction failed
// first) gives the configured threads back.
func (d *loadRoom) oneThread(ctx context.Context, tx *sql.Tx) error {
	if SizeBytes(d.w.memoryLimit) <= 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, threadsSetting(1)); err != nil {
		return err
	}
	d.fewerThreads = true
	return nil
}

// allThreads gives the connection the threads it had before oneThread:
// the configured ones, or those forTable left the table.
func (d *loadRoom) allThreads(ctx context.Context, db execer) error {
	if !d.fewerThreads {
		return nil
	}
	if _, err := db.ExecContext(ctx, threadsSetting(d.threads())); err != nil {
		return err
	}
	d.fewerThreads = false
	return nil
}

// threads is the connection's threads but for oneThread's: those forTable
// left the table being loaded, or the configured ones (0: DuckDB's
// default).
func (d *loadRoom) threads() int {
	if d.tableThreads > 0 {
		return d.tableThreads
	}
	return d.w.threads
}

// forTable makes room for inserting rows into tables of object's, that
// many of them (writes), of cols columns at most (columnCount): under a
// memory limit, the most of the configured threads whose need
// (insertBytes) the limit holds, at least one, until doneTable, and every
// statement's room at least that need (set), which raises the limit when
// even one thread needs more, until the transaction ends.
func (d *loadRoom) forTable(ctx context.Context, tx *sql.Tx, object string, cols, tables int) error {
	d.writes(object, tables, cols)
	limit := SizeBytes(d.w.memoryLimit)
	if limit <= 0 {
		return nil
	}
	threads := max(d.w.threads, 1)
	n := threads
	for n > 1 && insertBytes(cols, n) > limit {
		n--
	}
	if n < threads {
		if _, err := tx.ExecContext(ctx, threadsSetting(n)); err != nil {
			return &WriteError{Object: object, Step: fmt.Sprintf("load on %d threads for its %d columns", n, cols), Path: object, Err: err}
		}
		d.tableThreads = n
	}
	d.table = max(d.table, insertBytes(cols, n))
	_, err := d.set(ctx, tx, object, fmt.Sprintf("room for its %d columns", cols), 0)
	return err
}

// forCommit is forTable for the commit's load (RunLoad.Commit, not
// LoadFiles): the room holds the commit's need too (commitBytes), and
// from now on what the tables written hold (writes).
func (d *loadRoom) forCommit(ctx context.Context, tx *sql.Tx, object string, cols, tables int) error {
	d.table = max(d.table, commitBytes(cols))
	d.committing = true
	return d.forTable(ctx, tx, object, cols, tables)
}

// writes records that the transaction inserts rows into object's tables,
// that many of them (its history and, for a merge or append stream, its
// own table), of cols columns at most: each holds writtenBytes of them until
// the commit. Once the commit loads (forCommit), every
// statement's room (set) holds them on top of its own. The early load
// (LoadFiles) records its tables, but its statements run without that
// room: a failed one gives the early load up and the commit loads the
// files; and a run of narrow streams stays within the early load's 16 MiB.
func (d *loadRoom) writes(object string, tables, cols int) {
	b := int64(tables) * writtenBytes(cols)
	if b <= d.written[object] {
		return
	}
	if d.written == nil {
		d.written = map[string]int64{}
	}
	d.writtenSum += b - d.written[object]
	d.written[object] = b
}

// writtenBytes is what a table the run's transaction has inserted rows
// into holds until the commit, whatever its rows: 64 KiB a column. A run
// that loaded many tables of 62 columns (60 fields, 20,000 to 50,000 rows
// each, replace and merge streams in turn) under the room of one
// (commitBytes, 99 MiB) failed ("failed to pin block", and at 16 replace
// streams the tenth stream's insert: "could not allocate block"): 8
// replace streams needed 101 to 125 MiB, 16 needed 101 to 150, 4 and 8
// streams half merges (a merge writes two tables) 101 to 150, 16 of them
// 151 to 200.
func writtenBytes(cols int) int64 { return int64(cols) << 16 }

// doneTable gives back the threads forTable took.
func (d *loadRoom) doneTable(ctx context.Context, tx *sql.Tx, object string) error {
	if d.tableThreads == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, threadsSetting(d.w.threads)); err != nil {
		return &WriteError{Object: object, Step: "load: the configured threads back", Path: object, Err: err}
	}
	d.tableThreads = 0
	return nil
}

// reset gives the connection its configured threads back after the
// transaction, whatever oneThread or forTable left (a setting outlives
// the transaction, and an aborted one takes no SET: db is then the
// warehouse's).
func (d *loadRoom) reset(ctx context.Context, db execer) error {
	d.table, d.written, d.writtenSum, d.committing = 0, nil, 0, false
	if !d.fewerThreads && d.tableThreads == 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, threadsSetting(d.w.threads)); err != nil {
		return err
	}
	d.fewerThreads, d.tableThreads = false, 0
	return nil
}

// columnCount is how many columns t's tables have at most: its fields
// and own of sepipe's (two in its table, one in its history), or as many
// as its table or history has (a history keeps the columns of fields the
// stream has since lost).
func columnCount(ctx context.Context, tx *sql.Tx, t Table, own int) (int, error) {
	var held sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT max(n) FROM (SELECT count(*) AS n FROM duckdb_columns()
		WHERE schema_name = current_schema() AND table_name IN (?, ?) GROUP BY table_name)`, t.Object, VersionsTable(t.Object)).Scan(&held)
	if err != nil {
		return 0, &WriteError{Object: t.Object, Step: "count its columns", Path: t.Object, Err: err}
	}
	return max(t.Schema.NumFields()+own, int(held.Int64)), nil
}

// threadsSetting is the statement that gives the connection n threads;
// 0: DuckDB's default.
func threadsSetting(n int) string {
	if n > 0 {
		return fmt.Sprintf("SET threads = %d", n)
	}
	return "RESET threads"
}

// countBytes is what DuckDB needs, on one thread, to count the rows of
// rows staged and held rows that one side does not hold (countNew's
// EXCEPT ALL of the rows' hashes: a window numbering each hash's rows on
// both sides, and an anti join). Its need depends on the rows' width as
// much as on their number, and more threads need more: on two, rows of
// two random text columns (32 and 19 bytes) read from Parquet row groups
// of 122,880 rows failed at 1 M over 1 M under 64 MB, 66 MiB and 72 MiB
// (and passed under 80 MiB and more), where the bench's pages passed at
// 5 M over 5 M under 64 MB, and 128 MiB + 2 B a row took a sync of
// 5 M rows from a peak of 219 MB to 376. On one thread the same random
// rows passed at 1 M under 48 MB, at 5 M under 64 MB and 84 MiB, and at
// 20 M under 104 and 144 MiB (failed under 64 MB), in about twice the
// time (5 M: 3.3 s against 1.5 s).
func countBytes(rows int64) int64 { return 64<<20 + 2*rows }

// foldBytes is what DuckDB needs to group rows rows of cols columns on
// threads threads (foldLatest's grouping of a day's rows with a stream's
// current versions, which spills): the count of new rows' room
// (countBytes) and twice an insert's for the columns on the threads
// (insertBytes): each thread's share of the grouping's partitions holds
// buffers a column, and the rows it groups are written on. Measured with
// the bench's rows (16 columns) read from Parquet, 1 M rows: on two
// threads it failed under 68 and 80 MiB and passed under 96 (0.74 s) and
// 128; on one it passed under 80 (1.5 s). Rows of 60 text columns of 12
// characters (TestWideTableLoadsUnderTheLimit: 100,000 over 100,000, one
// thread, in a run that wrote a second such table) failed under one
// insert's room (124 MiB) and passed under two's (184 MiB).
func foldBytes(rows int64, cols, threads int) int64 {
	return countBytes(rows) + 2*insertBytes(cols, max(threads, 1))
}

// The memory policy of a run's loads, one owner: what a run's pages
// weigh decides its commit's limit and threads (RunSettings), and the
// early load, beside the fetch, runs small (EarlySettings).

// HugePage: a run with a page body this large loads on one DuckDB
// thread, so that one huge value is held at a time.
const HugePage = 16 << 20

// Pages is what a run's pages weigh for DuckDB's memory: the largest page
// body, and the bytes of its pages of HugePage or more.
type Pages struct {
	Largest   int
	HugeBytes int64
}

// pinned is what DuckDB keeps pinned of a run's huge pages until the
// commit (WithPinnedBytes): the bytes of every huge page plus twice the
// largest.
func (p Pages) pinned() int64 { return p.HugeBytes + 2*int64(p.Largest) }

// threads is the DuckDB threads of a run's load: one when a page was huge
// (a thread holds one huge value at a time), else 0, as many as the
// memory limit has room for (WithThreads).
func (p Pages) threads() int {
	if p.Largest >= HugePage {
		return 1
	}
	return 0
}

// RunSettings are the options of a run's commit: the configured memory
// limit (DuckDB spills beyond it), raised for what the run's huge pages
// keep pinned; one thread when a page was huge; rows in any order.
func RunSettings(memoryLimit string, p Pages) []OpenOption {
	return []OpenOption{WithMemoryLimit(memoryLimit), WithPinnedBytes(p.pinned()), WithThreads(p.threads()), WithRowsInAnyOrder()}
}

// earlyMemoryLimit is DuckDB's memory limit while a run loads during its
// fetch (at most the configured one): the fetch's own buffers are live
// then, and what DuckDB's pool holds adds to the run's peak. Measured at
// 1 M rows and 50 requests a second, part files of one row group: 16 MB
// 239-250 MB peak RSS, 24 MB 258-265 MB, the same load time; 64 MB (part
// files of two row groups) 299 MB.
const earlyMemoryLimit = 16 << 20

// EarlySettings are the options of the early load, beside the fetch: the
// configured memory limit or earlyMemoryLimit, whichever is less, one
// thread, no wait for the state lock (another process waiting for it
// takes it back), rows in any order.
func EarlySettings(memoryLimit string) []OpenOption {
	limit := fmt.Sprintf("%dMiB", earlyMemoryLimit>>20)
	if n := SizeBytes(memoryLimit); n > 0 && n <= earlyMemoryLimit {
		limit = memoryLimit
	}
	return []OpenOption{WithLockWait(0), WithMemoryLimit(limit), WithThreads(1), WithRowsInAnyOrder()}
}
