package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
)

func init() { register(newPlanCmd) }

func newPlanCmd(g *globals) *cobra.Command {
	f := &syncFlags{}
	cmd := &cobra.Command{
		Use:   "plan [--config sepipe.yaml] [--full-refresh STREAM,...]",
		Short: "Dry run: what a sync would read and write, writing nothing",
		Long: `Plan shows what 'sepipe sync' with the same config and flags would do, and
writes nothing: no lock, no staging, no folder. The warehouse is opened
read-only (and not at all if it does not exist yet).

Per stream it shows the write mode, whether it reads incrementally and from
which cursor value, the schema changes since the warehouse's last load (and
whether the stream's contract lets them through), the rows the read would
return and the requests it would take (one page with resultsPerPage 1 gives
the service's totalResults), and the lake partition it would write or
replace. A stream that would fail (schema drift under a freeze contract,
describe refused) is shown with the reason, and plan exits 1. A plan spends
requests too: a stream it could not look at because the service's request
quota ran out is shown as UNKNOWN (quota spent), as is a plan that met the
quota spent before it could list, and plan exits 3 with when it resets. A config the
sync would refuse (an unknown object, a filter, primary key or cursor that
does not fit the object's fields) is a configuration error: plan names its
line and exits 2, as sync does.`,
		Example: `  sepipe plan
  sepipe plan --full-refresh userCourseProgress
  sepipe plan --objects course,user --out ./warehouse`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, log, client, err := f.connect(cmd, g, true)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			sel, err := selectRun(ctx, c, client, f.objects, f.fullRefresh, true)
			if err != nil {
				return beforeRun(err) // a spent quota: nothing to plan until the reset (exit 3), as the sync
			}
			p, err := pipeline.Plan(ctx, client, pipeline.PlanConfig{
				Config: pipeline.Config{
					Out: c.Output.Dir, Selection: sel, Streams: c.streams(), FullRefresh: f.fullRefresh, Logger: log, Continuation: continuationFor(f.objects),
				},
				PageSize: c.Requests.PageSize,
			})
			if err != nil {
				return beforeRun(err)
			}
			w := g.stdout
			wh := "does not exist yet: the sync creates it"
			if p.HasWarehouse {
				wh = "exists (read-only)"
			}
			fmt.Fprintf(w, "plan for snapshot %s into %s\nwarehouse %s %s\n\n", p.SnapshotDate, c.Output.Dir, p.Warehouse, wh)
			tw := tabwriter.NewWriter(termSafe(w), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STREAM\tMODE\tREAD\tROWS\tPAGES\tREQUESTS\tSCHEMA\tPARTITION")
			failed, unread := 0, quotaCutShort{cmd: "plan", what: "stream(s) could not be planned"}
			for _, o := range p.Objects {
				read := "full"
				switch {
				case o.FullRefresh:
					read = "full refresh"
				case o.Since != "":
					read = "since " + o.Since
				case o.Incremental:
					read = "full (no watermark before this snapshot day)"
				case o.Collection:
					read = "full (collection)"
				}
				schema := "unchanged"
				switch {
				case o.NewTable:
					schema = fmt.Sprintf("new table, %d columns", o.Fields)
				case !o.Diff.Empty():
					schema = fmt.Sprintf("%d change(s) under %s", len(o.Diff.Changes), o.Contract)
				}
				part := "new " + o.Partition
				if o.Replaces {
					part = "replace " + o.Partition
				}
				rows := fmt.Sprint(o.Rows)
				if o.Rows < 0 {
					rows = "?"
				}
				if o.Skipped {
					fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t0\t-\tSKIPPED (not entitled)\n", cell(o.Object))
					continue
				}
				if o.NotContinued {
					fmt.Fprintf(tw, "%s\t-\tnone (not continued)\t-\t-\t0\t-\t-\n", cell(o.Object))
					continue
				}
				if o.Err != nil && errors.Is(o.Err, extract.ErrQuotaExhausted) {
					// The plan's own describe or count met the quota
					// spent: the sync would defer the stream, not fail it.
					unread.add(o.Err)
					fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t%d\t%s\tUNKNOWN (quota spent)\n", cell(o.Object), cell(o.Mode), cell(read), o.Requests, cell(schema))
					continue
				}
				if o.Err != nil {
					failed++
					fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t%d\t%s\tWOULD FAIL\n", cell(o.Object), cell(o.Mode), cell(read), o.Requests, cell(schema))
					continue
				}
				pages, requests := fmt.Sprint(o.Pages), fmt.Sprint(o.Requests)
				if o.Collection {
					pages, requests = "?", fmt.Sprintf(">=%d", o.Requests)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(o.Object), cell(o.Mode), cell(read), cell(rows), cell(pages), cell(requests), cell(schema), cell(part))
			}
			tw.Flush()
			fmt.Fprintf(w, "\nestimated requests: %d (without retries; collections count 1 each, they take one per page)\n", p.Requests)
			printQuotaPlan(w, client.Quota(), p)
			if p.Continues {
				fmt.Fprintln(w, "a quota deferred streams earlier today: the sync continues them and the streams that failed that day, and reads no other (--objects reads its streams whatever)")
			}
			for _, o := range p.Objects {
				if !o.Diff.Empty() {
					fmt.Fprintf(w, "schema changes of %s: %s\n", termEscape(o.Object, false), termEscape(o.Diff.String(), false))
				}
			}
			for _, o := range p.Objects {
				switch {
				case o.Skipped:
					fmt.Fprintf(w, "would skip %s: %s\n", termEscape(o.Object, false), termEscape(o.Err.Error(), false))
				case o.Err != nil && errors.Is(o.Err, extract.ErrQuotaExhausted):
					fmt.Fprintf(w, "could not plan %s: %s (a sync now would defer it)\n", termEscape(o.Object, false), termEscape(o.Err.Error(), false))
				case o.Err != nil:
					fmt.Fprintf(w, "would fail: %s\n", termEscape(o.Err.Error(), false))
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d stream(s) would fail; see above", failed)
			}
			if unread.n > 0 {
				return unread
			}
			return nil
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringSliceVar(&f.fullRefresh, "full-refresh", nil, "streams the sync would rebuild from a full read, comma-separated")
	return cmd
}

// printQuotaPlan says, when the service announced a request quota while
// planning, whether the sync fits a window, and which streams never do.
func printQuotaPlan(w io.Writer, q extract.Quota, p *pipeline.PlanResult) {
	if !q.Known || q.Limit <= 0 {
		return
	}
	fmt.Fprintf(w, "the service announces a quota of %d requests a window (%d left, resetting at %s)", q.Limit, q.Remaining, q.Reset.UTC().Format(time.RFC3339))
	switch {
	case !q.Holds(p.Requests):
		fmt.Fprintf(w, ": the sync needs at least %d, over about %d windows; streams the quota does not cover are deferred, and 'sepipe schedule' continues them after each reset\n",
			p.Requests, (p.Requests+q.Limit-1)/q.Limit)
	case p.Requests > q.Remaining:
		fmt.Fprintf(w, ": the sync needs at least %d, more than are left; streams the quota does not cover are deferred until the reset, and 'sepipe schedule' continues them then\n", p.Requests)
	default:
		fmt.Fprintf(w, ": the sync needs at least %d\n", p.Requests)
	}
	var big []string
	for _, o := range p.Objects {
		if !o.NotContinued && !o.Skipped && o.Err == nil && !q.Holds(o.Requests) {
			big = append(big, o.Object)
		}
	}
	if len(big) > 0 {
		fmt.Fprintf(w, "%s need more requests than a whole window allows: no run reads them within one; %s\n",
			termEscape(strings.Join(big, ", "), false), extract.ExceedsAdvice)
	}
}

// quotaCutShort is a plan or a check that could not look at everything:
// the service's request quota ran out while it asked (plan and check spend
// requests too). Partial, exit 3, as a sync the quota stops.
type quotaCutShort struct {
	cmd   string    // plan, check
	what  string    // "stream(s) could not be planned", "check(s) could not run"
	n     int       // how many
	reset time.Time // the latest reset the quota errors named (zero: none)
}

func (e quotaCutShort) Error() string {
	return fmt.Sprintf("%d %s: the service's request quota is spent (a %s spends requests too); see above", e.n, e.what, e.cmd)
}

// add counts err, a quota error, in e and keeps its reset.
func (e *quotaCutShort) add(err error) {
	e.n++
	if qe := (*extract.QuotaError)(nil); errors.As(err, &qe) && qe.Reset.After(e.reset) {
		e.reset = qe.Reset
	}
}
