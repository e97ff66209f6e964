package main

import (
	"database/sql"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sepipe/sepipe/pipeline"
)

// printSummary writes the end-of-run table: one line per object.
func printSummary(w io.Writer, res *pipeline.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "OBJECT\tROWS\tREJECTED\tPAGES\tREQUESTS\tDURATION\tSTATUS\t")
	for _, o := range res.Objects {
		status := "ok"
		if o.Err != nil {
			status = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", o.Object, o.Rows, o.RejectedRows, o.Pages, o.Requests,
			o.Duration.Round(time.Millisecond), status)
	}
	tw.Flush()
}

// printRows writes a query result as an aligned table.
func printRows(w io.Writer, rows *sql.Rows) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
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
			cells[i] = formatValue(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case float64:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprint(v)
}
