package lakehouse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go/catalog"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Status is what Reconcile found.
type Status string

const (
	// Committed: the run's snapshot is in the table (it was committed
	// before the crash); the caller only marks the intent done.
	Committed Status = "committed"
	// CommittedNow: the run's snapshot was not in the table and Reconcile
	// committed the intent.
	CommittedNow Status = "committed-now"
	// Discard: the intent can never be committed (its files are gone or
	// cut short, its table was dropped, or the snapshot log no longer reaches back to its
	// parent and so cannot prove it was not committed). The caller marks
	// it discarded, calls Discard, and syncs that day again.
	Discard Status = "discard"
)

// Reconciled is Reconcile's answer.
type Reconciled struct {
	Status     Status
	SnapshotID int64  // Committed, CommittedNow
	Reason     string // Discard
	Attempts   int    // CommittedNow
}

// Reconcile settles an intent the caller recorded but did not mark done
// (a crash between stage and commit, or between commit and the mark): it
// reads the table's snapshot log for the intent's run id. Found: nothing
// to do. Not found: the intent is committed now, unless it cannot be
// (see Discard). Reconcile never commits an intent twice.
//
// The snapshot log is the evidence: expiring snapshots (Expire) younger
// than the oldest unmarked intent would erase it, so the caller settles
// intents before it expires, and an intent whose parent snapshot was
// expired is reported Discard, never committed blind.
func (l *Lakehouse) Reconcile(ctx context.Context, in Intent) (Reconciled, error) {
	name := identString(in.Table)
	if err := in.check(); err != nil {
		return Reconciled{}, &TableError{Table: name, Step: "reconcile", Err: err}
	}
	tbl, err := l.cat.LoadTable(ctx, in.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return Reconciled{Status: Discard, Reason: "the table does not exist"}, nil
	}
	if err != nil {
		return Reconciled{}, &TableError{Table: name, Step: "reconcile: load table", Err: err}
	}
	meta := tbl.Metadata()
	if s := snapshotOfRun(meta, in.RunID); s != nil {
		return Reconciled{Status: Committed, SnapshotID: s.SnapshotID}, nil
	}
	if !logReaches(meta, in.ParentSnapshotID) {
		return Reconciled{Status: Discard, Reason: "the snapshot log no longer reaches the intent's parent snapshot (expired), so it cannot show the run was not committed"}, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return Reconciled{}, &TableError{Table: name, Step: "reconcile: open file IO", Err: err}
	}
	for _, p := range in.Files {
		reason, err := unusableStagedFile(fsys, p)
		if err != nil {
			return Reconciled{}, &TableError{Table: name, Step: "reconcile: check staged file", Path: p, Err: err}
		}
		if reason != "" {
			return Reconciled{Status: Discard, Reason: reason}, nil
		}
	}
	res, err := l.Commit(ctx, in)
	if err != nil {
		return Reconciled{}, err
	}
	st := CommittedNow
	if res.Already {
		st = Committed // another process reconciled it meanwhile
	}
	return Reconciled{Status: st, SnapshotID: res.SnapshotID, Attempts: res.Attempts}, nil
}

// unusableStagedFile says why staged file p can never be committed (""
// when it can): it is gone, or it is not whole Parquet, empty or cut
// short (the machine died before the OS wrote out a file the run had
// closed; the intent, in a database that syncs, survived). Such a file
// failed every commit of the intent, so every later run failed settling
// it. An error is one of reading the file, which may pass: the caller
// tries again later.
func unusableStagedFile(fsys icebergio.IO, p string) (string, error) {
	f, err := fsys.Open(p)
	if isNotExist(err) {
		return fmt.Sprintf("staged file %s is gone", p), nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	// A Parquet file ends with its footer's length and "PAR1".
	var tail [8]byte
	if fi.Size() >= 12 {
		if _, err := f.ReadAt(tail[:], fi.Size()-8); err != nil {
			return "", err
		}
	}
	if fi.Size() < 12 || string(tail[4:]) != "PAR1" || int64(binary.LittleEndian.Uint32(tail[:4]))+12 > fi.Size() {
		return fmt.Sprintf("staged file %s is cut short (%d bytes, no Parquet footer)", p, fi.Size()), nil
	}
	// Only a footer that was read and is not Parquet's condemns the file;
	// a read that failed (S3's 503, a dropped connection) may pass.
	rf := &readFailure{File: f}
	pf, err := file.NewParquetReader(rf)
	if err != nil {
		if rf.err != nil {
			return "", rf.err
		}
		return fmt.Sprintf("staged file %s is not readable Parquet: %v", p, err), nil
	}
	_ = pf.Close()
	return "", nil
}

// readFailure is a staged file that keeps the first error of its reads,
// so that a failed read is told from a footer that is not Parquet.
type readFailure struct {
	icebergio.File
	err error
}

func (r *readFailure) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.File.ReadAt(p, off)
	if err != nil && !(err == io.EOF && n == len(p)) && r.err == nil {
		r.err = err
	}
	return n, err
}

// logReaches reports whether meta's snapshots still include the intent's
// parent (for an intent staged on an empty table: the table's first
// snapshot), so that every snapshot committed after the intent was
// staged is still in the log.
func logReaches(meta table.Metadata, parent *int64) bool {
	snaps := meta.Snapshots()
	if parent != nil {
		return meta.SnapshotByID(*parent) != nil
	}
	if len(snaps) == 0 {
		return true
	}
	for _, s := range snaps {
		if s.ParentSnapshotID == nil {
			return true // the first snapshot is still there
		}
	}
	return false
}

// Discard removes an intent's staged files, which no snapshot will ever
// hold: call it for a run that failed, or when Reconcile says Discard. It
// refuses when the run's snapshot is in the table, and it keeps any file
// the current snapshot references.
func (l *Lakehouse) Discard(ctx context.Context, in Intent) error {
	name := identString(in.Table)
	tbl, err := l.cat.LoadTable(ctx, in.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil // its files went with it
	}
	if err != nil {
		return &TableError{Table: name, Step: "discard: load table", Err: err}
	}
	if s := snapshotOfRun(tbl.Metadata(), in.RunID); s != nil {
		return &TableError{Table: name, Step: "discard", Err: fmt.Errorf("run %s is committed in snapshot %d", in.RunID, s.SnapshotID)}
	}
	live := map[string]bool{}
	if tbl.CurrentSnapshot() != nil {
		files, err := allFiles(ctx, tbl)
		if err != nil {
			return &TableError{Table: name, Step: "discard: list live files", Err: err}
		}
		for _, f := range files {
			live[f] = true
		}
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return &TableError{Table: name, Step: "discard: open file IO", Err: err}
	}
	var errs []error
	for _, p := range in.Files {
		if live[p] {
			continue
		}
		if err := fsys.Remove(p); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &TableError{Table: name, Step: "discard: remove staged files", Err: err}
	}
	return nil
}
