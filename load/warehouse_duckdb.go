package load

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/duckdb/duckdb-go/v2" // also registers the "duckdb" driver

	"github.com/sepipe/sepipe/lakefile"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// Warehouse is a DuckDB database sepipe loads: an output folder's working
// database (OpenState), or a file opened directly (OpenWarehouse,
// OpenReadOnly).
type Warehouse struct {
	db   *sql.DB
	path string
	// lake, unlock: set for a working database (OpenState): the output
	// folder it publishes to, and the release of its state lock.
	lake   *Lake
	unlock func()
	closed bool
	// defaultMemory is DuckDB's memory limit before configure lowered it.
	defaultMemory string
	// memoryLimit is the limit configure set ("": DuckDB's), and pinned
	// what the run's huge values keep pinned (WithPinnedBytes).
	memoryLimit string
	pinned      int64
	// threads is the DuckDB threads configure set (0: DuckDB's default).
	threads int
	// deletePins is what merges' deletes pin until the next checkpoint
	// (closeDB), committed or rolled back: the limit keeps room for it
	// (loadRoom, RunLoad.lowerMemory).
	deletePins int64
	// rebuildOver, when set (by tests), replaces the threshold of
	// loadRoom.rebuild.
	rebuildOver int64
}

const metaDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_runs (
	run_id          VARCHAR PRIMARY KEY,
	started_at      TIMESTAMPTZ NOT NULL,
	finished_at     TIMESTAMPTZ,
	status          VARCHAR NOT NULL,
	snapshot_date   DATE,
	rows_per_object JSON,
	error           VARCHAR,
	published       BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS _sepipe_run_objects (
	run_id         VARCHAR NOT NULL,
	object         VARCHAR NOT NULL,
	rows           BIGINT NOT NULL,
	rejected_rows  BIGINT NOT NULL,
	pages          INTEGER,
	requests       INTEGER,
	retries        INTEGER,
	duration_ms    BIGINT,
	schema_version VARCHAR,
	files          INTEGER,
	PRIMARY KEY (run_id, object)
);
CREATE TABLE IF NOT EXISTS _sepipe_state (
	stream          VARCHAR PRIMARY KEY,
	cursor_field    VARCHAR NOT NULL,
	watermark       VARCHAR NOT NULL,
	run_id          VARCHAR NOT NULL,
	updated_at      TIMESTAMPTZ NOT NULL,
	snapshot_date   DATE NOT NULL,
	prior_watermark VARCHAR
);
CREATE TABLE IF NOT EXISTS _sepipe_schemas (
	object        VARCHAR NOT NULL,
	version       VARCHAR NOT NULL,
	describe_json  JSON NOT NULL,
	effective_json JSON NOT NULL,
	first_run_id  VARCHAR NOT NULL,
	first_seen_at TIMESTAMPTZ NOT NULL,
	last_run_id   VARCHAR NOT NULL,
	last_seen_at  TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (object, version)
);
CREATE TABLE IF NOT EXISTS _sepipe_rejects (
	run_id      VARCHAR NOT NULL,
	object      VARCHAR NOT NULL,
	page        INTEGER,
	row_in_page INTEGER,
	field       VARCHAR,
	raw_value   VARCHAR,
	reason      VARCHAR,
	raw_row     VARCHAR
);`

// migrations bring a warehouse written by an older sepipe up to date.
const migrations = `
ALTER TABLE _sepipe_runs ADD COLUMN IF NOT EXISTS published BOOLEAN DEFAULT true;
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS status VARCHAR DEFAULT 'committed';
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS reason VARCHAR;
ALTER TABLE _sepipe_rejects ADD COLUMN IF NOT EXISTS raw_row_bytes BLOB;
ALTER TABLE _sepipe_rejects ADD COLUMN IF NOT EXISTS raw_value_file VARCHAR;
ALTER TABLE _sepipe_run_objects ADD COLUMN IF NOT EXISTS nulled_values BIGINT DEFAULT 0;
ALTER TABLE _sepipe_state ADD COLUMN IF NOT EXISTS read_filters VARCHAR;`

// OpenWarehouse opens (creating if needed) the DuckDB file at path and
// makes sure sepipe's bookkeeping tables exist. sepipe's commands open an
// output folder's working database with OpenState instead; OpenWarehouse
// serves a file of one's own (tests, tools).
//
// DuckDB lets one process write a file at a time. When another process
// holds it, OpenWarehouse retries for up to the WithLockWait duration
// (default none) before it returns an error wrapping ErrWarehouseLocked.
func OpenWarehouse(ctx context.Context, path string, opts ...OpenOption) (*Warehouse, error) {
	o := openOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	deadline := time.Now().Add(o.lockWait)
	for {
		wh, err := openWarehouse(ctx, path, "")
		if err == nil {
			if err = wh.configure(ctx, o); err != nil {
				closeDuckDB(wh.db)
				return nil, err
			}
		}
		if err == nil || !errors.Is(err, ErrWarehouseLocked) || !time.Now().Before(deadline) {
			return wh, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// configure applies the memory limit, threads and insertion order of o.
func (w *Warehouse) configure(ctx context.Context, o openOptions) error {
	return w.configureOn(ctx, w.db, o)
}

// configureOn applies o on db's connection (the database's, or a
// transaction's: the warehouse has one connection).
func (w *Warehouse) configureOn(ctx context.Context, db interface {
	querier
	execer
}, o openOptions) error {
	if o.memoryLimit != "" && w.defaultMemory == "" {
		if err := db.QueryRowContext(ctx, "SELECT current_setting('memory_limit')").Scan(&w.defaultMemory); err != nil {
			return fmt.Errorf("warehouse %s: memory limit: %w", w.path, err)
		}
	}
	configured := SizeBytes(o.memoryLimit)
	if o.memoryLimit != "" {
		limit := limitFor(o.memoryLimit, o.pinned)
		if _, err := db.ExecContext(ctx, "SET memory_limit = "+Literal(limit)); err != nil {
			return fmt.Errorf("warehouse %s: memory limit %q: %w", w.path, limit, err)
		}
		if configured <= 0 && limit == o.memoryLimit {
			// A size SizeBytes does not read ("4G", "none"): DuckDB's
			// reading of it, which it does ("3.7 GiB"; no limit reads as
			// petabytes, which it does not).
			if err := db.QueryRowContext(ctx, "SELECT current_setting('memory_limit')").Scan(&limit); err != nil {
				return fmt.Errorf("warehouse %s: memory limit: %w", w.path, err)
			}
			if configured = SizeBytes(limit); configured <= 0 {
				limit = o.memoryLimit
			}
		}
		w.memoryLimit = limit
	}
	w.pinned = o.pinned
	if o.anyOrder {
		if _, err := db.ExecContext(ctx, "SET preserve_insertion_order = false"); err != nil {
			return fmt.Errorf("warehouse %s: preserve_insertion_order: %w", w.path, err)
		}
	}
	threads := o.threads
	if threads <= 0 && o.memoryLimit != "" {
		threads = threadsUnder(configured)
	}
	switch {
	case threads > 0:
		if _, err := db.ExecContext(ctx, threadsSetting(threads)); err != nil {
			return fmt.Errorf("warehouse %s: threads %d: %w", w.path, threads, err)
		}
	case o.memoryLimit != "":
		// No limit after all: DuckDB's default, whatever an earlier
		// configuration of the connection set (the early load's one).
		if _, err := db.ExecContext(ctx, threadsSetting(0)); err != nil {
			return fmt.Errorf("warehouse %s: threads: %w", w.path, err)
		}
	}
	if o.threads > 0 || o.memoryLimit != "" {
		w.threads = threads
	}
	return nil
}

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
		WHERE schema_name = current_schema() AND table_name IN (?, ?) GROUP BY table_name)`, t.Object, HistoryTable(t.Object)).Scan(&held)
	if err != nil {
		return 0, &WriteError{Object: t.Object, Step: "count its columns", Path: t.Object, Err: err}
	}
	return max(t.Schema.NumFields()+own, int(held.Int64)), nil
}

