package load

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
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
	if _, err := db.ExecContext(ctx, ownDDL); err != nil {
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

// txContext is the context of a transaction that its own goroutine ends
// with a deferred Rollback (a run's, Begin; LoadEvents, RecordFailure,
// historyToVersions): ctx's values without its cancellation. The
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

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}
