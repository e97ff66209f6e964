package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sepipe/sepipe/internal/faults"
)

// StorageVersion is the DuckDB storage format sepipe writes its databases
// in (DuckDB's storage_compatibility_version): the oldest that holds what
// sepipe uses (tables of BIGINT, DOUBLE, BOOLEAN, VARCHAR, TIMESTAMPTZ and
// JSON columns), so that every DuckDB from 1.0 on opens the published
// warehouse. CI opens it with DuckDB 1.1 and 1.4 besides the bundled one.
const StorageVersion = "v1.0.0"

// noMetadataReuse is the DuckDB setting, as a connection option, that makes
// a checkpoint of the working database write every row group's metadata
// anew instead of keeping an unchanged one's where it was (DuckDB 1.4 on).
// A kept row group's metadata block still points on to the rest of the
// chain it was written in, which the checkpoint frees; DuckDB before 1.4.2
// follows that pointer and cannot read the file ("Failed to load metadata
// pointer"), so a byte copy of the working database would not publish.
// The cost is the metadata only (a few ms a checkpoint), not the data.
const noMetadataReuse = "experimental_metadata_reuse=false"

// setNoMetadataReuse is the same as a statement, for connections whose
// DSN options may be lost (a path holding '#': duckdb-go reads the DSN as
// a URL, the rest a fragment).
const setNoMetadataReuse = "SET experimental_metadata_reuse = false"

// ErrPublishBlocked is wrapped when the published warehouse cannot be
// replaced because another program holds it open for writing. The run is
// committed in the working database; PublishState publishes it once that
// program is closed.
var ErrPublishBlocked = errors.New("the published warehouse is held open for writing by another program")

// StatePath is sepipe's working database: every table, the run ledger,
// the incremental state and the events, written by sync and listen and
// copied to WarehousePath when published. Readers never open it.
func (l Lake) StatePath() string { return filepath.Join(l.Root, ".sepipe", "state.duckdb") }

func (l Lake) stateLockPath() string { return filepath.Join(l.Root, ".sepipe", "state.lock") }

// stateWantPath is where a process waiting for the state lock says so
// (lockState, Warehouse.Wanted).
func (l Lake) stateWantPath() string { return filepath.Join(l.Root, ".sepipe", "state.want") }

// nextPath is where a publish copies the working database before renaming
// it over WarehousePath: in the same file system, outside the names a
// reader opens.
func (l Lake) nextPath() string { return filepath.Join(l.Root, ".sepipe", "warehouse.duckdb.next") }

// publishedMark records which state of the working database the published
// warehouse is a copy of.
func (l Lake) publishedMark() string { return filepath.Join(l.Root, ".sepipe", "published") }