// OpenOption configures OpenWarehouse.
type OpenOption func(*openOptions)

type openOptions struct {
	lockWait    time.Duration
	memoryLimit string
	pinned      int64
	threads     int
	anyOrder    bool
}

// WithRowsInAnyOrder lets DuckDB insert a statement's rows in any order
// (preserve_insertion_order off): its threads then write row groups side
// by side instead of in the order of the source. Measured on a replace
// stream of 1 M rows: the load took 0.67 s instead of 0.99, and 3.5 s
// instead of 5.6 at 5 M. The rows of one insert still land together, and
// nothing sepipe reads depends on their order (a merge orders by file and
// row number explicitly).
func WithRowsInAnyOrder() OpenOption { return func(o *openOptions) { o.anyOrder = true } }

// WithThreads sets DuckDB's threads for this connection (0: as many as
// WithMemoryLimit's limit leaves room for, threadsUnder, or DuckDB's
// default, one per processor, without a limit). One thread holds one
// huge value at a time.
func WithThreads(n int) OpenOption { return func(o *openOptions) { o.threads = n } }

// WithMemoryLimit caps DuckDB's memory for this warehouse connection (a
// DuckDB size such as "128MB"); beyond it DuckDB spills to a temporary
// folder beside the file. It keeps a load's memory from growing with the
// size of an object.
func WithMemoryLimit(limit string) OpenOption { return func(o *openOptions) { o.memoryLimit = limit } }

// WithPinnedBytes says how much memory the run's huge values keep pinned
// until the commit: WithMemoryLimit's limit is raised to it when it is
// more (limitFor), and a merge's join gets its room on top of it
// (deleteOld).
func WithPinnedBytes(n int64) OpenOption { return func(o *openOptions) { o.pinned = n } }

// WithLockWait makes OpenWarehouse and OpenState wait up to d for another
// process to release the file (OpenState: the output folder's state lock).
func WithLockWait(d time.Duration) OpenOption { return func(o *openOptions) { o.lockWait = d } }

// closeDuckDB closes a DuckDB database sepipe opened, after one statement on
// its connection with a context of its own. duckdb-go (v2.10506) abandons
// a statement whose context ends between DuckDB's preparing and running
// it (its pending result); the connection keeps that query, which holds
// the connection's context alive, and with it the database past Close.
// DuckDB's instance cache then spins on the next open of the same file in
// the process, forever, one processor busy (DBInstanceCache waits for the
// old instance to be destroyed): a listen stopped while its loader opened
// the working database never finished its last load (1 run in about 25 of
// webhooks.TestListenKill9LosesNoAcknowledgedEvent under the race
// detector). DuckDB's main branch ends an abandoned query when its
// pending result closes (duckdb#23344); 1.5.6 does not. The next statement
// on the connection ends it. That statement waits at most closeCleanup
// for the connection (one still held, by a transaction not yet ended,
// ends its query itself: duckdb-go rolls back without a context).
func closeDuckDB(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeCleanup)
	_, _ = db.ExecContext(ctx, "SELECT 1")
	cancel()
	return db.Close()
}

