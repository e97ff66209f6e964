package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// OpenSandboxed opens an existing warehouse read-only for SQL that a
// person or a page supplies (sepipe query, the dashboard's panels), to be
// run with QuerySandboxed: DuckDB's external access is off and the
// configuration locked, so the SQL cannot read files (read_text) other
// than the lake under lakeDir, which stays queryable with read_parquet.
// DuckDB's allowed directories are for writing too, so QuerySandboxed
// runs only queries: no COPY ... TO, EXPORT or ATTACH into the lake. Like
// OpenReadOnly it creates nothing.
func OpenSandboxed(ctx context.Context, path, lakeDir string) (*Warehouse, error) {
	wh, err := OpenReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(lakeDir)
	if err != nil {
		wh.Close()
		return nil, fmt.Errorf("warehouse %s: lake %s: %w", path, lakeDir, err)
	}
	allowed := dir + string(filepath.Separator)
	for _, q := range []string{
		// No temporary folder: DuckDB adds its own (an in-memory
		// database's is <cwd>/.tmp) to the directories a query may read
		// when external access goes off. A query over the warehouse and
		// the lake spills nothing it could not hold (issue 40).
		"SET temp_directory = ''",
		"SET allowed_directories = [" + Literal(allowed) + "]",
		"SET allowed_paths = []",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	} {
		if _, err := wh.db.ExecContext(ctx, q); err != nil {
			wh.Close()
			return nil, fmt.Errorf("warehouse %s: sandbox (%s): %w", path, q, err)
		}
	}
	// What DuckDB holds now, the configuration locked, is what a query
	// can reach: checked, not assumed, since a DuckDB release may widen
	// it (as the temporary folder did).
	self, err := filepath.Abs(path) // DuckDB keeps the attached file's absolute path
	if err != nil {
		wh.Close()
		return nil, fmt.Errorf("warehouse %s: %w", path, err)
	}
	if err := checkSandbox(ctx, wh.db, allowed, self); err != nil {
		wh.Close()
		return nil, fmt.Errorf("warehouse %s: sandbox: %w", path, err)
	}
	return wh, nil
}

// checkSandbox reads back the settings that bound what a sandboxed query
// can reach and fails unless they are exactly sepipe's: external access
// off, the configuration locked, no temporary folder, no allowed
// directory but allowed, and no allowed path but the attached warehouse
// file and its write-ahead log's (DuckDB allows the files of an attached
// database itself, and a query can read their bytes: the warehouse it
// queries anyway).
func checkSandbox(ctx context.Context, db *sql.DB, allowed, warehouse string) error {
	var access, locked, temp, dirs, paths string
	err := db.QueryRowContext(ctx, `SELECT current_setting('enable_external_access')::VARCHAR, current_setting('lock_configuration')::VARCHAR,
		current_setting('temp_directory')::VARCHAR, current_setting('allowed_directories')::VARCHAR, current_setting('allowed_paths')::VARCHAR`).
		Scan(&access, &locked, &temp, &dirs, &paths)
	if err != nil {
		return fmt.Errorf("read its settings: %w", err)
	}
	var wantDirs string
	if err := db.QueryRowContext(ctx, `SELECT [`+Literal(allowed)+`]::VARCHAR`).Scan(&wantDirs); err != nil {
		return fmt.Errorf("read its settings: %w", err)
	}
	switch {
	case access != "false", locked != "true":
		return fmt.Errorf("external access %s, configuration locked %s: want false and true", access, locked)
	case temp != "":
		return fmt.Errorf("DuckDB keeps a temporary folder %q a query could read", temp)
	case dirs != wantDirs:
		return fmt.Errorf("allowed directories %s: want the lake alone, %s", dirs, wantDirs)
	}
	for p := range strings.SplitSeq(strings.Trim(paths, "[]"), ", ") {
		if p != "" && p != warehouse && !strings.HasPrefix(p, warehouse+".wal") {
			return fmt.Errorf("allowed paths %s: want only the warehouse's own files", paths)
		}
	}
	return nil
}

// ErrNotAQuery: SQL given to QuerySandboxed is not one query.
var ErrNotAQuery = errors.New("only one query is allowed (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW or SUMMARIZE)")

// QuerySandboxed runs SQL a person or a page supplies on a warehouse
// OpenSandboxed opened, if it is one query; anything else (COPY, EXPORT,
// ATTACH, SET, CALL, PRAGMA, EXPLAIN, which may ANALYZE a COPY, or several
// statements) wraps ErrNotAQuery and nothing of it runs. DuckDB's own
// parser says what the SQL is (json_serialize_sql, which parses and
// serializes SELECT statements only), not a reading of the text, and only
// parses: preparing the statement would bind it, and binding EXPORT
// DATABASE already creates its folder; duckdb-go's PrepareContext and
// QueryContext run every statement but the last before any check.
func (w *Warehouse) QuerySandboxed(ctx context.Context, query string) (*sql.Rows, error) {
	var failed bool
	var kind, msg sql.NullString
	var n sql.NullInt64
	err := w.db.QueryRowContext(ctx, `SELECT j->>'error' = 'true', j->>'error_type', j->>'error_message', json_array_length(j->'statements')
		FROM (SELECT json_serialize_sql(`+Literal(query)+`)::JSON AS j)`).Scan(&failed, &kind, &msg, &n)
	switch {
	case err != nil:
		return nil, fmt.Errorf("warehouse %s: parse the query: %w", w.path, err)
	case failed && kind.String == "parser":
		return nil, errors.New(msg.String) // a syntax error, as DuckDB words it
	case failed && startsWithWord(query, "pivot", "unpivot"):
		// A PIVOT without its values listed is several statements inside
		// DuckDB (it first reads the values), which the parser will not
		// serialize; with them listed it is one query.
		return nil, fmt.Errorf("%w; a PIVOT runs here with its values listed: PIVOT course ON status IN ('Active', 'Inactive') USING count(*)", ErrNotAQuery)
	case failed: // DuckDB says "Only SELECT statements can be serialized"
		return nil, fmt.Errorf("%w; this is not a query (COPY, ATTACH, SET, PRAGMA and the like are not run here; a pragma's table function is: SELECT * FROM pragma_table_info('course'))", ErrNotAQuery)
	case n.Int64 != 1:
		return nil, fmt.Errorf("%w: this is %d statements", ErrNotAQuery, n.Int64)
	}
	return w.db.QueryContext(ctx, query)
}

// startsWithWord reports whether sql's first word, past white space and
// comments, is one of words (lower case).
func startsWithWord(sql string, words ...string) bool {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n(")
		switch {
		case strings.HasPrefix(sql, "--"):
			if i := strings.IndexByte(sql, '\n'); i >= 0 {
				sql = sql[i+1:]
				continue
			}
			return false
		case strings.HasPrefix(sql, "/*"):
			if i := strings.Index(sql, "*/"); i >= 0 {
				sql = sql[i+2:]
				continue
			}
			return false
		}
		break
	}
	end := strings.IndexFunc(sql, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') })
	if end < 0 {
		end = len(sql)
	}
	return slices.Contains(words, strings.ToLower(sql[:end]))
}
