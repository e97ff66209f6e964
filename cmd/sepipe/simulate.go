package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract/servicetest"
)

type simulateFlags struct {
	addr, token, limited, apiToken, password, loginDir string
	users                                              int
	seed                                               int64
	ssoOnly                                            bool
	advanceEvery, advanceBy                            time.Duration

	failRate, dropRate, truncateRate float64
	rateLimit                        int
	noRetryAfter                     bool
	latency, tokenTTL                time.Duration
	pageDrift, schemaDrift           bool

	clientID, clientSecret, refreshToken string
	quota                                int
	quotaWindow                          time.Duration
	noV4                                 bool
	hostile                              bool
	wide                                 bool
	hostileWire                          string
	shapeVariants                        bool
}

func (f *simulateFlags) options() ([]servicetest.Option, error) {
	for name, v := range map[string]float64{"--fail-rate": f.failRate, "--drop-rate": f.dropRate, "--truncate-rate": f.truncateRate} {
		if v < 0 || v > 1 {
			return nil, usagef("%s %v: want a fraction between 0 and 1", name, v)
		}
	}
	if f.users < 0 {
		return nil, usagef("--users must not be negative, got %d", f.users)
	}
	if f.rateLimit < 0 {
		return nil, usagef("--rate-limit must not be negative, got %d", f.rateLimit)
	}
	if f.quota < 0 {
		return nil, usagef("--quota must not be negative, got %d", f.quota)
	}
	if f.quota > 0 && f.quotaWindow <= 0 {
		return nil, usagef("--quota needs a positive --quota-window, got %s", f.quotaWindow)
	}
	if (f.advanceEvery > 0) != (f.advanceBy > 0) {
		return nil, usagef("--advance-every and --advance-by go together")
	}
	opts := []servicetest.Option{
		servicetest.WithSeed(f.seed), servicetest.WithUsers(f.users),
		servicetest.WithAccessToken(f.token), servicetest.WithLimitedToken(f.limited),
		servicetest.WithAPIToken(f.apiToken), servicetest.WithPassword(f.password),
		servicetest.WithLoginDir(f.loginDir), servicetest.WithSSOOnly(f.ssoOnly),
		servicetest.WithOAuthClient(f.clientID, f.clientSecret), servicetest.WithRefreshToken(f.refreshToken),
	}
	if f.quota > 0 {
		opts = append(opts, servicetest.WithQuota(f.quota, f.quotaWindow))
	}
	if f.noV4 {
		opts = append(opts, servicetest.WithoutV4())
	}
	if f.wide {
		opts = append(opts, servicetest.WithWideObject())
	}
	if f.hostile {
		opts = append(opts, servicetest.WithHostile())
	}
	if f.shapeVariants {
		opts = append(opts, servicetest.WithShapeVariants())
	}
	if f.hostileWire != "" {
		cases, err := servicetest.ParseHostileCases(f.hostileWire)
		if err != nil {
			return nil, usagef("--hostile-wire: %v", err)
		}
		opts = append(opts, servicetest.WithHostileWire(cases...))
	}
	if f.advanceEvery > 0 {
		opts = append(opts, servicetest.WithAutoAdvance(f.advanceEvery, f.advanceBy))
	}
	if f.failRate > 0 {
		opts = append(opts, servicetest.WithFailRate(f.failRate))
	}
	if f.dropRate > 0 {
		opts = append(opts, servicetest.WithDropRate(f.dropRate))
	}
	if f.truncateRate > 0 {
		opts = append(opts, servicetest.WithTruncateRate(f.truncateRate))
	}
	if f.rateLimit > 0 {
		opts = append(opts, servicetest.WithRateLimit(f.rateLimit))
	}
	if f.noRetryAfter {
		opts = append(opts, servicetest.WithNoRetryAfter())
	}
	if f.latency > 0 {
		opts = append(opts, servicetest.WithLatency(f.latency))
	}
	if f.tokenTTL > 0 {
		opts = append(opts, servicetest.WithTokenTTL(f.tokenTTL))
	}
	if f.pageDrift {
		opts = append(opts, servicetest.WithPageDrift(true))
	}
	if f.schemaDrift {
		opts = append(opts, servicetest.WithSchemaDrift(true))
	}
	return opts, nil
}