// closeCleanup bounds closeDuckDB's wait for the connection.
const closeCleanup = 10 * time.Second

// openWarehouse opens path with DuckDB connection options dsnOpts ("" or
// "?name=value&...") and creates the bookkeeping tables.
func openWarehouse(ctx context.Context, path, dsnOpts string) (*Warehouse, error) {
	// sepipe's own SQL runs in UTC whatever the machine's time zone (a
	// timestamp's text, a day of it); DuckDB's default is the machine's.
	// Set on every connection the pool opens (a DSN setting is applied
	// before ICU, which owns TimeZone, is loaded).
	// Metadata reuse off too, whatever the DSN says: a path holding '#'
	// loses the DSN's options (duckdb-go parses it as a URL; see
	// noMetadataReuse for why the working database needs it off).
	connector, err := duckdb.NewConnector(path+dsnOpts, func(ex driver.ExecerContext) error {
		_, err := ex.ExecContext(context.Background(), "SET TimeZone = 'UTC'; "+setNoMetadataReuse, nil)
		return err
	})
	if err != nil {
		return nil, classifyOpen(path, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1) // one connection: transactions stay on it
	if err := db.PingContext(ctx); err != nil {
		closeDuckDB(db)
		return nil, classifyOpen(path, err)
	}
	// The events table too, empty until 'sepipe listen' loads events: the
	// warehouse holds it whether or not a listener ever ran, so readers
	// (the dbt project's stg_events) find it.
	if _, err := db.ExecContext(ctx, metaDDL+namesDDL+lakeIntentsDDL+migrations+eventsDDL); err != nil {
		closeDuckDB(db)
		return nil, fmt.Errorf("warehouse %s: create bookkeeping tables: %w", path, err)
	}
	return &Warehouse{db: db, path: path}, nil
}

func classifyOpen(path string, err error) error {
	if strings.Contains(err.Error(), "Could not set lock") || strings.Contains(err.Error(), "Conflicting lock") {
		// DuckDB's message names the program and PID holding the file.
		return fmt.Errorf("warehouse %s: %w: %v", path, ErrWarehouseLocked, err)
	}
	return fmt.Errorf("warehouse %s: open: %w", path, err)
}

// DB exposes the connection for queries.
func (w *Warehouse) DB() *sql.DB { return w.db }

// Path is the DuckDB file's path.
func (w *Warehouse) Path() string { return w.path }

// Close checkpoints and closes the warehouse (if Publish has not) and
// releases a working database's state lock. It may be called again.
func (w *Warehouse) Close() error {
	var err error
	if !w.closed && w.lake != nil {
		err = w.closeDB(context.Background())
	} else if !w.closed {
		w.closed = true
		err = closeDuckDB(w.db)
	}
	if w.unlock != nil {
		w.unlock()
		w.unlock = nil
	}
	return err
}

// WriteMode is how a stream's rows go into its table (lakefile, the one
// owner of the modes, which the Iceberg lake shares):
//   - Replace makes the table hold exactly this run's rows (a snapshot);
//   - Append adds this run's rows; a rerun on the same snapshot day
//     replaces that day's rows instead of adding them twice;
//   - Merge upserts this run's rows on the primary key.
type WriteMode = lakefile.WriteMode

// Write modes.
const (
	Replace = lakefile.Replace
	Append  = lakefile.Append
	Merge   = lakefile.Merge
)

// ParseWriteMode reads a mode name; "" is Replace.
func ParseWriteMode(s string) (WriteMode, error) { return lakefile.ParseWriteMode(s) }

// Bookkeeping columns of append and merge tables (lakefile owns them).
const (
	ColRunID        = lakefile.ColRunID
	ColSnapshotDate = lakefile.DayColumnAlt
)

// Table is one object's data for a run: its schema, the Parquet files that
// hold its rows, and how they go into its table.
type Table struct {
	// Object is the stream's name (Names): its table, its lake folder and
	// its key in sepipe's bookkeeping. ServiceID is the id the service
	// gives it, when that differs ("" means the same).
	Object    string
	ServiceID string
	Schema    *arrow.Schema // the effective schema: the table's shape after this run
	Files     []string
	Rows      int64 // rows in Files; checked after loading
	Rejects   []transform.Reject
	Stats     ObjectStats

	Mode       WriteMode
	PrimaryKey []string // Merge only
	Cursor     string   // incremental cursor field; its max becomes the stream's watermark
	// FutureCursors, when set, receives how many of the run's rows have a
	// date cursor later than the run's start plus FutureCursorSlack: the
	// watermark does not move to them (see moveWatermark).
	FutureCursors *int64
	// ReadFilters is what the rows were read with besides the cursor (the
	// stream's configured filters, as text), saved with the watermark: a
	// watermark holds only for reads with the same filters (State).
	ReadFilters string
	FullRefresh bool // rebuild the table from this run's rows whatever the mode

	Describe []service.Field // the live describe, recorded in _sepipe_schemas

	// LakeIntent, when set, is the stream's staged change of an Iceberg
	// lake (lakehouse.Intent as JSON), recorded in _sepipe_lake_intents
	// in the run's transaction (lakeintents.go).
	LakeIntent []byte
	// LakeSupersedes names runs whose recorded intents of this stream the
	// LakeIntent replaces (a rebuild of the Iceberg table, after commits
	// that could not be made): the same transaction marks them discarded,
	// so no later run commits them after the rebuild.
	LakeSupersedes []string

	// NewRows, when set, receives how many of the run's rows were not in
	// the table before (by content: a changed row counts, an unchanged one
	// does not; for a merge stream, the keys it added and the rows it
	// changed, a key read twice counting once, except in a full refresh
	// or where its table was a view: those count as a replace stream's).
	// Counting costs a scan of the table and the files (for a merge, a
	// hash of each row on both sides of the join that finds the rows it
	// replaces).
	NewRows *int64
}

// ObjectStats is what a run did for one object.
type ObjectStats struct {
	Rows, RejectedRows       int64
	NulledValues             int64 // values null in a kept row: they did not fit their column
	Pages, Requests, Retries int
	Duration                 time.Duration
}

// Run is a run's record in _sepipe_runs.
type Run struct {
	ID           string
	Started      time.Time
	Finished     time.Time
	Status       string // "succeeded", "partial", "failed"
	SnapshotDate string // YYYY-MM-DD
	Error        string
	// Others are the streams the run did not commit, each recorded in
	// _sepipe_run_objects with its status and reason.
	Others []StreamOutcome
}

// Statuses of a stream in _sepipe_run_objects.
const (
	StreamCommitted = "committed" // its data is in the warehouse
	StreamFailed    = "failed"    // an error; its table keeps its last good data
	StreamSkipped   = "skipped"   // the tenant is not entitled to its interface (403, or 404 for the whole base)
	StreamDeferred  = "deferred"  // the service's request quota would not cover it (announced, or a 429's long Retry-After); a later run of the day continues it
)

// StreamOutcome is a stream a run did not commit: failed, skipped or
// deferred, and why.
type StreamOutcome struct {
	Object string
	Status string // StreamFailed, StreamSkipped or StreamDeferred
	Reason string
}

// Ident quotes a DuckDB identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Literal quotes a DuckDB string literal.
func Literal(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// columnDefs returns "name TYPE" for every field of s, plus the
// bookkeeping columns for append and merge tables.
func columnDefs(object string, s *arrow.Schema, mode WriteMode) ([]string, error) {
	defs := make([]string, 0, s.NumFields()+2)
	for _, f := range s.Fields() {
		t, err := columnType(f)
		if err != nil {
			return nil, fmt.Errorf("object %q field %q: %w", object, f.Name, err)
		}
		defs = append(defs, Ident(f.Name)+" "+t)
	}
	if mode != Replace {
		defs = append(defs, Ident(ColRunID)+" VARCHAR", Ident(ColSnapshotDate)+" DATE")
	}
	return defs, nil
}

// txContext is the context of a transaction that its own goroutine ends
// with a deferred Rollback (a run's, Begin; LoadEvents, RecordFailure,
// historyFromViews): ctx's values without its cancellation. The
// statements in it still take ctx, and a cancelled one is interrupted.
// A transaction begun with ctx itself is rolled back, when ctx ends, by
// database/sql in a goroutine of its own, which then discards the
// connection; the warehouse's Close can then race that goroutine. A later
// open of the same file in this process was seen to spin for ever in
// DuckDB's instance cache (DBInstanceCache::GetInstanceInternal waits for
// the old instance to be destroyed): the last load of a stopping `sepipe
// listen`, once in about 80 runs of
// webhooks.TestListenKill9LosesNoAcknowledgedEvent under the race
// detector. The rest of that hang was a statement ended by its context
// and then the database closed (closeDuckDB).
func txContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// Commit loads a run's tables and records the run in one transaction,
// begun and committed here (Begin, RunLoad.Commit, which says what goes
// in).
func (w *Warehouse) Commit(ctx context.Context, run Run, tables []Table) error {
	r, err := w.Begin(ctx, run)
	if err != nil {
		return err
	}
	return r.Commit(ctx, run, tables)
}

// RecordFailure writes a run that did not commit data, so the history says
// it was tried.
func (w *Warehouse) RecordFailure(ctx context.Context, run Run) error {
	tx, err := w.db.BeginTx(txContext(ctx), nil)
	if err != nil {
		return fmt.Errorf("warehouse %s: begin: %w", w.path, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := insertOutcomes(ctx, tx, run); err != nil {
		return err
	}
	if err := insertRun(ctx, tx, run, nil, true); err != nil {
		return err
	}
	return tx.Commit()
}

// insertOutcomes records the streams a run did not commit.
func insertOutcomes(ctx context.Context, db execer, run Run) error {
	for _, o := range run.Others {
		if _, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_run_objects
			(run_id, object, rows, rejected_rows, status, reason) VALUES (?, ?, 0, 0, ?, ?)`,
			run.ID, o.Object, o.Status, o.Reason); err != nil {
			return &WriteError{Object: o.Object, Step: "record run object", Path: "_sepipe_run_objects", Err: err}
		}
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertRun(ctx context.Context, db execer, run Run, rowsPer map[string]int64, published bool) error {
	var rows any
	if rowsPer != nil {
		b, _ := json.Marshal(rowsPer)
		rows = string(b)
	}
	var snap any
	if run.SnapshotDate != "" {
		snap = run.SnapshotDate
	}
	var errText any
	if run.Error != "" {
		errText = run.Error
	}
	_, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_runs
		(run_id, started_at, finished_at, status, snapshot_date, rows_per_object, error, published)
		VALUES (?, ?, ?, ?, CAST(? AS DATE), CAST(? AS JSON), ?, ?)`,
		run.ID, run.Started.UTC(), run.Finished.UTC(), run.Status, snap, rows, errText, published)
	if err != nil {
		return fmt.Errorf("record run %s in _sepipe_runs: %w", run.ID, err)
	}
	return nil
}

// readStaged reads sepipe's own staged files (or its lake's): hive
// partitioning off, so that no column is taken from a key=value folder of
// the path (a field called snapshot_date keeps the service's values); the
// files are named one by one. opts are more of read_parquet's options.
func readStaged(files []string, opts ...string) string {
	return "read_parquet(" + strings.Join(append([]string{fileList(files), "union_by_name = true", "hive_partitioning = false"}, opts...), ", ") + ")"
}

// fileColumn names the column that tells which file a row was read from,
// when a read asks for it (withFile): a name of sepipe's own, which no
// field can take (DuckDB's own, filename, a field called fileName would).
const fileColumn = "_sepipe_file"

// withFile is the read_parquet option that adds fileColumn.
const withFile = "filename = '" + fileColumn + "'"

func fileList(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = Literal(f)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func loadTable(ctx context.Context, tx *sql.Tx, run Run, t Table, lake *Lake, early *earlyTable, room *loadRoom) error {
	mode := t.Mode
	if mode == "" {
		mode = Replace
	}
	fail := func(step string, err error) error {
		return &WriteError{Object: t.Object, Step: step, Path: t.Object, Err: err}
	}
	if err := checkFields(t); err != nil {
		return fail("load", err)
	}
	if mode == Merge && len(t.PrimaryKey) == 0 {
		return fail("merge", errors.New("merge needs a primary key"))
	}
	defs, err := columnDefs(t.Object, t.Schema, mode)
	if err != nil {
		return fail("derive table", err)
	}
	table := Ident(t.Object)
	// A replace stream's table is a view of its history's day: the run's
	// rows are inserted once, into the history, not twice (see
	// replaceView). Any other stream has a table of its own; either may
	// replace the other when a stream's mode changes.
	asView := isView(run, t)
	kind, err := relationKind(ctx, tx, t.Object)
	if err != nil {
		return fail("inspect table", err)
	}
	// A merge stream's new rows are counted by the merge itself, in the
	// join that finds the rows it replaces (deleteOld), not by a count of
	// its own: that took about a third of a second of a nightly merge's
	// load of 1 M rows, 2.4 s (issue 14). Not when its table is still a
	// view (the stream was a replace stream): the merge starts from an
	// empty table.
	mergeCounts := t.NewRows != nil && mode == Merge && !t.FullRefresh && len(t.Files) > 0 && kind != "view"
	if t.NewRows != nil && !mergeCounts {
		n, err := countNew(ctx, tx, t, room)
		if we := (*WriteError)(nil); errors.As(err, &we) {
			return err // the limit's, naming the step
		} else if err != nil {
			return fail("count new rows", err)
		}
		*t.NewRows = n
	}
	switch {
	case !startsAfresh(kind, asView):
	case asView:
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+table); err != nil {
			return fail("replace the table by a view of the history", err)
		}
	default:
		if _, err := tx.ExecContext(ctx, "DROP VIEW "+table); err != nil {
			return fail("replace the view of the history by a table", err)
		}
	}
	switch {
	case asView:
		day, err := early.finish(ctx, tx, run, t, lake)
		if err != nil {
			return err
		}
		if err := replaceView(ctx, tx, run, t, day); err != nil {
			return err
		}
	case mode == Replace || t.FullRefresh:
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TABLE "+table+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fail("create table", err)
		}
	default:
		if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fail("create table", err)
		}
		if err := alignColumns(ctx, tx, t); err != nil {
			return err
		}
	}
	cols := make([]string, t.Schema.NumFields())
	for i, f := range t.Schema.Fields() {
		cols[i] = Ident(f.Name)
	}
	colList := strings.Join(cols, ", ")
	src := readStaged(t.Files)
	var want int64 = t.Rows
	var countSQL string // counts the run's rows in the table; "" when got has them
	var got int64
	switch {
	case asView:
		countSQL = "SELECT count(*) FROM " + table // the history's rows of the day
	case len(t.Files) == 0:
		countSQL = "SELECT count(*) FROM " + table
		if mode != Replace && !t.FullRefresh {
			countSQL += " WHERE " + Ident(ColRunID) + " = " + Literal(run.ID)
		}
		want = 0
	case mode == Replace:
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", table, colList, colList, src)); err != nil {
			return fail("load parquet", err)
		}
		countSQL = "SELECT count(*) FROM " + table
	case mode == Append:
		if !t.FullRefresh {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE "+Ident(ColSnapshotDate)+" = CAST(? AS DATE)", run.SnapshotDate); err != nil {
				return fail("replace the day's rows", err)
			}
		}
		q := fmt.Sprintf("INSERT INTO %s (%s, %s, %s) SELECT %s, ?, CAST(? AS DATE) FROM %s",
			table, colList, Ident(ColRunID), Ident(ColSnapshotDate), colList, src)
		if _, err := tx.ExecContext(ctx, q, run.ID, run.SnapshotDate); err != nil {
			return fail("load parquet", err)
		}
		countSQL = "SELECT count(*) FROM " + table + " WHERE " + Ident(ColRunID) + " = " + Literal(run.ID)
	case mode == Merge:
		// The rows the insert reports against the staged rows less the
		// repeats of a key: no scan of the table for the run's rows.
		n, w, fresh, err := mergeRows(ctx, tx, run, t, cols, src, mergeCounts, room)
		if err != nil {
			return err
		}
		got, want = n, w
		if mergeCounts {
			*t.NewRows = fresh
		}
	}
	n := got
	if countSQL != "" {
		if err := tx.QueryRowContext(ctx, countSQL).Scan(&n); err != nil {
			return fail("count rows", err)
		}
	}
	if n != want {
		return &WriteError{Object: t.Object, Step: "verify load", Path: t.Object,
			Err: fmt.Errorf("table has %d rows of this run, the run wrote %d", n, want)}
	}
	// The columns' comments, once the table is the one that stays (a merge
	// may have made a new one, keepOthers).
	for _, f := range t.Schema.Fields() {
		if d, ok := f.Metadata.GetValue(schemas.MetaDisplayName); ok && d != "" {
			if err := commentColumn(ctx, tx, table, f.Name, d); err != nil {
				return fail("comment column "+f.Name, err)
			}
		}
	}
	switch {
	case t.Cursor != "" && len(t.Files) > 0:
		if err := moveWatermark(ctx, tx, run, t, src); err != nil {
			return err
		}
	case t.Cursor == "":
		// Read whole, without a cursor: a watermark saved before says
		// nothing about this table (a replace stream's view, or a table a
		// later merge starts afresh), so it goes, and a stream given its
		// cursor back reads whole once.
		if _, err := tx.ExecContext(ctx, `DELETE FROM _sepipe_state WHERE stream = ?`, t.Object); err != nil {
			return &WriteError{Object: t.Object, Step: "drop watermark", Path: "_sepipe_state", Err: err}
		}
	}
	if err := recordSchema(ctx, tx, run, t); err != nil {
		return err
	}
	if err := insertRejects(ctx, tx, run.ID, t.Object, t.Rejects); err != nil {
		return err
	}
	if asView {
		return nil // its history has the rows already
	}
	_, err = early.finish(ctx, tx, run, t, lake)
	return err
}

