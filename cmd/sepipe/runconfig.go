package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
)

// runFlags are the flags shared by the commands that talk to the service.
// Each overrides the config key it names when given.
type runFlags struct {
	config      string
	tenant      string
	baseURL     string
	out         string
	objects     []string
	concurrency int
	rate        float64
	pageSize    int
}

func (f *runFlags) add(cmd *cobra.Command, withOut bool) {
	fl := cmd.Flags()
	f.addTenant(fl)
	if withOut {
		fl.StringVar(&f.out, "out", defaultOut, "output folder for lake/ and warehouse.duckdb; overrides output.dir")
		fl.StringSliceVar(&f.objects, "objects", nil, "comma-separated object ids (default: all, or the config's include/exclude)")
	}
	if !withOut {
		// Commands that read no objects into a folder still refresh the
		// OAuth token, whose store is the folder's (.sepipe/token.json):
		// without --out they took ./sepipe-data's, and replayed a
		// refresh token the sync's folder had spent (found by review).
		fl.StringVar(&f.out, "out", defaultOut, "output folder whose token store (.sepipe/token.json) an OAuth refresh uses, as the sync's; overrides output.dir")
	}
	fl.IntVar(&f.concurrency, "concurrency", extract.DefaultConcurrency, "page requests in flight per object; overrides requests.concurrency")
	fl.Float64Var(&f.rate, "rate", extract.DefaultRateLimit, "ceiling on the requests per second of all workers (0: none; below it the rate adapts to the service's 429s); overrides requests.rate")
	fl.IntVar(&f.pageSize, "page-size", extract.DefaultPageSize, "rows per page requested; overrides requests.page_size")
}

// addTenant registers the flags that name the tenant: the config, one of
// its tenants, and the tenant's URL.
func (f *runFlags) addTenant(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "config file (default ./sepipe.yaml when it exists)")
	fl.StringVar(&f.tenant, "tenant", "", "the tenant to work on, of the config's tenants (its data goes to <output folder>/<tenant>)")
	fl.StringVar(&f.baseURL, "base-url", "", "tenant URL (https://<subdomain>.<domain>); overrides service.tenant_url")
}

// addTokenFlags registers what the auth commands take: the tenant (config,
// --tenant, --base-url) and the folder whose token store they use. The
// request flags of add (--objects, --concurrency, --rate, --page-size)
// mean nothing to them, and their help listed them.
func (f *runFlags) addTokenFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.addTenant(fl)
	fl.StringVar(&f.out, "out", defaultOut, "output folder whose token store (.sepipe/token.json) the sync uses; overrides output.dir")
}

// folderFlags are the flags of a command that works on an output folder
// only (listen, dashboard, publish, query): the folder is --out, else the
// config's output.dir (./sepipe.yaml when it exists), per --tenant.
type folderFlags struct{ config, tenant, out string }

func (f *folderFlags) add(cmd *cobra.Command, defOut, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config file (default ./sepipe.yaml when it exists)")
	fl.StringVar(&f.out, "out", defOut, what+"; overrides output.dir")
	fl.StringVar(&f.tenant, "tenant", "", "the tenant whose folder it is, of the config's tenants (<out>/<tenant>)")
}

// folder resolves the output folder alone, for the commands that need
// nothing else of the config (query, publish): --out without --tenant or
// --config is the folder, whatever ./sepipe.yaml holds (one whose ${VAR}s
// this shell has not set stopped a local query).
func (f *folderFlags) folder(cmd *cobra.Command) (string, error) {
	fl := cmd.Flags()
	if fl.Changed("out") && f.tenant == "" && !fl.Changed("config") {
		return f.out, nil
	}
	_, dir, err := f.load(cmd)
	return dir, err
}

// load reads the config and resolves the output folder (Config.folderOf).
func (f *folderFlags) load(cmd *cobra.Command) (*Config, string, error) {
	fl := cmd.Flags()
	c, err := LoadConfig(f.config, fl.Changed("config"))
	if err != nil {
		return nil, "", err
	}
	dir, err := c.folderOf(f.tenant, f.out, fl.Changed("out"))
	if err != nil {
		return nil, "", err
	}
	return c, dir, nil
}