func init() { register(newSimulateCmd) }

func newSimulateCmd(g *globals) *cobra.Command {
	f := &simulateFlags{}
	cmd := &cobra.Command{
		Use:   "simulate [--addr HOST:PORT] [fault flags]",
		Short: "Serve the fake tenant in the foreground, for curl, BI tools or sepipe sync",
		Long: `Simulate serves sepipe's fake of the whole service (legacy sessions, Coach
reporting, v3 assets, v4 shares and themes, webhooks) on --addr until
interrupted (Ctrl-C or SIGTERM). It prints the base URL, the logins and the
tokens to use, e.g.:

  export SEPIPE_ACCESS_TOKEN=demo-access-token
  sepipe sync --base-url http://127.0.0.1:8080 --out ./data

The data is synthetic and deterministic: the same --seed and --users always
give the same tenant. The tenant lives: POST /_admin/advance?days=N (with
the API token) moves its clock, users progress and complete courses, and
subscribed webhooks receive signed events.

Fault flags make it misbehave the way real services do, to test what you
build on it: --fail-rate, --drop-rate, --truncate-rate, --rate-limit,
--no-retry-after, --latency, --page-drift, --schema-drift, --token-ttl,
--quota/--quota-window (a window quota announced in X-RateLimit-* and
RateLimit-* headers), --no-v4 (a plan without the sharing interface).

OAuth: POST <base>/api/v3/oauth2/token exchanges the refresh token
(grant_type=refresh_token with the client id and secret) for an access token
that lives --token-ttl (default 1h) and a new refresh token; a used refresh
token is refused, and refresh tokens expire after 14 days of the tenant's
clock.`,
		Example: `  sepipe simulate --addr 127.0.0.1:8080 --users 1000
  sepipe simulate --fail-rate 0.3 --drop-rate 0.05 --rate-limit 20 --latency 20ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			ln, err := listenOn(f.addr)
			if err != nil {
				return err
			}
			svc := servicetest.New(opts...)
			defer svc.Close()
			hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
			base := "http://" + ln.Addr().String()
			w := g.stdout
			fmt.Fprintf(w, "sepipe fake service listening\n")
			fmt.Fprintf(w, "  base URL:        %s   (sync: --base-url %s)\n", base, base)
			fmt.Fprintf(w, "  reporting API:   %s%s\n", base, servicetest.BasePath)
			fmt.Fprintf(w, "  v3 assets:       %s%s/assets.json\n", base, servicetest.AssetsPath)
			fmt.Fprintf(w, "  v4 API:          %s%s\n", base, servicetest.V4Path)
			fmt.Fprintf(w, "  webhooks API:    %s%s\n", base, servicetest.WebhooksPath)
			fmt.Fprintf(w, "  legacy API:      %s%s\n", base, servicetest.LegacyPath)
			fmt.Fprintf(w, "  access token:    %s   (reporting, v3, v4)\n", svc.AccessToken())
			fmt.Fprintf(w, "  limited token:   %s   (valid, no reporting role: 403)\n", svc.LimitedToken())
			fmt.Fprintf(w, "  API token:       %s   (webhooks, /_admin)\n", svc.APIToken())
			fmt.Fprintf(w, "  OAuth client:    %s / %s   refresh token %s   (token URL %s%s)\n",
				svc.ClientID(), svc.ClientSecret(), svc.RefreshToken(), base, servicetest.OAuthTokenPath)
			fmt.Fprintf(w, "  login_dir:       %s   users %s (administrator) and %s, password %q\n",
				svc.LoginDir(), servicetest.AdminUsername, servicetest.UserUsername, svc.Password())
			fmt.Fprintf(w, "  clock:           %s   (advance: curl -X POST -H 'Authorization: Bearer %s' '%s%s/advance?days=1')\n",
				svc.Now().Format(time.RFC3339), svc.APIToken(), base, servicetest.AdminPath)
			fmt.Fprintf(w, "  tenant:          %d users, seed %d\n", f.users, f.seed)
			if err := serve(cmd.Context(), hs, ln); err != nil {
				return err
			}
			fmt.Fprintln(w, "stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address HOST:PORT (port 0 picks a free one)")
	fl.Int64Var(&f.seed, "seed", 1, "seed of the tenant's data")
	fl.IntVar(&f.users, "users", 500, "users in the tenant (about 12 userCourseProgress rows each)")
	fl.StringVar(&f.token, "access-token", servicetest.DefaultAccessToken, "OAuth access token the fake accepts (reporting, v3, v4)")
	fl.StringVar(&f.limited, "limited-token", servicetest.DefaultLimitedToken, "a valid token without the reporting role (answered 403)")
	fl.StringVar(&f.apiToken, "api-token", servicetest.DefaultAPIToken, "developer API token for webhooks and /_admin")
	fl.StringVar(&f.password, "password", servicetest.DefaultPassword, "password of the legacy users admin and user1")
	fl.StringVar(&f.loginDir, "login-dir", servicetest.DefaultLoginDir, "company site name (legacy login_dir)")
	fl.BoolVar(&f.ssoOnly, "sso-only", false, "the company uses SSO exclusively: only administrators get password sessions")
	fl.DurationVar(&f.advanceEvery, "advance-every", 0, "advance the tenant clock every D of real time (with --advance-by)")
	fl.DurationVar(&f.advanceBy, "advance-by", 0, "how far each automatic advance moves the tenant clock (e.g. 24h)")
	fl.Float64Var(&f.failRate, "fail-rate", 0, "fraction of data requests answered 500/502/503")
	fl.Float64Var(&f.dropRate, "drop-rate", 0, "fraction of responses whose connection is dropped mid-body")
	fl.Float64Var(&f.truncateRate, "truncate-rate", 0, "fraction of 200 answers whose JSON is cut short")
	fl.IntVar(&f.rateLimit, "rate-limit", 0, "requests per second before answering 429 (0: no limit)")
	fl.BoolVar(&f.noRetryAfter, "no-retry-after", false, "answer 429 without a Retry-After header")
	fl.DurationVar(&f.latency, "latency", 0, "latency added to each data request")
	fl.BoolVar(&f.pageDrift, "page-drift", false, "rows are inserted and removed while a client pages")
	fl.BoolVar(&f.schemaDrift, "schema-drift", false, "describe gains a field and a field changes type")
	fl.DurationVar(&f.tokenTTL, "token-ttl", 0, "the access token expires this long after start (0: never); also the life of OAuth-issued access tokens (0: 1h)")
	fl.StringVar(&f.clientID, "client-id", servicetest.DefaultClientID, "OAuth client id the token endpoint accepts")
	fl.StringVar(&f.clientSecret, "client-secret", servicetest.DefaultClientSecret, "OAuth client secret the token endpoint accepts")
	fl.StringVar(&f.refreshToken, "refresh-token", servicetest.DefaultRefreshToken, "the tenant's first refresh token (valid once; each refresh rotates it)")
	fl.IntVar(&f.quota, "quota", 0, "requests per --quota-window before answering 429 (0: no quota)")
	fl.DurationVar(&f.quotaWindow, "quota-window", time.Hour, "length of the quota window")
	fl.BoolVar(&f.noV4, "no-v4", false, "the tenant's plan lacks the sharing interface: v4 answers 403")
	fl.BoolVar(&f.shapeVariants, "shape-variants", false, "make some v3 assets send a field as another JSON type (tags as an object, sizeBytes as \"1.9 MB\", booleans as \"yes\", ...)")
	fl.BoolVar(&f.wide, "wide-object", false, "add the report object learnerActivityDetail: 64 fields, about 3 KB of JSON a row, four rows a user")
	fl.BoolVar(&f.hostile, "hostile", false, "add report objects with hostile ids, fields and values (sepipe's own names, case twins, globs, NUL, bad UTF-8, terminal escapes)")
	fl.StringVar(&f.hostileWire, "hostile-wire", "", "add one report object wire_<case> per hostile wire case, comma-separated: repeat, endless, endless-untotalled, absurd-total, huge, redirect, silent, stall, or all (every case but endless-untotalled)")
	return cmd
}