// checkFields refuses a stream whose schema has no fields (an object
// whose describe lists none), before any SQL is built from it: its
// column lists would be empty, and the statements would not parse
// ("INSERT INTO h (, snapshot_date) SELECT , ..."), failing the run's
// one transaction with a parser's error that names neither the stream
// nor the reason.
func checkFields(t Table) error {
	if t.Schema == nil || t.Schema.NumFields() == 0 {
		return schemas.ErrNoFields
	}
	return nil
}

// isView reports whether t's table is a view of its history's day (a
// replace stream's, in a run with a snapshot day): its rows are inserted
// into one table, not two.
func isView(run Run, t Table) bool {
	return (t.Mode == Replace || t.Mode == "") && run.SnapshotDate != ""
}

// startsAfresh reports whether a stream's load drops its table, of kind
// ("table", "view" or "" for none; relationKind), to start it afresh as
// the other kind (asView, isView): its mode changed from replace, whose
// table is a view of its history's day, to append or merge, whose table
// is one of its own, or back. The new table then holds the run's rows
// alone (a merge starts from an empty table). The one owner of the rule:
// loadTable drops by it, and Warehouse.StartsAfresh tells the pipeline
// before the run, so that its Iceberg table is rebuilt alike.
func startsAfresh(kind string, asView bool) bool {
	return (kind == "table" && asView) || (kind == "view" && !asView)
}

