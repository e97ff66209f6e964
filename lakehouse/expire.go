package lakehouse

import (
	"context"
	"errors"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Expired is what Expire did to one table.
type Expired struct {
	Table           string
	SnapshotsBefore int
	SnapshotsAfter  int
	OrphansRemoved  int      // files no snapshot referenced, older than the cutoff
	OrphanLocations []string // those files
}

// Expire expires, in every table of the configured namespace, the
// snapshots older than olderThan (the current one is always kept), lets
// iceberg-go delete the manifests and data files only those snapshots
// referenced, then removes orphan files under the table's location that
// are older than olderThan (staged files of runs that never committed,
// files of a commit attempt that lost a race).
//
// Expiring erases the run ids Reconcile looks for: settle every recorded
// intent before expiring, and keep olderThan longer than a run can stay
// unsettled.
func (l *Lakehouse) Expire(ctx context.Context, olderThan time.Duration) ([]Expired, error) {
	return l.ExpireNamespace(ctx, l.cfg.Namespace, olderThan)
}

// ExpireNamespace is Expire for the tables of namespace; a namespace no
// run has made yet has none.
func (l *Lakehouse) ExpireNamespace(ctx context.Context, namespace string, olderThan time.Duration) ([]Expired, error) {
	streams, err := l.Tables(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var (
		out  []Expired
		errs []error
	)
	for _, s := range streams {
		e, err := l.ExpireTable(ctx, l.Identifier(namespace, s), olderThan)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// ExpireTable is Expire for one table.
func (l *Lakehouse) ExpireTable(ctx context.Context, ident table.Identifier, olderThan time.Duration) (Expired, error) {
	name := identString(ident)
	e := Expired{Table: name}
	var tbl *table.Table
	for attempt := 1; ; attempt++ {
		t, err := l.cat.LoadTable(ctx, ident)
		if err != nil {
			return e, &TableError{Table: name, Step: "expire: load table", Err: err}
		}
		e.SnapshotsBefore = len(t.Metadata().Snapshots())
		txn := t.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithOlderThan(olderThan), table.WithRetainLast(1), table.WithPostCommit(true)); err != nil {
			return e, &TableError{Table: name, Step: "expire snapshots", Err: err}
		}
		tbl, err = txn.Commit(ctx)
		if err == nil {
			break
		}
		if attempt >= l.attempts {
			return e, &TableError{Table: name, Step: "expire snapshots: commit", Err: err}
		}
		time.Sleep(l.retryWait) // another writer committed: expire again on its state
	}
	e.SnapshotsAfter = len(tbl.Metadata().Snapshots())
	res, err := tbl.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(olderThan))
	if err != nil {
		return e, &TableError{Table: name, Step: "expire: remove orphan files", Err: err}
	}
	e.OrphansRemoved, e.OrphanLocations = len(res.DeletedFiles), res.DeletedFiles
	return e, nil
}
