package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/schemas"
)

func init() {
	register(newDiscoverCmd)
	register(newDescribeCmd)
}

func newDiscoverCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "List the tenant's report objects and collections",
		Long: `Discover lists what sepipe can read from the tenant: every Coach report
object (id, display name, number of fields, rows) and the collection streams
of the other interfaces (themes, assets, webhook_subscriptions,
webhook_delivery_logs) with their item counts. A collection whose credential
is missing or refused is listed with the reason. Nothing is written.

Use the ids of both lists in sepipe.yaml (include, exclude, streams.<id>)
and --objects, and
'sepipe describe OBJECT' for an object's fields.`,
		Example: `  sepipe discover
  sepipe discover --config ./acme.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, client, err := f.connect(cmd, g, true)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			objs, err := client.Objects(ctx)
			denied := errors.Is(err, extract.ErrForbidden) || errors.Is(err, extract.ErrNotFound)
			if err != nil && !denied {
				return fmt.Errorf("list report objects: %w", err)
			}
			tw := tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "REPORT OBJECT\tNAME\tFIELDS\tROWS")
			if denied {
				// The tenant may not use Coach reporting; the other
				// interfaces are listed all the same.
				fmt.Fprintf(tw, "(not entitled)\t%s\t-\t-\n", cell(err))
			}
			for _, o := range objs {
				fields, rows := "?", "?"
				if fs, err := client.Describe(ctx, o.ID); err == nil {
					fields = fmt.Sprint(len(fs))
				}
				if n, err := countRows(ctx, client, o.ID); err == nil && n >= 0 {
					rows = fmt.Sprint(n)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(o.ID), cell(o.DisplayName), cell(fields), cell(rows))
			}
			tw.Flush()
			fmt.Fprintln(g.stdout)
			tw = tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "COLLECTION\tINTERFACE\tITEMS")
			for _, col := range collections(ctx, c, client) {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(col.name), cell(col.iface), cell(col.items))
			}
			return tw.Flush()
		},
	}
	f.add(cmd, false)
	return cmd
}

type collection struct{ name, iface, items string }

// collections lists every collection stream by the id --objects, include
// and streams take (pipeline.Collections), with its item count, or why a
// sync cannot read it (pipeline.Readable: a credential is missing).
func collections(ctx context.Context, c *Config, client *extract.Client) []collection {
	reason := func(err error) string {
		if errors.Is(err, extract.ErrUnauthorized) || errors.Is(err, extract.ErrForbidden) {
			return "not readable: " + err.Error()
		}
		return "error: " + err.Error()
	}
	readable := pipeline.Readable(client)
	subs, subsErr := -1, error(nil)
	var out []collection
	for _, name := range pipeline.Collections {
		col := collection{name: name, iface: pipeline.StreamInterface(name), items: "?"}
		switch {
		case !slices.Contains(readable, name) && col.iface == extract.IfaceWebhooks:
			col.items = "not readable: " + c.Credentials.APIToken.String() + " is not set (a sync skips it)"
		case !slices.Contains(readable, name):
			col.items = "not readable: no credential for the " + col.iface + " interface (a sync skips it)"
		case name == pipeline.StreamAssets:
			if total, err := pipeline.CountItems(ctx, client, extract.V3List("assets")); err != nil {
				col.items = reason(err)
			} else if total >= 0 {
				col.items = fmt.Sprint(total)
			}
		case name == pipeline.StreamThemes:
			if ts, err := client.Themes(ctx, extract.ThemeQuery{}); err != nil {
				col.items = reason(err)
			} else {
				col.items = fmt.Sprint(len(ts))
			}
		case name == pipeline.StreamSubscriptions:
			if ss, err := client.Subscriptions(ctx); err != nil {
				subsErr, col.items = err, reason(err)
			} else {
				subs, col.items = len(ss), fmt.Sprint(len(ss))
			}
		case name == pipeline.StreamDeliveryLogs && subsErr != nil:
			col.items = reason(subsErr)
		case name == pipeline.StreamDeliveryLogs && subs >= 0:
			col.items = fmt.Sprintf("the logs of %d subscriptions", subs)
		}
		out = append(out, col)
	}
	return out
}

// countRows asks for page 1 with one row per page: totalResults.
func countRows(ctx context.Context, client *extract.Client, object string) (int64, error) {
	p, err := client.QueryPage(ctx, object, extract.Query{Page: 1, ResultsPerPage: 1})
	if err != nil {
		return -1, err
	}
	info, err := extract.ParsePageInfo(p.Body)
	return info.TotalResults, err
}

func newDescribeCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "describe OBJECT",
		Short: "Show a report object's fields, types and picklist options",
		Long: `Describe prints the fields of one report object as the service's /describe
gives them: field id (the column name), service type, the DuckDB column type
sepipe loads it as, display name (the column comment) and, for picklists, the
allowed options. Use it to write a stream's primary_key, cursor and filters:
a filter's operator must suit the field's type (eq/ne for any but picklist;
co/bw/nc for strings; in for picklists, with values among the options;
lt/le/gt/ge/be/nb for numbers and dates).`,
		Example: `  sepipe describe userCourseProgress
  sepipe describe user --config ./acme.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, client, err := f.connect(cmd, g, true)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			objs, err := client.Objects(ctx)
			if err != nil {
				return fmt.Errorf("list report objects: %w", err)
			}
			ids := make([]string, len(objs))
			for i, o := range objs {
				ids[i] = o.ID
			}
			if !slices.Contains(ids, args[0]) {
				return fmt.Errorf("%w %q (the service has: %s)", pipeline.ErrUnknownObject, args[0], strings.Join(ids, ", "))
			}
			fields, err := client.Describe(ctx, args[0])
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FIELD\tTYPE\tDUCKDB\tDISPLAY NAME\tOPTIONS")
			for _, fd := range fields {
				duck := "?"
				if t, ok := schemas.TypeNamed(fd.Type); ok && t.Describe {
					duck = t.DuckDB
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(fd.ID), cell(fd.Type), cell(duck), cell(fd.DisplayName), cell(strings.Join(fd.Options, ", ")))
			}
			return tw.Flush()
		},
	}
	f.add(cmd, false)
	return cmd
}