// OpenState opens the output folder's working database for writing,
// creating it (in StorageVersion's format) if needed. It first takes the
// folder's state lock, waiting up to WithLockWait for another sepipe
// process (a sync committing, a listen loading a batch) to finish; so the
// working database has one writer at a time and a publish never copies it
// mid-write. The lock is held until Close.
//
// An output folder written by an earlier sepipe (one warehouse.duckdb that
// runs wrote in place) is adopted: the file is copied into the working
// database; its history, daily-copy tables or (older still) views that
// named the lake by absolute path, becomes versions (historyToVersions).
//
// End a session that wrote with Publish; one that ends with Close leaves
// the published warehouse behind the working database until the next
// publish (every later session publishes what an earlier one left).
func OpenState(ctx context.Context, lake Lake, opts ...OpenOption) (*Warehouse, error) {
	o := openOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(lake.StatePath()), 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", lake.Root, err)
	}
	unlock, err := lockState(ctx, lake, o.lockWait)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			unlock()
		}
	}()
	if _, err := os.Stat(lake.StatePath()); errors.Is(err, fs.ErrNotExist) {
		if err := adoptLegacy(ctx, lake); err != nil {
			return nil, err
		}
	}
	for {
		wh, err := openWarehouse(ctx, lake.StatePath(), "?storage_compatibility_version="+StorageVersion+"&"+noMetadataReuse)
		if err != nil {
			return nil, err
		}
		if err := wh.configure(ctx, o); err != nil {
			closeDuckDB(wh.db)
			return nil, err
		}
		// No automatic checkpoint at a commit, where the load's memory limit
		// could fail it: the session's checkpoint runs in Publish (or Close),
		// without the limit.
		if _, err := wh.db.ExecContext(ctx, "SET checkpoint_threshold = '1TB'"); err != nil {
			closeDuckDB(wh.db)
			return nil, fmt.Errorf("warehouse %s: %w", wh.path, err)
		}
		wh.lake, wh.unlock = &lake, unlock
		migrated, err := wh.historyToVersions(ctx)
		if err != nil {
			closeDuckDB(wh.db)
			return nil, err
		}
		if !migrated {
			ok = true
			return wh, nil
		}
		// The daily copies' space is free in the file, which DuckDB never
		// gives back: write the working database anew, once, and open that.
		if err := wh.closeDB(ctx); err != nil {
			return nil, err
		}
		if err := compactState(ctx, lake); err != nil {
			return nil, fmt.Errorf("warehouse %s: compact after migrating the history: %w", lake.StatePath(), err)
		}
	}
}

// compactState writes the (closed, checkpointed) working database anew
// (rewrite: every table, view and comment, no free space) beside it and
// renames the copy over it. A process killed before the rename leaves the
// working database as it was (the copy is removed by the next compaction);
// after it, the compact one.
func compactState(ctx context.Context, lake Lake) error {
	state := lake.StatePath()
	next := state + ".compact"
	if err := rewrite(ctx, state, next); err != nil {
		os.Remove(next)
		return err
	}
	if err := os.Rename(next, state); err != nil {
		return err
	}
	syncDir(filepath.Dir(state))
	return nil
}

// adoptLegacy makes the working database from a warehouse an earlier
// sepipe wrote in place, if there is one (with its write-ahead log, which
// opening the copy replays).
func adoptLegacy(ctx context.Context, lake Lake) error {
	old := lake.WarehousePath()
	if _, err := os.Stat(old); err != nil {
		return nil // a new output folder
	}
	if pid, prog, held := writeLockHolder(old); held {
		return fmt.Errorf("%s was written in place by an earlier sepipe and is now held for writing by PID %d (%s): "+
			"close that program so that sepipe can adopt the file (%w)", old, pid, prog, ErrPublishBlocked)
	}
	if err := isDuckDBFile(old); err != nil {
		return fmt.Errorf("adopt %s: %w", old, err)
	}
	tmp := lake.StatePath() + ".adopt"
	err := adoptCopy(ctx, old, tmp)
	if err == nil {
		err = os.Rename(tmp, lake.StatePath())
	}
	if err != nil {
		// A copy that failed is no working database: nothing of it stays.
		for _, p := range []string{tmp, tmp + ".wal"} {
			_ = os.Remove(p)
		}
		return fmt.Errorf("adopt %s: %w", old, err)
	}
	syncDir(filepath.Dir(lake.StatePath()))
	return nil
}

