package load

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Column is one column of a table sepipe defines, as DuckDB has it.
type Column struct {
	Name    string
	Type    string // DuckDB's name for it, lower case: varchar, timestamp with time zone, json, ...
	NotNull bool
	Key     bool // part of the primary key
}

// OwnTables returns the columns of the tables sepipe itself defines (the
// events table and the _sepipe_ bookkeeping tables), in column order, as
// DuckDB creates them from sepipe's DDL (migrations included): the DDL is
// the one owner of their columns and types, and what documents them (the
// dbt sources) reads them from here.
func OwnTables(ctx context.Context) (map[string][]Column, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("own tables: open an in-memory database: %w", err)
	}
	defer closeDuckDB(db)
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, metaDDL+namesDDL+lakeIntentsDDL+migrations+eventsDDL); err != nil {
		return nil, fmt.Errorf("own tables: create: %w", err)
	}
	keys := map[[2]string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT table_name, unnest(constraint_column_names) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'`)
	if err != nil {
		return nil, fmt.Errorf("own tables: read keys: %w", err)
	}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return nil, err
		}
		keys[[2]string{t, c}] = true
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns()
		WHERE database_name = current_database() ORDER BY table_name, column_index`)
	if err != nil {
		return nil, fmt.Errorf("own tables: read columns: %w", err)
	}
	defer rows.Close()
	out := map[string][]Column{}
	for rows.Next() {
		var t, c, typ string
		var nullable bool
		if err := rows.Scan(&t, &c, &typ, &nullable); err != nil {
			return nil, err
		}
		out[t] = append(out[t], Column{Name: c, Type: strings.ToLower(typ), NotNull: !nullable, Key: keys[[2]string{t, c}]})
	}
	return out, rows.Err()
}
