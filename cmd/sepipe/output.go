package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sepipe/sepipe/internal/colnames"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/query"
)

// printSummary writes the end-of-run table: one line per stream. NEW is
// the rows each stream brought that its table did not hold before (for
// merge streams: inserted or changed), "-" when the run did not count.
func printSummary(w io.Writer, res *pipeline.Result) {
	tw := tabwriter.NewWriter(termSafe(w), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tMODE\tROWS\tNEW\tREJECTS\tPAGES\tREQUESTS\tDURATION\tSTATUS")
	for _, o := range res.Objects {
		status, mode := "ok", string(o.Mode)
		switch {
		case o.Status == pipeline.StatusSkipped, o.Status == pipeline.StatusDeferred:
			status = o.Status
		case o.Err != nil:
			status = "FAILED"
		case errors.Is(o.LakeErr, lakehouse.ErrDataFileLost):
			status = "LAKE-FAILED" // the warehouse has it; the Iceberg table cannot take it until rebuilt
		case o.LakeErr != nil:
			status = "lake-pending" // the warehouse has it; the next run commits it to the Iceberg table
		}
		if mode == "" {
			mode = "-"
		}
		fresh := "-"
		if o.Err == nil && o.NewRows >= 0 {
			fresh = strconv.FormatInt(o.NewRows, 10)
		}
		// REJECTS: what the run put in _sepipe_rejects, less values too
		// long (a warning of their own): rows left out, values null.
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", cell(o.Object), cell(mode), o.Rows, fresh, o.RejectedRows+o.NulledValues, o.Pages, o.Requests,
			o.Duration.Round(time.Millisecond), status)
	}
	tw.Flush()
}

// printRows writes a query result as an aligned table. Each column name
// and cell is escaped whole (termEscape without layout: a newline shows as
// \x0a, a tab as \x09), so a value cannot print a row or a column that is
// not in the result; only the tabs and newlines printRows adds lay it out.
func printRows(w io.Writer, rows *sql.Rows) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	types := dbTypes(rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := make([]string, len(cols))
	for i, c := range colnames.Unique(cols) {
		head[i] = cell(c)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(cols))
		for i, v := range vals {
			cells[i] = cell(formatValue(v, types[i]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}

// dbTypes returns each result column's DuckDB type name.
func dbTypes(rows *sql.Rows) []string {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil
	}
	out := make([]string, len(cts))
	for i, c := range cts {
		out[i] = c.DatabaseTypeName()
	}
	return out
}

// formatValue formats v for a human: floats to two places.
func formatValue(v any, dbType string) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.2f", f)
	}
	return query.ValueText(v, dbType)
}