// adoptCopy copies the warehouse at old (and its write-ahead log) to tmp
// and checkpoints the copy, replaying the log into it.
func adoptCopy(ctx context.Context, old, tmp string) error {
	for _, suffix := range []string{"", ".wal"} {
		if err := copyFile(old+suffix, tmp+suffix); err != nil {
			if suffix == ".wal" && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
	}
	db, err := sql.Open("duckdb", tmp+"?"+noMetadataReuse)
	if err == nil {
		_, err = db.ExecContext(ctx, setNoMetadataReuse+"; CHECKPOINT")
		if cerr := closeDuckDB(db); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("open a copy: %w", err)
	}
	if _, err := os.Stat(tmp + ".wal"); err == nil {
		return errors.New("the copy's write-ahead log was not checkpointed")
	}
	return nil
}

// ErrNotDuckDB is wrapped when an output folder's warehouse.duckdb, which
// a first sync adopts as an earlier sepipe's warehouse, is not a DuckDB
// database (an empty file, another program's).
var ErrNotDuckDB = errors.New("not a DuckDB database file")

// isDuckDBFile reports, as an error wrapping ErrNotDuckDB, a file that
// does not start as a DuckDB database does (its magic bytes "DUCK" at
// offset 8, after the checksum).
func isDuckDBFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var head [12]byte
	if n, _ := io.ReadFull(f, head[:]); n < len(head) || string(head[8:]) != "DUCK" {
		return ErrNotDuckDB
	}
	return nil
}

// Publish ends a session on the working database: it checkpoints and
// closes the database, then publishes it (see PublishState). The
// Warehouse's queries fail afterwards; Close releases the lock.
func (w *Warehouse) Publish(ctx context.Context) error {
	if w.lake == nil {
		return fmt.Errorf("warehouse %s: not an output folder's working database", w.path)
	}
	if err := w.closeDB(ctx); err != nil {
		return err
	}
	return w.lake.publish(ctx)
}

// closeDB checkpoints and closes the database, once, leaving the whole
// state in the main file (no write-ahead log) for a publish to copy. The
// checkpoint runs without the load's memory limit: writing out blocks
// needs more than a small limit leaves after a large transaction.
func (w *Warehouse) closeDB(ctx context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	var err error
	if w.defaultMemory != "" { // RESET does not lift the buffer pool's limit
		_, err = w.db.ExecContext(ctx, "SET memory_limit = "+Literal(w.defaultMemory))
	}
	if err == nil {
		_, err = w.db.ExecContext(ctx, "CHECKPOINT")
	}
	if err == nil {
		w.deletePins = 0 // freed by the checkpoint
	}
	if cerr := closeDuckDB(w.db); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkpointed(ctx, w.path)
	}
	if err != nil {
		return fmt.Errorf("warehouse %s: checkpoint and close: %w", w.path, err)
	}
	return nil
}

// checkpointed makes sure the database at path has no write-ahead log
// left: it opens the file again (DuckDB replays what the log holds) and
// forces a checkpoint. A log that survives that held nothing committed
// (a process killed while writing a commit leaves such a torn tail, which
// replay skips and a checkpoint with nothing to write does not truncate),
// so it is removed.
func checkpointed(ctx context.Context, path string) error {
	if _, err := os.Stat(path + ".wal"); err != nil {
		return nil
	}
	db, err := sql.Open("duckdb", path+"?"+noMetadataReuse)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, setNoMetadataReuse+"; FORCE CHECKPOINT")
	if cerr := closeDuckDB(db); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Remove(path + ".wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// PublishState publishes an output folder's working database, if the
// published warehouse is not already a copy of it: the state heals what
// a process killed mid-publish left. It takes the state lock like
// OpenState.
func PublishState(ctx context.Context, lake Lake, opts ...OpenOption) error {
	o := openOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := os.Stat(lake.StatePath()); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if _, err := os.Stat(lake.WarehousePath()); err != nil {
			return fmt.Errorf("output folder %s: nothing to publish (no sepipe run has written it): %w", lake.Root, ErrNoWarehouse)
		}
		// A folder an earlier release wrote: adopt it, then publish.
		wh, err := OpenState(ctx, lake, opts...)
		if err != nil {
			return err
		}
		defer wh.Close()
		return wh.Publish(ctx)
	}
	unlock, err := lockState(ctx, lake, o.lockWait)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(lake.StatePath() + ".wal"); err == nil {
		// A session died before its checkpoint: opening replays the log.
		wh, err := openWarehouse(ctx, lake.StatePath(), "?"+noMetadataReuse)
		if err != nil {
			return err
		}
		if err := wh.closeDB(ctx); err != nil {
			return err
		}
	}
	return lake.publish(ctx)
}