// connect loads the config (see load), makes the logger (on stderr; the
// config's warnings go to it) and the client: the start of every command
// that talks to the service but does not run a sync.
func (f *runFlags) connect(cmd *cobra.Command, g *globals, needToken bool, extra ...extract.Option) (*Config, *slog.Logger, *extract.Client, error) {
	c, err := f.load(cmd, g)
	if err != nil {
		return nil, nil, nil, err
	}
	log, err := g.loggerTo(g.stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	c.warnTo(func(w string) { log.Warn(w) })
	client, err := newClient(c, log, needToken, extra...)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, log, client, nil
}

// load reads the config, applies the flags given on the command line, and
// validates the result.
func (f *runFlags) load(cmd *cobra.Command, g *globals) (*Config, error) {
	fl := cmd.Flags()
	c, err := LoadConfig(f.config, fl.Changed("config"))
	if err != nil {
		return nil, err
	}
	if err := c.UseTenant(f.tenant); err != nil {
		return nil, err
	}
	if fl.Changed("base-url") {
		c.Service.TenantURL = f.baseURL
	}
	if fl.Lookup("out") != nil && fl.Changed("out") {
		c.Output.Dir = c.TenantDir(f.out)
	}
	if fl.Changed("concurrency") {
		c.Requests.Concurrency = f.concurrency
	}
	if fl.Changed("rate") {
		c.Requests.Rate = f.rate
	}
	if fl.Changed("page-size") {
		c.Requests.PageSize = f.pageSize
	}
	// The flags' values were checked before any command ran (the root's
	// PersistentPreRunE); the config's are checked by Validate.
	if fl.Changed("log-level") {
		c.Log.Level = g.logLevel
	} else {
		g.logLevel = c.Log.Level
	}
	if fl.Changed("log-format") {
		c.Log.Format = g.logFormat
	} else {
		g.logFormat = c.Log.Format
	}
	if c.Service.TenantURL == "" && c.file == "" {
		return nil, usagef("--base-url is required (the tenant's URL, e.g. https://acme.example.com), or write service.tenant_url in ./sepipe.yaml")
	}
	if err := c.Validate(); err != nil {
		// A flag's value is named by its flag, not by a line of the file.
		var ce *ConfigError
		if errors.As(err, &ce) && c.file == "" {
			ce.File = ""
		}
		return nil, err
	}
	return c, nil
}

// loggerTo builds the logger the config and flags ask for, writing to w.
func (g *globals) loggerTo(w io.Writer) (*slog.Logger, error) {
	lvl, err := parseLevel(g.logLevel)
	if err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", g.logFormat)
}

func parseLevel(s string) (slog.Level, error) {
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(s))
	return lvl, err
}

// newClient builds the service client. needToken: the command reads
// reports, so an access token must be had: a static one, or the OAuth
// client with a refresh token (configured, or in the token store).
func newClient(c *Config, log *slog.Logger, needToken bool, extra ...extract.Option) (*extract.Client, error) {
	if err := c.checkCredentialLengths(); err != nil {
		return nil, err
	}
	opts := append(c.clientOptions(), extract.WithLogger(log))
	if c.oauthClient() {
		src, err := c.newOAuth(log)
		if err != nil {
			return nil, err
		}
		if needToken && !c.Service.OAuth.RefreshToken.Set() {
			if st, err := src.Status(); err != nil {
				return nil, err
			} else if st.Origin == extract.OriginNone {
				ref := c.secretRef("service.oauth.refresh_token") // ${VAR}: export VAR
				return nil, usagef("no refresh token: export %s, or run `sepipe auth login` to store one in %s",
					strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}"), c.tokenStore())
			}
		}
		opts = append(opts, extract.WithOAuth(src))
	} else if needToken && !c.Credentials.AccessToken.Set() {
		return nil, c.secretMissing("credentials.access_token", c.Credentials.AccessToken)
	}
	client, err := extract.New(c.Service.TenantURL, append(opts, extra...)...)
	if err != nil {
		if c.file != "" {
			return nil, c.errf("service", "%v", err)
		}
		return nil, usagef("--base-url: %v", err)
	}
	return client, nil
}

