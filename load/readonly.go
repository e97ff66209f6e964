package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoWarehouse is wrapped by OpenReadOnly when the file does not exist.
var ErrNoWarehouse = errors.New("no warehouse")

// OpenReadOnly opens an existing warehouse for reading only: it never
// creates the file, its bookkeeping tables or a write-ahead log, so a dry
// run (sepipe plan) leaves the output folder exactly as it was. A missing
// file wraps ErrNoWarehouse; a file another process holds open for writing
// wraps ErrWarehouseLocked. The methods that read (State, StoredFields,
// PendingPublishes, DB) work; those that write fail.
//
// The file is attached read-only to an in-memory database, under its base
// name ("warehouse" for warehouse.duckdb), and made the default catalog.
// Opening the path directly would let DuckDB hand back a database this
// process already has open on that path, which after a publish is the
// replaced file: a long-running reader would never see a new run.
//
// Its SQL runs in UTC, as sepipe's connections to the working database
// do, whatever the machine's time zone (DuckDB's default): a timestamp's
// day or text (a dashboard panel's event day, a run's start) is the UTC
// one, as every timestamp sepipe shows is.
func OpenReadOnly(ctx context.Context, path string) (*Warehouse, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("warehouse %s: %w", path, ErrNoWarehouse)
		}
		return nil, fmt.Errorf("warehouse %s: %w", path, err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: open: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	alias := Ident(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	if _, err := db.ExecContext(ctx, "SET TimeZone = 'UTC'; ATTACH "+Literal(path)+" AS "+alias+" (READ_ONLY); USE "+alias); err != nil {
		closeDuckDB(db)
		return nil, classifyOpen(path, err)
	}
	return &Warehouse{db: db, path: path}, nil
}

// HasTable reports whether the warehouse has a table named object: a
// table, or the view a replace stream's table is.
func (w *Warehouse) HasTable(ctx context.Context, object string) (bool, error) {
	kind, err := relationKind(ctx, w.db, object)
	return kind != "", err
}
