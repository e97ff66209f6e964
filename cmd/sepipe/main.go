package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// logger is the logger the flags ask for, on stderr (loggerTo).
func (g *globals) logger() (*slog.Logger, error) { return g.loggerTo(g.stderr) }

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
		// Every command: the global flags and the required flags are
		// usage errors naming the flag, whether or not the command goes
		// on to make a logger (version and query never did).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := g.loggerTo(io.Discard); err != nil {
				return err
			}
			if missing := missingFlags(cmd); len(missing) > 0 {
				return usagef("%s: %s is required; see '%s --help'", cmd.CommandPath(), strings.Join(missing, " and "), cmd.CommandPath())
			}
			return nil
		},
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
		cmd := mk(g)
		usageArgs(cmd)
		root.AddCommand(cmd)
	}
	return root
}

// usageArgs makes the argument check of cmd and its subcommands a usage
// error (exit 2) naming the command and what it takes: cobra's own says
// "accepts 1 arg(s), received 0" and exited 1.
func usageArgs(cmd *cobra.Command) {
	if cmd.HasSubCommands() && !cmd.Runnable() { // never the root: it is not passed here
		// A command of commands (lake, auth) prints its help; given an
		// unknown command it printed the help too and exited 0.
		cmd.Args = cobra.NoArgs
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return argsError(c, args, err)
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// argsError says what command c takes instead of args, by the operands
// its Use line names ("query SQL", "get ID"); err is cobra's message.
func argsError(c *cobra.Command, args []string, err error) error {
	path := c.CommandPath()
	ops := operands(c.Use)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	got := strings.Join(quoted, " ")
	switch {
	case len(ops) == 0 && c.HasSubCommands() && len(args) > 0:
		return usagef("%s: unknown command %s; run '%s --help' for its commands", path, quoted[0], path)
	case len(ops) == 0 && len(args) > 0:
		return usagef("%s takes no arguments, got %s (flags start with --)", path, got)
	case len(ops) > len(args):
		return usagef("%s: missing %s (usage: %s %s)", path, strings.Join(ops[len(args):], " "), path, strings.Join(ops, " "))
	case len(ops) > 0 && len(ops) < len(args):
		return usagef("%s takes %s, got %d arguments: %s (quote an argument that holds spaces)", path, strings.Join(ops, " "), len(args), got)
	}
	return usagef("%s: %v", path, err)
}

// operands are the positional arguments a Use line names: its upper-case
// words that are neither a flag, a flag's value nor optional.
func operands(use string) []string {
	words := strings.Fields(use)
	var out []string
	depth := 0 // inside [optional ...]
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt := depth > 0 || strings.HasPrefix(w, "[")
		depth += strings.Count(w, "[") - strings.Count(w, "]")
		if opt || strings.HasPrefix(w, "-") || strings.HasPrefix(words[i-1], "-") || w != strings.ToUpper(w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// missingFlags names the required flags of cmd not given, as --flag.
func missingFlags(cmd *cobra.Command) []string {
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if req := f.Annotations[cobra.BashCompOneRequiredFlag]; len(req) > 0 && req[0] == "true" && !f.Changed {
			out = append(out, "--"+f.Name)
		}
	})
	return out
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
	code, h := outcome(err)
	if h != "" {
		fmt.Fprintln(stderr, "hint: "+termEscape(h, false))
	}
	return code
}

// outcome is the exit code of a command that ended with err (not nil),
// and the hint printed after its message ("" for none). A run's status
// in the metrics is read from it too (runStatus).
func outcome(err error) (code int, h string) {
	var ue usageError
	var re *pipeline.RunError
	var qb quotaBeforeRun
	var qc quotaCutShort
	switch {
	case errors.As(err, &ue):
		return exitUsage, hint(err)
	case errors.As(err, &re) && partial(re):
		if committedNotFinished(err) {
			return exitPartial, hint(err) // committed, not yet published: say what finishes it
		}
		return exitPartial, quotaHint(err)
	case errors.As(err, &qb):
		return exitPartial, "the service's request quota resets at " + qb.Reset.UTC().Format(time.RFC3339) + ": a sync after it reads the streams"
	case errors.As(err, &qc):
		if !qc.reset.IsZero() {
			return exitPartial, "the service's request quota resets at " + qc.reset.UTC().Format(time.RFC3339) + ": run it again after that"
		}
		return exitPartial, ""
	case committedNotFinished(err):
		// Committed, not yet visible to readers (or the Iceberg lake
		// catches up on the next run): as a partial run.
		return exitPartial, hint(err)
	}
	return exitFailed, hint(err)
}

// partial reports whether a run that did not finish is partial (exit 3)
// rather than failed, as it is recorded (pipeline.RunError.Status).
func partial(re *pipeline.RunError) bool { return re.Status() == "partial" }

// committedNotFinished reports whether err is a run that committed but
// whose publishing or Iceberg commit is left to the next run (or sepipe
// publish): exit 3, and no retry is needed for it.
func committedNotFinished(err error) bool {
	return errors.Is(err, load.ErrPublishBlocked) || errors.Is(err, pipeline.ErrNotPublished) || errors.Is(err, pipeline.ErrLakePending)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