// selectRun resolves the streams of a run (pipeline.Select, the one
// owner of the rule, which the sync and the plan then take as it is):
// --objects, else the config's include or exclude, checked against the
// service's list, listed once; each of fullRefresh (--full-refresh) must
// be a stream of the run; and every filter checked against its object's
// describe (the primary key, cursor and lookback too when keys is set).
// Faults come back as the command line's (exit 2) or the config's, with
// their file and line.
func selectRun(ctx context.Context, c *Config, client *extract.Client, flagObjects, fullRefresh []string, keys bool) (*pipeline.Selection, error) {
	sel, err := pipeline.Select(ctx, client, pipeline.Ask{Objects: flagObjects, Include: c.Include, Exclude: c.Exclude,
		FullRefresh: fullRefresh, Streams: c.streams()})
	var se *pipeline.SelectError
	var oe *pipeline.ObjectError
	switch {
	case errors.As(err, &se):
		return nil, c.selectErr(se)
	case errors.As(err, &oe) && oe.Step == "config":
		return nil, c.streamErr(oe.Object, oe.Err)
	case err != nil:
		return nil, err
	}
	reporting := sel.ReportingDenied == nil
	check := sel.Streams()
	// Checked against the live describe before any data moves, by the
	// sync's own rules (pipeline.CheckStream), so a fault is the config's
	// line: the filters always (a filter the service would refuse), the
	// primary key, cursor and lookback when keys is set (check, plan). A
	// sync leaves those to each stream: the service may drop or retype a
	// field a config names, and that fails the stream alone while the
	// others commit; refused here, it stopped every stream of every run.
	for _, id := range check {
		s, ok := c.Streams[id]
		if !ok || pipeline.IsCollection(id) || !reporting {
			continue
		}
		ps := s.pipeline()
		if !keys {
			ps = pipeline.StreamConfig{Filters: ps.Filters}
		}
		if len(ps.PrimaryKey) == 0 && ps.Cursor == "" && len(ps.Filters) == 0 {
			continue
		}
		fields, err := client.Describe(ctx, id)
		if err != nil {
			// Not the config's fault (an outage, a quota, an object gone):
			// the sync meets it again on this stream alone, which fails,
			// is skipped or deferred while the others go on. It failed the
			// whole run here.
			continue
		}
		if err := pipeline.CheckStream(id, ps, fields); err != nil {
			return nil, c.streamErr(id, err)
		}
	}
	return sel, nil
}

// selectErr words a request pipeline.Select refused as the command line
// or the config wrote it: --objects and --full-refresh are usage errors,
// include, exclude and streams the config's lines.
func (c *Config) selectErr(se *pipeline.SelectError) error {
	switch se.Arg {
	case "objects":
		return usageError{reworded{"--objects: " + se.Reason(), se}}
	case "include", "exclude":
		if se.Index < 0 {
			return c.errf(se.Arg, "%s", se.Reason())
		}
		return c.errf(fmt.Sprintf("%s[%d]", se.Arg, se.Index), "%s", se.Reason())
	case "streams":
		return c.errf("streams."+se.Stream, "%s", se.Reason())
	}
	switch { // --full-refresh
	case errors.Is(se, pipeline.ErrNotInRun) && se.Within == "include":
		return c.errf("include", "--full-refresh %s: %v (include: %s): pass it in --objects too, or leave it out of --full-refresh", se.Stream, pipeline.ErrNotInRun, strings.Join(se.Run, ", "))
	case errors.Is(se, pipeline.ErrNotInRun):
		return usageError{reworded{fmt.Sprintf("--full-refresh %s: %v (--objects %s): add it to --objects, or leave it out of --full-refresh", se.Stream, pipeline.ErrNotInRun, strings.Join(se.Run, ",")), se}}
	case errors.Is(se, pipeline.ErrExcluded):
		return c.errf("exclude", "--full-refresh %s: %v", se.Stream, pipeline.ErrExcluded)
	}
	return usageError{reworded{"--full-refresh: " + se.Reason(), se}}
}

// reworded is err said as msg: errors.Is and errors.As still see err
// (the hint of an unknown object).
type reworded struct {
	msg string
	err error
}

func (r reworded) Error() string { return r.msg }
func (r reworded) Unwrap() error { return r.err }
