package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/load"
)

func init() { register(newStatusCmd) }

func newStatusCmd(g *globals) *cobra.Command {
	var (
		f      folderFlags
		maxAge string
		format string
	)
	cmd := &cobra.Command{
		Use:   "status [--out DIR] [--max-age DURATION] [--format table|json]",
		Short: "Say whether the warehouse is fresh: each stream's last commit, the last publish and webhook event",
		Long: `Status reads the published DIR/warehouse.duckdb (never the service, never the
working database: it runs beside a sync or a listener) and prints, for each
stream, the snapshot day, run and rows of the last run that committed it,
when that run finished and how long ago; then when the warehouse was last
published and when its newest webhook event was received.

A stream whose last commit is older than --max-age is stale. Without
--max-age it is the config's schedule's longest gap between two runs, with
a twelfth of it (at least 30 minutes) to spare ("0 2 * * *": 26h), or 26h
without a schedule.

Exit codes, for cron monitors and scripts: 0 every stream is fresh, 1
something is stale (named on stderr) or no run has published a warehouse
yet, 2 bad usage. --format json prints one JSON object (the same facts,
times in RFC 3339, ages in seconds) whatever the exit code.`,
		Example: `  sepipe status --out ./sepipe-data
  sepipe status --config /etc/sepipe/acme.yaml --max-age 2d --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return usagef("--format %q: want table or json", format)
			}
			c, out, err := f.load(cmd)
			if err != nil {
				return err
			}
			limit, from := defaultMaxAge, "default"
			switch {
			case cmd.Flags().Changed("max-age"):
				d, err := ParseDuration(maxAge)
				if err != nil || d <= 0 {
					return usagef("--max-age: want a positive duration such as 26h, 2d or 90m, got %q", maxAge)
				}
				limit, from = d, "--max-age"
			case c.Schedule.Cron != "":
				if limit, err = scheduleMaxAge(c); err != nil {
					return err
				}
				from = "schedule " + c.Schedule.Cron
			}
			st, err := readStatus(cmd.Context(), out, limit, from, time.Now())
			if err != nil {
				return err
			}
			if format == "json" {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(g.stdout, string(b))
			} else {
				printStatus(g.stdout, st)
			}
			return st.err()
		},
	}
	f.add(cmd, defaultOut, "output folder holding warehouse.duckdb")
	cmd.Flags().StringVar(&maxAge, "max-age", "", "a stream whose last commit is older is stale (e.g. 26h, 2d; default from the schedule, or 26h)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// status is what sepipe status reports (its JSON form).
type status struct {
	Warehouse     string         `json:"warehouse"`
	PublishedAt   *time.Time     `json:"published_at"`
	LastEventAt   *time.Time     `json:"last_event_at"`
	MaxAgeSeconds float64        `json:"max_age_seconds"`
	MaxAgeFrom    string         `json:"max_age_from"`
	Fresh         bool           `json:"fresh"`
	Stale         []string       `json:"stale"`
	Problem       string         `json:"problem,omitempty"`
	Streams       []streamStatus `json:"streams"`

	maxAge time.Duration
}

type streamStatus struct {
	Stream       string    `json:"stream"`
	SnapshotDate string    `json:"snapshot_date"`
	RunID        string    `json:"run_id"`
	Rows         int64     `json:"rows"`
	CommittedAt  time.Time `json:"committed_at"`
	AgeSeconds   float64   `json:"age_seconds"`
	Stale        bool      `json:"stale"`
}

// readStatus reads the published warehouse of out as of now. A missing
// warehouse, or one no run has committed a stream to, is a status whose
// problem says so (exit 1), not an error.
func readStatus(ctx context.Context, out string, maxAge time.Duration, from string, now time.Time) (*status, error) {
	lake := load.Lake{Root: out}
	st := &status{Warehouse: lake.WarehousePath(), MaxAgeSeconds: maxAge.Seconds(), MaxAgeFrom: from, Stale: []string{}, Streams: []streamStatus{}, maxAge: maxAge}
	wh, err := load.OpenReadOnly(ctx, st.Warehouse)
	if errors.Is(err, load.ErrNoWarehouse) {
		st.Problem = "no warehouse at " + st.Warehouse + ": no run has published one yet"
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	if t := lake.PublishedAt(); !t.IsZero() {
		t = t.UTC()
		st.PublishedAt = &t
	}
	fresh, err := wh.Freshness(ctx)
	if err != nil {
		return nil, err
	}
	if t, ok, err := wh.LastEvent(ctx); err != nil {
		return nil, err
	} else if ok {
		st.LastEventAt = &t
	}
	for _, f := range fresh {
		age := now.Sub(f.CommittedAt)
		s := streamStatus{Stream: f.Stream, SnapshotDate: f.SnapshotDate, RunID: f.RunID, Rows: f.Rows,
			CommittedAt: f.CommittedAt, AgeSeconds: age.Seconds(), Stale: age > maxAge}
		if s.Stale {
			st.Stale = append(st.Stale, f.Stream)
		}
		st.Streams = append(st.Streams, s)
	}
	switch {
	case len(st.Streams) == 0:
		st.Problem = "no run has committed a stream to " + st.Warehouse + " yet"
	case len(st.Stale) > 0:
		st.Problem = fmt.Sprintf("%d of %d streams stale (last committed more than %s ago, %s): %s",
			len(st.Stale), len(st.Streams), roundAge(maxAge), from, strings.Join(st.Stale, ", "))
	}
	st.Fresh = st.Problem == ""
	return st, nil
}

// err is the status as the command's error: nil when fresh.
func (s *status) err() error {
	if s.Fresh {
		return nil
	}
	return errors.New(s.Problem)
}

func printStatus(w io.Writer, s *status) {
	if s.PublishedAt == nil {
		return // no warehouse: the error says so
	}
	tw := tabwriter.NewWriter(termSafe(w), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tSNAPSHOT\tRUN\tROWS\tCOMMITTED\tAGE\tSTATE")
	for _, st := range s.Streams {
		state := "fresh"
		if st.Stale {
			state = "STALE"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(st.Stream), st.SnapshotDate, cell(st.RunID), st.Rows,
			st.CommittedAt.Format(time.RFC3339), roundAge(time.Duration(st.AgeSeconds*float64(time.Second))), state)
	}
	tw.Flush()
	at := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Format(time.RFC3339) + " (" + roundAge(time.Since(*t)) + " ago)"
	}
	fmt.Fprintf(w, "\npublished      %s  %s\n", termEscape(s.Warehouse, false), at(s.PublishedAt))
	fmt.Fprintf(w, "webhook event  %s\n", at(s.LastEventAt))
	fmt.Fprintf(w, "max age        %s (%s)\n", roundAge(s.maxAge), termEscape(s.MaxAgeFrom, false))
}

// roundAge rounds d for people: seconds under an hour, minutes above.
func roundAge(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
