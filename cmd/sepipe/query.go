package main

import (
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/internal/colnames"
	"github.com/sepipe/sepipe/query"
)

func init() { register(newQueryCmd) }

func newQueryCmd(g *globals) *cobra.Command {
	var (
		f      folderFlags
		format string
	)
	cmd := &cobra.Command{
		Use:   "query SQL",
		Short: "Run SQL on the warehouse and print the result",
		Long: `Query opens the published DIR/warehouse.duckdb read-only and runs one SQL
statement; it never waits for a sync, nor a sync for it. The statement cannot
reach files: DuckDB's external access is off (COPY ... TO, read_text, ATTACH
fail) except for reading the Parquet lake under DIR/lake.

Tables: one per report object (course, path, curriculum, "user",
userCourseProgress, ...), named by object id with columns named by field id,
each with its daily history in <object>_history (column snapshot_date); the
collections (themes, assets, webhook_subscriptions, webhook_delivery_logs),
events, and _sepipe_runs, _sepipe_run_objects and _sepipe_rejects. The lake
is queryable too, e.g. read_parquet('DIR/lake/course/*/*.parquet',
hive_partitioning = true).`,
		Example: `  sepipe query "SELECT status, count(*) FROM userCourseProgress GROUP BY 1"
  sepipe query --out ./sepipe-demo --format csv "SELECT * FROM course" > course.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "table", "csv", "json":
			default:
				return usagef("--format %q: want table, csv or json", format)
			}
			out, err := f.folder(cmd)
			if err != nil {
				return err
			}
			path := filepath.Join(out, "warehouse.duckdb")
			if _, err := os.Stat(path); err != nil {
				return usagef("no warehouse at %s: run 'sepipe sync' or 'sepipe demo' first, or pass --out", path)
			}
			wh, err := query.Open(cmd.Context(), path, filepath.Join(out, "lake"))
			if err != nil {
				return err
			}
			defer wh.Close()
			rows, err := wh.Query(cmd.Context(), args[0])
			if err != nil {
				return usagef("query: %v", err)
			}
			defer rows.Close()
			switch format {
			case "csv":
				return writeCSV(g.stdout, rows, isTerminal(g.stdout))
			case "json":
				return writeJSON(g.stdout, rows)
			}
			return printRows(g.stdout, rows)
		},
	}
	f.add(cmd, "./sepipe-demo", "output folder holding warehouse.duckdb (default: the config's output.dir when there is a config, else ./sepipe-demo)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, csv or json (one object per line)")
	return cmd
}

func scanAll(rows *sql.Rows, fn func(cols, types []string, vals []any) error) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	cols = colnames.Unique(cols) // a JSON reader keeps one of two equal keys
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	types := dbTypes(rows)
	if err := fn(cols, types, nil); err != nil {
		return err
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := fn(cols, types, vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// writeCSV writes a query result as CSV. On a terminal (onTerminal) each
// field is escaped as termEscape escapes it, its newlines and tabs kept
// (CSV quotes them), so the service's escape sequences do not reach the
// terminal, as the table and JSON formats already kept them off; into a
// file or a pipe the values are written exactly.
func writeCSV(w io.Writer, rows *sql.Rows, onTerminal bool) error {
	cw := csv.NewWriter(w)
	field := func(s string) string { return s }
	if onTerminal {
		field = func(s string) string { return termEscape(s, true) }
	}
	err := scanAll(rows, func(cols, types []string, vals []any) error {
		if vals == nil {
			head := make([]string, len(cols))
			for i, c := range cols {
				head[i] = field(c)
			}
			return cw.Write(head)
		}
		rec := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				continue
			}
			rec[i] = field(query.ValueText(v, types[i]))
		}
		return cw.Write(rec)
	})
	cw.Flush()
	if err != nil {
		return err
	}
	return cw.Error()
}

func writeJSON(w io.Writer, rows *sql.Rows) error {
	var line []byte
	return scanAll(rows, func(cols, types []string, vals []any) error {
		if vals == nil {
			return nil
		}
		line = append(line[:0], '{')
		for i, c := range cols {
			if i > 0 {
				line = append(line, ',')
			}
			k, _ := json.Marshal(c)
			line = append(append(append(line, k...), ':'), query.ValueJSON(vals[i], types[i])...)
		}
		line = append(line, '}', '\n')
		_, err := w.Write(line)
		return err
	})
}
