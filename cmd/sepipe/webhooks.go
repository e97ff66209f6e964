package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract"
)

func init() { register(newWebhooksCmd) }

// webhookFlags are the flags every webhooks subcommand shares.
type webhookFlags struct {
	config     string
	tenant     string
	baseURL    string
	webhookURL string
	format     string
}

func (f *webhookFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "config file (default ./sepipe.yaml when it exists)")
	cmd.Flags().StringVar(&f.tenant, "tenant", "", "the tenant to work on, of the config's tenants")
	cmd.Flags().StringVar(&f.baseURL, "base-url", "", "tenant URL (https://<subdomain>.<domain>); overrides service.tenant_url")
	cmd.Flags().StringVar(&f.webhookURL, "webhook-url", "", "webhook API base (default: <base-url>/webhooks/v1); overrides service.webhooks_url")
	cmd.Flags().StringVar(&f.format, "format", "table", "output format: table or json")
}

// client checks the flags and builds the client. The URLs default to the
// config's service.tenant_url and webhooks_url; the developer API token
// comes from the variable credentials.api_token names (SEPIPE_API_TOKEN
// by default), never from a flag.
func (f *webhookFlags) client(cmd *cobra.Command, g *globals) (*extract.Client, error) {
	if f.format != "table" && f.format != "json" {
		return nil, usagef("--format %q: want table or json", f.format)
	}
	fl := cmd.Flags()
	c := defaultConfig()
	if !(fl.Changed("base-url") || fl.Changed("webhook-url")) || fl.Changed("config") || f.tenant != "" {
		// The config gives the URLs and the API token; --base-url
		// without --config or --tenant needs none of it (beside a
		// config of several tenants it asked which).
		var err error
		if c, err = LoadConfig(f.config, fl.Changed("config")); err != nil {
			return nil, err
		}
		if err := c.UseTenant(f.tenant); err != nil {
			return nil, err
		}
	}
	if f.baseURL == "" && f.webhookURL == "" {
		f.baseURL, f.webhookURL = c.Service.TenantURL, c.Service.WebhooksURL
	}
	if f.baseURL == "" && f.webhookURL == "" {
		return nil, usagef("--base-url is required (the tenant's URL, e.g. https://acme.example.com), or write service.tenant_url in ./sepipe.yaml")
	}
	if !c.Credentials.APIToken.Set() {
		return nil, c.secretMissing("credentials.api_token", c.Credentials.APIToken)
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	base := f.baseURL
	if base == "" {
		base = f.webhookURL
	}
	opts := []extract.Option{extract.WithAPIToken(c.Credentials.APIToken.Value.Reveal()), extract.WithLogger(log)}
	if f.webhookURL != "" {
		opts = append(opts, extract.WithWebhookURL(f.webhookURL))
	}
	client, err := extract.New(base, opts...)
	if err != nil {
		if !fl.Changed("base-url") && !fl.Changed("webhook-url") {
			return nil, c.errf("service", "%v", err)
		}
		return nil, usagef("--base-url/--webhook-url: %v", err)
	}
	return client, nil
}

func newWebhooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Manage the service's webhook subscriptions",
		Long: `Webhooks manages the tenant's webhook subscriptions: which events the
service pushes, to which URL, by POST or GET. Point a subscription at
'sepipe listen' to land its events in the warehouse's events table.

The developer API token is read from the environment variable
SEPIPE_API_TOKEN (or the one the config's credentials.api_token names); it
is never taken from a flag. --base-url and --webhook-url default to the
config's service.tenant_url and service.webhooks_url (./sepipe.yaml when it
exists, or --config; --tenant for a config with tenants).`,
		Example: `  export SEPIPE_API_TOKEN=...
  sepipe webhooks create --base-url https://acme.example.com --name lms \
      --url 'https://hooks.example.com/sepipe?subscription=lms' --types COURSE_COMPLETED
  sepipe webhooks list --base-url https://acme.example.com
  sepipe webhooks logs --base-url https://acme.example.com 01M6AV2ZR0...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newWebhooksCreateCmd(g), newWebhooksUpdateCmd(g), newWebhooksDeleteCmd(g),
		newWebhooksGetCmd(g), newWebhooksListCmd(g), newWebhooksLogsCmd(g))
	return cmd
}

// subscriptionFlags are the fields of a create or update.
type subscriptionFlags struct {
	name, url, method string
	headers, types    []string
}

func (s *subscriptionFlags) add(cmd *cobra.Command, method string) {
	cmd.Flags().StringVar(&s.name, "name", "", "subscription name (unique)")
	cmd.Flags().StringVar(&s.url, "url", "", "where deliveries go, e.g. http://host:8090/events?subscription=NAME")
	cmd.Flags().StringVar(&s.method, "method", method, "delivery method: POST (JSON body) or GET (query parameters)")
	cmd.Flags().StringArrayVar(&s.headers, "header", nil, "header sent with each delivery, NAME=VALUE (repeatable)")
	cmd.Flags().StringSliceVar(&s.types, "types", nil, "comma-separated event types, e.g. COURSE_COMPLETED,shared-space-created")
}

func (s *subscriptionFlags) request() (extract.SubscriptionRequest, error) {
	r := extract.SubscriptionRequest{Name: s.name, URL: s.url, Method: strings.ToUpper(s.method), Types: s.types}
	for _, h := range s.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return r, usagef("--header %q: want NAME=VALUE", h)
		}
		r.Headers = append(r.Headers, extract.Header{Name: strings.TrimSpace(name), Value: value})
	}
	return r, nil
}

func newWebhooksCreateCmd(g *globals) *cobra.Command {
	f, s := &webhookFlags{}, &subscriptionFlags{}
	cmd := &cobra.Command{
		Use:   "create --name NAME --url URL --types TYPE[,TYPE]",
		Short: "Create a subscription and print its signing secret (shown once)",
		Long: `Create subscribes URL to the given event types and prints the new
subscription with its signing secret. The service shows the secret only in
this answer: keep it where 'sepipe listen' reads it, the environment variable
SEPIPE_WEBHOOK_SECRET (comma-separated to accept several during a rotation)
or the config's webhooks.secrets (as "${VAR}" references).

The service sends no header naming the subscription: add
?subscription=NAME to the URL and 'sepipe listen' records NAME in the
events table's subscription column.`,
		Example: `  sepipe webhooks create --base-url https://acme.example.com --name lms \
      --url 'https://hooks.example.com/sepipe?subscription=lms' --types COURSE_COMPLETED`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			r, err := s.request()
			if err != nil {
				return err
			}
			if err := r.Validate(); err != nil {
				return usageError{err}
			}
			sub, err := c.CreateSubscription(cmd.Context(), r)
			if err != nil {
				return err
			}
			secret := sub.SignatureKey.Reveal()
			if f.format == "json" {
				return writeJSONValue(g.stdout, subscriptionJSON(*sub, secret))
			}
			printSubscriptions(g.stdout, []extract.Subscription{*sub})
			fmt.Fprintf(g.stdout, "\nsigning secret: %s\n", secret)
			fmt.Fprintln(g.stderr, "warning: the signing secret is shown only now; the service will not show it again.")
			fmt.Fprintln(g.stderr, "Keep it where 'sepipe listen' reads it:")
			fmt.Fprintln(g.stderr, "  export SEPIPE_WEBHOOK_SECRET='<secret>'   (comma-separated for several, during a rotation)")
			fmt.Fprintln(g.stderr, "or in the config's webhooks.secrets, as a ${VAR} reference (or 'sepipe listen --secret').")
			fmt.Fprintln(g.stderr, "Lost, it cannot be recovered: delete the subscription and create another.")
			return nil
		},
	}
	f.add(cmd)
	s.add(cmd, "POST")
	return cmd
}