// StartsAfresh reports whether the next run's load of object, a stream
// in mode, on day (the run's snapshot day), starts its table afresh
// because the stream's mode changed between replace and append or merge
// (startsAfresh): the table then holds that run's rows alone. The
// output folder's lock, held from before the question to the run's
// commit, keeps the answer true until the load.
func (w *Warehouse) StartsAfresh(ctx context.Context, object string, mode WriteMode, day string) (bool, error) {
	kind, err := relationKind(ctx, w.db, object)
	if err != nil {
		return false, fmt.Errorf("warehouse %s: inspect table %s: %w", w.path, object, err)
	}
	return startsAfresh(kind, isView(Run{SnapshotDate: day}, Table{Mode: mode})), nil
}

// tablesWritten is how many tables a run inserts t's rows into: its
// history (in a run with a snapshot day) and its own table, unless that
// is a view of the history.
func tablesWritten(run Run, t Table) int {
	if run.SnapshotDate == "" || isView(run, t) {
		return 1
	}
	return 2
}

// replaceView makes a replace stream's table a view of the run's day in
// its history table, which loadHistory has just filled. The run's rows
// are then inserted into DuckDB once: loading them into a table of their
// own and again into the history was half of a load's time (issue 14).
// The view names the history table, not a path, so the output folder
// stays portable; its columns are the stream's fields, with the types
// the history holds them in (a type the stream once widened stays wide),
// named as the fields are: a history column keeps the spelling of the
// field that made it, and a stream that now spells it otherwise (in
// another case; columnNamed) shows the new spelling, as a table a full
// refresh makes anew would. day is the history's day column.
func replaceView(ctx context.Context, tx *sql.Tx, run Run, t Table, day string) error {
	h := HistoryTable(t.Object)
	cols := make([]string, t.Schema.NumFields())
	for i, f := range t.Schema.Fields() {
		cols[i] = Ident(f.Name) + " AS " + Ident(f.Name)
	}
	q := "CREATE OR REPLACE VIEW " + Ident(t.Object) + " AS SELECT " + strings.Join(cols, ", ") + " FROM " + Ident(h) +
		" WHERE " + Ident(day) + " = DATE " + Literal(run.SnapshotDate)
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return &WriteError{Object: t.Object, Step: "create the view of the day", Path: t.Object, Err: err}
	}
	return nil
}

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

