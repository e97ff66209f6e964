package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitPartial = 3
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError marks errors that are the user's input, not the run.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

type globals struct {
	logLevel  string
	logFormat string
	stdout    io.Writer
	stderr    io.Writer
}

func (g *globals) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", g.logFormat)
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "sepipe",
		Short: "Sync sales-enablement learning reports into Parquet and DuckDB",
		Long: `sepipe extracts every Coach report object of a sales-enablement tenant,
derives each object's schema from the service's /describe, and writes a
hive-partitioned Parquet lake and a DuckDB warehouse you own.

Start with 'sepipe demo': it runs against a built-in fake tenant.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q", args[0])
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += fmt.Sprintf(" (did you mean %q?)", s[0])
				}
				return usagef("%s; run 'sepipe --help' for the commands", msg)
			}
			return cmd.Help()
		},
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	for _, mk := range commands {
		root.AddCommand(mk(g))
	}
	return root
}

// commands holds the constructors of the subcommands; each command's file
// adds its own in an init function, so commands do not collide in main.go.
var commands []func(*globals) *cobra.Command

func register(mk func(*globals) *cobra.Command) { commands = append(commands, mk) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// One line: an error may quote the service, whose newlines would
	// print lines of their own (a forged "sepipe:" or "hint:").
	fmt.Fprintln(stderr, "sepipe: "+termEscape(err.Error(), false))
	var ue usageError
	var re *pipeline.RunError
	var qe *extract.QuotaError
	switch {
	case errors.As(err, &ue):
		if h := hint(err); h != "" {
			fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
		}
		return exitUsage
	case errors.As(err, &re) && re.Partial:
		if h := quotaHint(err); h != "" {
			fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
		}
		return exitPartial
	case !errors.As(err, &re) && errors.As(err, &qe):
		// Spent before the run could list what to read (a plan or another
		// client used the window): nothing was read and nothing is lost,
		// as when every stream is deferred.
		fmt.Fprintln(stderr, "hint: the service's request quota resets at "+qe.Reset.UTC().Format(time.RFC3339)+": a sync after it reads the streams")
		return exitPartial
	case errors.Is(err, pipeline.ErrLakePending):
		// Committed; the Iceberg lake catches up on the next run.
		if h := hint(err); h != "" {
			fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
		}
		return exitPartial
	case errors.Is(err, load.ErrPublishBlocked), errors.Is(err, pipeline.ErrNotPublished):
		// Committed, not yet visible to readers: as a partial run.
		if h := hint(err); h != "" {
			fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
		}
		return exitPartial
	}
	if h := hint(err); h != "" {
		fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
	}
	return exitFailed
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