// stamp identifies a state of the working database file.
func stamp(fi os.FileInfo) string {
	return strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// publish copies the (closed, checkpointed) working database beside the
// published warehouse and renames the copy over it. The caller holds the
// state lock. A rename is atomic: a process killed at any point leaves the
// old published file or the new one, never a torn one or none, and the
// next publish (any later session) finishes the job. A reader holding the
// old file keeps reading it (the kernel keeps its data until it closes);
// a new connection opens the new one.
func (l Lake) publish(ctx context.Context) error {
	state, pub, next := l.StatePath(), l.WarehousePath(), l.nextPath()
	fi, err := os.Stat(state)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if _, err := os.Stat(state + ".wal"); err == nil {
		return fmt.Errorf("publish %s: the working database has an unapplied write-ahead log", state)
	}
	if l.upToDate(fi) {
		return nil // the published warehouse is this state already
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := copyState(ctx, state, next); err != nil {
		os.Remove(next)
		os.Remove(next + ".wal")
		return fmt.Errorf("publish: copy %s: %w", state, err)
	}
	if err := verifyCopy(ctx, next); err != nil {
		os.Remove(next)
		return fmt.Errorf("publish: the copy %s does not open: %w", next, err)
	}
	faults.At(faults.PublishCopied, "")
	if pid, prog, held := writeLockHolder(pub); held {
		os.Remove(next)
		return fmt.Errorf("%s: %w: PID %d (%s). Open it read-only (duckdb -readonly, read_only=True, access_mode=READ_ONLY); "+
			"the run is committed and `sepipe publish` (or the next sync) publishes it once that program is closed", pub, ErrPublishBlocked, pid, prog)
	}
	// A write-ahead log beside the published file belongs to the file being
	// replaced (a program that wrote it and died): DuckDB would replay it
	// into the new one.
	if err := os.Remove(pub + ".wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("publish: remove stale %s.wal: %w", pub, err)
	}
	if err := os.Rename(next, pub); err != nil {
		return fmt.Errorf("publish: rename %s to %s: %w", next, pub, err)
	}
	syncDir(l.Root)
	faults.At(faults.PublishRenamed, "")
	pfi, err := os.Stat(pub)
	if err == nil {
		err = writeFileAtomic(l.publishedMark(), []byte(stamp(fi)+"\n"+stamp(pfi)))
	}
	if err != nil {
		return fmt.Errorf("publish: record %s: %w", l.publishedMark(), err)
	}
	return nil
}

// upToDate reports whether the published warehouse is the working
// database as it is (state, its file's info): the published mark records
// the working database's stamp it was written from and the published
// file's own, so that a published file deleted, cut short or replaced
// since is published again (one emptied by another program was taken for
// current, and stayed unreadable; found by review).
func (l Lake) upToDate(state os.FileInfo) bool {
	mark, err := os.ReadFile(l.publishedMark())
	if err != nil {
		return false
	}
	pub, err := os.Stat(l.WarehousePath())
	return err == nil && string(mark) == stamp(state)+"\n"+stamp(pub)
}

// verifyCopy opens a copied database read-only and reads its catalog.
func verifyCopy(ctx context.Context, path string) error {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return err
	}
	defer closeDuckDB(db)
	var n int
	return db.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_tables()").Scan(&n)
}

// publishLimit is the memory DuckDB may hold while a publish rewrites
// the working database (it spills to .sepipe/publish.tmp past it), as a
// SET statement: 64 MiB and 1 MiB for each column of the widest table on
// each thread, whose row group in progress holds a buffer a column, on as
// many threads as keep that second part within 64 MiB.
// DuckDB's default, 80 % of the machine, took a 1 M-row sync's peak past
// 300 MB; 64 MiB alone ran out on a table of 66 columns.
func publishLimit(ctx context.Context, db *sql.DB) (string, error) {
	var cols, threads int64
	err := db.QueryRowContext(ctx, `SELECT coalesce(max(n), 0), current_setting('threads')::BIGINT FROM
		(SELECT count(*) AS n FROM duckdb_columns() WHERE database_name = 'src' GROUP BY schema_name, table_name)`).Scan(&cols, &threads)
	if err != nil {
		return "", fmt.Errorf("size the copy: %w", err)
	}
	// A wide table copies on fewer threads rather than in more memory:
	// the columns' buffers of all threads within 64 MiB more.
	if cols > 0 {
		threads = max(1, min(threads, 64/cols))
	}
	threads = max(threads, 1)
	return fmt.Sprintf("SET memory_limit = '%dMiB'; SET threads = %d", 64+cols*threads, threads), nil
}

// copyState copies the (closed, checkpointed) working database at state to
// next byte for byte when every DuckDB from 1.0 on reads it as it is
// (metadataChainsResolve), and rewrites it otherwise: a working database
// last checkpointed by an earlier sepipe, with DuckDB's metadata reuse on,
// until a session of this one checkpoints it.
func copyState(ctx context.Context, state, next string) error {
	if err := metadataChainsResolve(state); err != nil {
		return rewrite(ctx, state, next)
	}
	for _, p := range []string{next, next + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return copyFile(state, next)
}

// rewrite writes the (closed, checkpointed) working database at state
// as a new database file at next, in StorageVersion's format: every
// table, view, constraint and comment, table by table (DuckDB's COPY FROM
// DATABASE), then fsynced. The publish of a working database a byte copy
// of which DuckDB 1.1 could not read (copyState): one an earlier release
// checkpointed with DuckDB's metadata reuse on. About ten times the cost
// of the copy; the file it writes holds no space freed by earlier runs.
func rewrite(ctx context.Context, state, next string) error {
	for _, p := range []string{next, next + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	tmp := filepath.Join(filepath.Dir(next), "publish.tmp") // spills stay in .sepipe, not the working directory
	for _, q := range []string{
		"SET temp_directory = " + Literal(tmp),
		"SET preserve_insertion_order = false", // the working database's order is the load's, any already
		"ATTACH " + Literal(state) + " AS src (READ_ONLY)",
		"ATTACH " + Literal(next) + " AS dst (STORAGE_VERSION " + Literal(StorageVersion) + ")",
		"", // the memory limit, once the tables' widths are known
		"COPY FROM DATABASE src TO dst",
		"DETACH dst",
	} {
		if q == "" {
			q, err = publishLimit(ctx, db)
			if err != nil {
				break
			}
		}
		if _, err = db.ExecContext(ctx, q); err != nil {
			err = fmt.Errorf("%s: %w", strings.SplitN(q, " ", 2)[0], err)
			break
		}
	}
	if cerr := closeDuckDB(db); err == nil {
		err = cerr
	}
	os.RemoveAll(tmp)
	if err != nil {
		return err
	}
	if _, err := os.Stat(next + ".wal"); err == nil {
		return fmt.Errorf("the copy %s kept a write-ahead log", next)
	}
	f, err := os.Open(next)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// copyFile copies src to dst (truncating it) and syncs dst. On Linux
// io.Copy between files uses copy_file_range, which copy-on-write file
// systems (btrfs, XFS) turn into a reflink.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		_ = f.Sync()
		f.Close()
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// PublishedAt is when the published warehouse was last replaced (zero if
// there is none).
func (l Lake) PublishedAt() time.Time {
	fi, err := os.Stat(l.WarehousePath())
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// PublishPending reports whether the working database holds changes the
// published warehouse does not.
func (l Lake) PublishPending() bool {
	fi, err := os.Stat(l.StatePath())
	if err != nil {
		return false
	}
	if _, err := os.Stat(l.StatePath() + ".wal"); err == nil {
		return true
	}
	return !l.upToDate(fi)
}