// commentColumn sets the comment of column col of table (an identifier
// already quoted) to text, made valid UTF-8 without NUL bytes.
func commentColumn(ctx context.Context, tx *sql.Tx, table, col, text string) error {
	_, err := tx.ExecContext(ctx, "COMMENT ON COLUMN "+table+"."+Ident(col)+" IS "+Literal(strings.ReplaceAll(validText(text), "\x00", "")))
	return err
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

// alignColumns adds the columns a table lacks and widens the ones whose
// type changed, so an append or merge table follows the effective schema.
func alignColumns(ctx context.Context, tx *sql.Tx, t Table) error {
	_, err := alignTo(ctx, tx, t.Object, t.Object, t.Schema)
	return err
}

// tableColumns returns a table's columns and their DuckDB types.
func tableColumns(ctx context.Context, tx *sql.Tx, table string) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = current_schema() AND table_name = ?`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		have[name] = typ
	}
	return have, rows.Err()
}

// sameName reports whether DuckDB takes a and b for the same column name:
// it compares names ignoring case, ASCII letters only (it folds no other
// letter: "É" and "é" are two columns). strings.EqualFold folds Unicode
// too, and would take two columns DuckDB holds apart for one.
func sameName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// columnNamed finds the column of have (a table's columns and types,
// tableColumns) that DuckDB takes name for (sameName), and returns its
// own spelling: a field a run spells otherwise than the table (a full
// refresh names its fields from the live describe alone, while the
// history keeps the old spelling) is that column, not a new one, which
// DuckDB would refuse ("already exists").
func columnNamed(have map[string]string, name string) (string, bool) {
	if _, ok := have[name]; ok {
		return name, true
	}
	for c := range have {
		if sameName(c, name) {
			return c, true
		}
	}
	return "", false
}

// alignTo makes table (of object) hold a column for every field of s: it
// adds the missing ones and widens a column whose type is not the field's.
// A field matches the column DuckDB takes its name for (columnNamed),
// whatever its case; the column keeps its spelling. It returns the
// table's columns and types afterwards, by the columns' spelling.
func alignTo(ctx context.Context, tx *sql.Tx, object, table string, s *arrow.Schema) (map[string]string, error) {
	have, err := tableColumns(ctx, tx, table)
	if err != nil {
		return nil, &WriteError{Object: object, Step: "read table columns", Path: table, Err: err}
	}
	for _, f := range s.Fields() {
		want, err := columnType(f)
		if err != nil {
			return nil, &WriteError{Object: object, Step: "derive table", Err: err}
		}
		col, ok := columnNamed(have, f.Name)
		got := have[col]
		var q string
		switch {
		case !ok:
			col = f.Name
			q = "ALTER TABLE " + Ident(table) + " ADD COLUMN " + Ident(col) + " " + want
		case !sameType(got, want):
			wide := widerType(got, want)
			if sameType(got, wide) {
				continue // the column holds the field's values already
			}
			q = "ALTER TABLE " + Ident(table) + " ALTER COLUMN " + Ident(col) + " SET DATA TYPE " + wide +
				" USING " + castTo(Ident(col), got, wide)
			want = wide
		default:
			continue
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, &WriteError{Object: object, Step: "evolve table (" + f.Name + ")", Path: table, Err: err}
		}
		have[col] = want
	}
	return have, nil
}

// FutureCursorSlack is how far past a run's start a date cursor may be
// and still move the stream's watermark: clock skew between the service
// and this machine. A later date is a bad value (a year 2099), which as
// the watermark would hide every row changed before it from every later
// read.
const FutureCursorSlack = 24 * time.Hour

// FutureWatermark reports whether wm, a date watermark (RFC 3339), is
// later than a run started at start could have seen (FutureCursorSlack
// past it): a bad value an earlier release saved, under which every read
// would skip every row changed before that date. The read is then whole.
func FutureWatermark(wm string, start time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, wm)
	if err != nil || start.IsZero() {
		return false // a number, or no start to judge by
	}
	return t.After(start.Add(FutureCursorSlack))
}

// moveWatermark sets the stream's watermark to the largest cursor value of
// the run's rows, if that is later than the saved one.
func moveWatermark(ctx context.Context, tx *sql.Tx, run Run, t Table, src string) error {
	idx := t.Schema.FieldIndices(t.Cursor)
	if idx == nil {
		return &WriteError{Object: t.Object, Step: "watermark", Err: fmt.Errorf("cursor field %q is not a column", t.Cursor)}
	}
	c := Ident(t.Cursor)
	expr, args := "CAST(max("+c+") AS VARCHAR), 0", []any(nil)
	if _, ok := t.Schema.Field(idx[0]).Type.(*arrow.TimestampType); ok {
		// A date later than the run could be (a day of clock skew
		// allowed) is a bad value, not progress: taken for the watermark
		// it would hide every row changed before that date from every
		// later read, silently. Such rows are read again each run.
		bound := run.Started
		if bound.IsZero() {
			bound = time.Now()
		}
		// In UTC whatever the session's time zone: a plain ::TIMESTAMP
		// cast takes the machine's, and under TZ=Asia/Tokyo labelled a
		// time 9 hours late with Z, so the next read skipped what changed
		// between (found by review).
		expr = "strftime((max(" + c + ") FILTER (WHERE " + c + " <= ?)) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), count(*) FILTER (WHERE " + c + " > ?)"
		limit := bound.Add(FutureCursorSlack).UTC()
		args = []any{limit, limit}
	}
	var wm sql.NullString
	var future int64
	if err := tx.QueryRowContext(ctx, "SELECT "+expr+" FROM "+src, args...).Scan(&wm, &future); err != nil {
		return &WriteError{Object: t.Object, Step: "watermark", Err: err}
	}
	if t.FutureCursors != nil {
		*t.FutureCursors = future
	}
	old, ok, err := stateOf(ctx, tx, t.Object)
	if err != nil {
		return err
	}
	if ok && !t.FullRefresh && old.CursorField == t.Cursor && FutureWatermark(old.Watermark, run.Started) {
		// An earlier release saved a bad date (a year 2099) as the
		// watermark: it goes, for the run's plausible latest, or none.
		ok = false
		if !wm.Valid {
			_, err := tx.ExecContext(ctx, `DELETE FROM _sepipe_state WHERE stream = ?`, t.Object)
			if err != nil {
				return &WriteError{Object: t.Object, Step: "drop watermark", Path: "_sepipe_state", Err: err}
			}
			return nil
		}
	}
	if !wm.Valid {
		return nil // no cursor values: keep the old watermark
	}
	// prior is the watermark before this snapshot day's first run: a
	// same-day rerun reads from it again, so the day's partition is whole.
	var prior any
	switch {
	case !ok || t.FullRefresh || old.CursorField != t.Cursor || !old.SameRead(t.ReadFilters):
	case old.SnapshotDate == run.SnapshotDate:
		if old.PriorWatermark != "" {
			prior = old.PriorWatermark
		}
	default:
		prior = old.Watermark
	}
	next := wm.String
	if ok && !t.FullRefresh && old.CursorField == t.Cursor && old.SameRead(t.ReadFilters) && watermarkLess(next, old.Watermark) {
		next = old.Watermark
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_state
		(stream, cursor_field, watermark, run_id, updated_at, snapshot_date, prior_watermark, read_filters)
		VALUES (?, ?, ?, ?, ?, CAST(? AS DATE), ?, ?)`,
		t.Object, t.Cursor, next, run.ID, run.Finished.UTC(), run.SnapshotDate, prior, t.ReadFilters)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "save watermark", Path: "_sepipe_state", Err: err}
	}
	return nil
}

