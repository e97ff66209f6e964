package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/pipeline"
)

func init() { register(newCheckCmd) }

// checkResult is one credential tried against one interface.
type checkResult struct {
	iface, cred, status, detail string
	err                         error // why it failed, or a statusQuota's quota error
}

// statusQuota is a check not tried: the request quota is spent.
const statusQuota = "unknown (quota spent)"

// errCheckFailed is returned when any check failed.
var errCheckFailed = errors.New("some credentials failed")

func newCheckCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Try every configured credential against each interface",
		Long: `Check tries each credential of the config against the interface it is for,
with one small read each, and reports ok, failed (with the reason), not
entitled (the credential works but the tenant's licence, plan or role does not
cover the interface: 403, or 404 for the whole interface; a sync skips its
streams) or skipped (not configured):

  reporting  access token      GET /objects
  v3         access token      one page of assets
  v4         access token      themes
  webhooks   API token         list subscriptions
  legacy     login_dir [+ username/password]   create a session
  iceberg    the catalog of output.lake.iceberg   list the namespace's tables;
             with a SQL catalog, write and remove a probe object in the
             warehouse (bucket, endpoint, region and S3 credentials)
  config     include, exclude, streams   the objects they name exist, and each
             stream's primary_key, cursor, lookback and filters fit its
             object's fields, as sync checks them

The access token (or the OAuth client that refreshes it) is required; the API
token and the legacy login are checked when configured. Nothing is written
except, with OAuth, the rotated tokens in the token store, an Iceberg SQL
catalog on SQLite, which opening creates when its file does not exist yet, and
the warehouse's probe object, removed at once. Exit code 1 if any
check failed (not entitled is not a failure), so it fits a deployment pipeline
or a monitoring probe; exit code 2 when the config row failed (the
configuration does not fit the service's objects and fields: the message
names the file and line); exit code 3 when none failed but some could not be
tried because the service's request quota is spent (check spends requests
too): they say unknown (quota spent).`,
		Example: `  sepipe check
  SEPIPE_ACCESS_TOKEN=... sepipe check --base-url https://acme.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, client, err := f.connect(cmd, g, false, extract.WithRetry(2, 5*time.Second))
			if err != nil {
				return err
			}
			results := runChecks(cmd.Context(), c, client)
			tw := tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "INTERFACE\tCREDENTIAL\tRESULT\tDETAIL")
			failed, unread := 0, quotaCutShort{cmd: "check", what: "check(s) could not run"}
			var badConfig error // the config row's: bad configuration, exit 2
			for _, r := range results {
				switch r.status {
				case "failed":
					failed++
					if ue := (usageError{}); badConfig == nil && errors.As(r.err, &ue) {
						badConfig = r.err
					}
				case statusQuota:
					unread.add(r.err)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(r.iface), cell(r.cred), cell(r.status), cell(r.detail))
			}
			tw.Flush()
			if badConfig != nil {
				return badConfig
			}
			if failed > 0 {
				return fmt.Errorf("%w: %d of %d checks", errCheckFailed, failed, len(results))
			}
			if unread.n > 0 {
				return unread
			}
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

func runChecks(ctx context.Context, c *Config, client *extract.Client) []checkResult {
	var out []checkResult
	try := func(iface, cred string, fn func() (string, error)) {
		detail, err := fn()
		r := checkResult{iface: iface, cred: cred, status: "ok", detail: detail}
		switch {
		case err == nil:
		case iface != extract.IfaceLegacy && (errors.Is(err, extract.ErrForbidden) || errors.Is(err, extract.ErrNotFound)):
			// The credential works; the tenant's licence, plan or role
			// does not cover this interface. A sync skips its streams.
			r.status, r.detail = "not entitled", err.Error()+"; sync skips its streams"
		case errors.Is(err, extract.ErrQuotaExhausted):
			// Not tried: the service's request quota (which check
			// spends too) is used up; nothing is known of the credential.
			r.status, r.detail, r.err = statusQuota, err.Error(), err
		default:
			r.status, r.detail, r.err = "failed", err.Error(), err
		}
		out = append(out, r)
	}
	access := "access token " + c.Credentials.AccessToken.String()
	if c.oauthClient() {
		access = "OAuth client " + c.Service.OAuth.ClientID.String()
	}
	if !c.Credentials.AccessToken.Set() && !c.oauthClient() {
		for _, iface := range []string{extract.IfaceReporting, extract.IfaceV3, extract.IfaceV4} {
			out = append(out, checkResult{iface, access, "failed", c.Credentials.AccessToken.String() + " is not set", nil})
		}
	} else {
		try(extract.IfaceReporting, access, func() (string, error) {
			objs, err := client.Objects(ctx)
			return fmt.Sprintf("%d report objects", len(objs)), err
		})
		try(extract.IfaceV3, access, func() (string, error) {
			total, err := pipeline.CountItems(ctx, client, extract.V3List("assets"))
			return fmt.Sprintf("%d assets", total), err
		})
		try(extract.IfaceV4, access, func() (string, error) {
			ts, err := client.Themes(ctx, extract.ThemeQuery{})
			return fmt.Sprintf("%d themes", len(ts)), err
		})
		if out[0].status != "failed" {
			// The streams the config names, checked as the sync checks
			// them (selectRun): check passed a config the sync then
			// refused, an include naming no object (found by review).
			try("config", "include, exclude, streams", func() (string, error) {
				sel, err := selectRun(ctx, c, client, nil, nil, true)
				if err != nil {
					return "", err
				}
				n := len(sel.Streams())
				if sel.ReportingDenied != nil {
					n += len(sel.Asked) // named, and skipped
				}
				return fmt.Sprintf("%d streams to sync", n), nil
			})
		}
	}
	api := "API token " + c.Credentials.APIToken.String()
	if !c.Credentials.APIToken.Set() {
		out = append(out, checkResult{extract.IfaceWebhooks, api, "skipped", c.Credentials.APIToken.String() + " is not set", nil})
	} else {
		try(extract.IfaceWebhooks, api, func() (string, error) {
			ss, err := client.Subscriptions(ctx)
			return fmt.Sprintf("%d subscriptions", len(ss)), err
		})
	}
	l := c.Legacy
	switch {
	case l.LoginDir == "":
		out = append(out, checkResult{extract.IfaceLegacy, "login", "skipped", "legacy.login_dir is not configured", nil})
	case l.Username == "":
		try(extract.IfaceLegacy, "public session (login_dir "+l.LoginDir+")", func() (string, error) {
			_, err := client.PublicSession(ctx, l.LoginDir)
			return "public session created", err
		})
	default:
		cred := fmt.Sprintf("password session (login_dir %s, username %s, password %s)", l.LoginDir, l.Username, l.Password)
		switch {
		case !l.Password.Set():
			out = append(out, checkResult{extract.IfaceLegacy, cred, "failed", l.Password.String() + " is not set", nil})
		default:
			try(extract.IfaceLegacy, cred, func() (string, error) {
				s, err := client.PasswordSession(ctx, l.LoginDir, l.Username, l.Password.Value.Reveal())
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("session for user %d (admin %v)", s.UID, s.IsAdmin), nil
			})
		}
	}
	if ic := c.Output.Lake.Iceberg; ic != nil {
		r := checkResult{iface: "iceberg", cred: ic.Catalog.Type + " catalog " + ic.Catalog.Name, status: "ok"}
		if n, err := checkCatalog(ctx, *ic); err != nil {
			r.status, r.detail = "failed", err.Error()
		} else {
			r.detail = fmt.Sprintf("%d tables in namespace %s", n, ic.Namespace)
		}
		out = append(out, r)
	}
	return out
}

// checkCatalog connects to the Iceberg catalog (a SQL catalog gets its
// tables if its database has none), writes and removes a probe object in
// a SQL catalog's warehouse (lakehouse.CheckWarehouse), and counts the
// tables of the namespace.
func checkCatalog(ctx context.Context, ic lakehouse.Config) (int, error) {
	lh, err := lakehouse.Open(ctx, ic)
	if err != nil {
		return 0, err
	}
	defer lh.Close()
	if err := lh.CheckWarehouse(ctx); err != nil {
		return 0, err
	}
	tables, err := lh.Tables(ctx, "")
	return len(tables), err
}