func newWebhooksUpdateCmd(g *globals) *cobra.Command {
	f, s := &webhookFlags{}, &subscriptionFlags{}
	cmd := &cobra.Command{
		Use:   "update ID [--name NAME] [--url URL] [--method M] [--header N=V]... [--types T,...]",
		Short: "Change a subscription's fields (the signing secret stays)",
		Long: `Update changes the fields given and keeps the others. A --header list
replaces the whole list. The signing secret never changes.`,
		Example: `  sepipe webhooks update --base-url https://acme.example.com 01M6AV2ZR0... --types COURSE_COMPLETED,shared-space-created`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			cur, err := c.GetSubscription(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// The client sends whole requests: start from the current
			// subscription and replace what the flags name.
			r := extract.SubscriptionRequest{Name: cur.Name, URL: cur.URL, Method: cur.Method, Headers: cur.Headers, Types: cur.Types}
			fl := cmd.Flags()
			if fl.Changed("name") {
				r.Name = s.name
			}
			if fl.Changed("url") {
				r.URL = s.url
			}
			if fl.Changed("method") {
				r.Method = strings.ToUpper(s.method)
			}
			if fl.Changed("types") {
				r.Types = s.types
			}
			if fl.Changed("header") {
				nr, err := s.request()
				if err != nil {
					return err
				}
				r.Headers = nr.Headers
			}
			if err := r.Validate(); err != nil {
				return usageError{err}
			}
			sub, err := c.UpdateSubscription(cmd.Context(), args[0], r)
			if err != nil {
				return err
			}
			return printSubscriptionsAs(g.stdout, f.format, []extract.Subscription{*sub})
		},
	}
	f.add(cmd)
	s.add(cmd, "")
	return cmd
}