// watermarkLess compares two watermarks of the same cursor: numbers as
// numbers, timestamps (fixed-width ISO strings) as strings.
func watermarkLess(a, b string) bool {
	ia, errA := strconv.ParseInt(a, 10, 64)
	ib, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return ia < ib // exact past 2^53, where floats are not
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa < fb // -50 before -10, 9 before 10
	}
	return a < b
}

func recordSchema(ctx context.Context, tx *sql.Tx, run Run, t Table) error {
	if t.Describe == nil {
		return nil
	}
	eff, err := schemas.ToDescribe(t.Schema)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "record schema", Err: err}
	}
	d, _ := json.Marshal(t.Describe)
	e, _ := json.Marshal(eff)
	ver := schemas.Version(t.Describe)
	now := run.Finished.UTC()
	_, err = tx.ExecContext(ctx, `INSERT INTO _sepipe_schemas VALUES (?, ?, CAST(? AS JSON), CAST(? AS JSON), ?, ?, ?, ?)
		ON CONFLICT (object, version) DO UPDATE SET effective_json = excluded.effective_json, last_run_id = excluded.last_run_id, last_seen_at = excluded.last_seen_at`,
		t.Object, ver, string(d), string(e), run.ID, now, run.ID, now)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "record schema", Path: "_sepipe_schemas", Err: err}
	}
	return nil
}

