package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/load"
)

// DB is a published warehouse opened for SQL that a person or a page
// supplies: read-only and sandboxed (Open), running one query at a time
// (Query).
type DB struct {
	wh   *load.Warehouse
	path string
}

// Open opens an existing warehouse read-only for SQL that a person or a
// page supplies (sepipe query, the dashboard's panels), to be run with
// Query: DuckDB's external access is off and the configuration locked, so
// the SQL cannot read files (read_text) other than the lake under
// lakeDir, which stays queryable with read_parquet. DuckDB's allowed
// directories are for writing too, so Query runs only queries: no COPY
// ... TO, EXPORT or ATTACH into the lake. Like load.OpenReadOnly it
// creates nothing; a missing file wraps load.ErrNoWarehouse.
func Open(ctx context.Context, path, lakeDir string) (*DB, error) {
	wh, err := load.OpenReadOnly(ctx, path)
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
		"SET allowed_directories = [" + load.Literal(allowed) + "]",
		"SET allowed_paths = []",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	} {
		if _, err := wh.DB().ExecContext(ctx, q); err != nil {
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
	if err := checkSandbox(ctx, wh.DB(), allowed, self); err != nil {
		wh.Close()
		return nil, fmt.Errorf("warehouse %s: sandbox: %w", path, err)
	}
	return &DB{wh: wh, path: path}, nil
}

// HasTable reports whether the warehouse has a table (or view) named
// name.
func (d *DB) HasTable(ctx context.Context, name string) (bool, error) {
	return d.wh.HasTable(ctx, name)
}

// SQL is the connection, for the caller's own statements (the
// dashboard's filters, set as DuckDB variables); the sandbox holds for
// them too.
func (d *DB) SQL() *sql.DB { return d.wh.DB() }

// Close closes the database.
func (d *DB) Close() error { return d.wh.Close() }

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
	if err := db.QueryRowContext(ctx, `SELECT [`+load.Literal(allowed)+`]::VARCHAR`).Scan(&wantDirs); err != nil {
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

// ErrNotAQuery: SQL given to Query is not one query.
var ErrNotAQuery = errors.New("only one query is allowed (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW or SUMMARIZE)")

// Query runs SQL a person or a page supplies, if it is one query; anything else (COPY, EXPORT,
// ATTACH, SET, CALL, PRAGMA, EXPLAIN, which may ANALYZE a COPY, or several
// statements) wraps ErrNotAQuery and nothing of it runs. DuckDB's own
// parser says what the SQL is (json_serialize_sql, which parses and
// serializes SELECT statements only), not a reading of the text, and only
// parses: preparing the statement would bind it, and binding EXPORT
// DATABASE already creates its folder; duckdb-go's PrepareContext and
// QueryContext run every statement but the last before any check.
func (d *DB) Query(ctx context.Context, query string) (*sql.Rows, error) {
	var failed bool
	var kind, msg sql.NullString
	var n sql.NullInt64
	err := d.SQL().QueryRowContext(ctx, `SELECT j->>'error' = 'true', j->>'error_type', j->>'error_message', json_array_length(j->'statements')
		FROM (SELECT json_serialize_sql(`+load.Literal(query)+`)::JSON AS j)`).Scan(&failed, &kind, &msg, &n)
	switch {
	case err != nil:
		return nil, fmt.Errorf("warehouse %s: parse the query: %w", d.path, err)
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
	return d.SQL().QueryContext(ctx, query)
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