func newWebhooksDeleteCmd(g *globals) *cobra.Command {
	f := &webhookFlags{}
	cmd := &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a subscription and its delivery log",
		Example: `  sepipe webhooks delete --base-url https://acme.example.com 01M6AV2ZR0...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			if err := c.DeleteSubscription(cmd.Context(), args[0]); err != nil {
				return err
			}
			if f.format == "json" {
				return writeJSONValue(g.stdout, map[string]any{"id": args[0], "deleted": true})
			}
			fmt.Fprintf(g.stdout, "deleted subscription %s\n", args[0])
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func newWebhooksGetCmd(g *globals) *cobra.Command {
	f := &webhookFlags{}
	cmd := &cobra.Command{
		Use:     "get ID",
		Short:   "Show one subscription",
		Example: `  sepipe webhooks get --base-url https://acme.example.com --format json 01M6AV2ZR0...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			sub, err := c.GetSubscription(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printSubscriptionsAs(g.stdout, f.format, []extract.Subscription{*sub})
		},
	}
	f.add(cmd)
	return cmd
}

func newWebhooksListCmd(g *globals) *cobra.Command {
	f := &webhookFlags{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List every subscription, oldest first",
		Example: `  sepipe webhooks list --base-url https://acme.example.com`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			subs, err := c.Subscriptions(cmd.Context())
			if err != nil {
				return err
			}
			return printSubscriptionsAs(g.stdout, f.format, subs)
		},
	}
	f.add(cmd)
	return cmd
}

func newWebhooksLogsCmd(g *globals) *cobra.Command {
	f := &webhookFlags{}
	var limit int
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show a subscription's delivery attempts, newest first",
		Long: `Logs prints the delivery log of a subscription: one line per attempt
with its outcome (delivered, retrying, failed), status and duration. JSON
output has the whole entry, request and response included, with header
values REDACTED (they may hold the destination's credentials).`,
		Example: `  sepipe webhooks logs --base-url https://acme.example.com 01M6AV2ZR0... --limit 20`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(cmd, g)
			if err != nil {
				return err
			}
			logs, err := c.SubscriptionLogs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if limit > 0 && len(logs) > limit {
				logs = logs[:limit]
			}
			if f.format == "json" {
				enc := json.NewEncoder(g.stdout)
				for _, l := range logs {
					hs := make([]extract.Header, len(l.Request.Headers))
					for i, h := range l.Request.Headers {
						hs[i] = extract.Header{Name: h.Name, Value: "REDACTED"}
					}
					l.Request.Headers = hs
					if err := enc.Encode(l); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(termSafe(g.stdout), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DELIVERED_AT\tEVENT\tTYPE\tATTEMPT\tSTATUS\tDURATION\tOUTCOME\tERROR")
			for _, l := range logs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%dms\t%s\t%s\n", instant(l.DeliveredAt, time.RFC3339Nano), cell(l.EventID),
					cell(l.EventType), l.Attempt, l.Response.Status, l.DurationMs, cell(l.Outcome), cell(l.Error))
			}
			return tw.Flush()
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many entries (default: all)")
	return cmd
}

// subscriptionJSON is a subscription as printed: the secret only when
// given (on create), header values redacted.
func subscriptionJSON(s extract.Subscription, secret string) map[string]any {
	headers := make([]map[string]string, 0, len(s.Headers))
	for _, h := range s.Headers {
		headers = append(headers, map[string]string{"name": h.Name, "value": "REDACTED"})
	}
	m := map[string]any{"id": s.ID, "name": s.Name, "url": s.URL, "method": s.Method, "headers": headers,
		"types": s.Types, "requestCount": s.RequestCount}
	// A time the service wrote in no ISO 8601 form is zero: left out, as
	// extract.Subscription's own JSON leaves it (it printed the year 1).
	for k, t := range map[string]time.Time{"createdAt": s.CreatedAt, "updatedAt": s.UpdatedAt} {
		if !t.IsZero() {
			m[k] = t
		}
	}
	if secret != "" {
		m["signatureKey"] = secret
	}
	return m
}

func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

func printSubscriptionsAs(w io.Writer, format string, subs []extract.Subscription) error {
	if format == "json" {
		for _, s := range subs {
			if err := writeJSONValue(w, subscriptionJSON(s, "")); err != nil {
				return err
			}
		}
		return nil
	}
	printSubscriptions(w, subs)
	return nil
}

// instant prints t in UTC in layout, or "-" for a zero time: one the
// service sent in a form no ISO 8601 reader takes (extract leaves it zero).
func instant(t time.Time, layout string) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(layout)
}

func printSubscriptions(w io.Writer, subs []extract.Subscription) {
	tw := tabwriter.NewWriter(termSafe(w), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tMETHOD\tURL\tTYPES\tHEADERS\tREQUESTS\tCREATED")
	for _, s := range subs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", cell(s.ID), cell(s.Name), cell(s.Method), cell(s.URL), cell(strings.Join(s.Types, ",")),
			len(s.Headers), s.RequestCount, instant(s.CreatedAt, time.RFC3339))
	}
	tw.Flush()
}