// validText makes s storable as VARCHAR: invalid UTF-8 becomes U+FFFD.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func insertRejects(ctx context.Context, tx *sql.Tx, runID, object string, rejects []transform.Reject) error {
	const chunk = 256
	for len(rejects) > 0 {
		n := min(chunk, len(rejects))
		var b strings.Builder
		b.WriteString("INSERT INTO _sepipe_rejects (run_id, object, page, row_in_page, field, raw_value, reason, raw_row, raw_row_bytes, raw_value_file) VALUES ")
		args := make([]any, 0, n*10)
		for i, r := range rejects[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			// Text DuckDB cannot hold (invalid UTF-8) is stored repaired, and
			// the raw row's exact bytes beside it.
			var rawBytes any
			if !utf8.ValidString(r.RawRow) || !utf8.ValidString(r.RawValue) {
				rawBytes = []byte(r.RawRow)
			}
			var rawFile any // a value too long for the warehouse, kept in the lake
			if r.RawFile != "" {
				rawFile = r.RawFile
			}
			args = append(args, runID, object, r.Page, r.Row, validText(r.Field), validText(r.RawValue), validText(r.Reason), validText(r.RawRow), rawBytes, rawFile)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return &WriteError{Object: object, Step: "record rejects", Path: "_sepipe_rejects", Err: err}
		}
		rejects = rejects[n:]
	}
	return nil
}
