package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sepipe/sepipe/extract"
)

func init() { register(newAuthCmd) }

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Show or seed the OAuth tokens sepipe refreshes the access token with",
		Long: `sepipe refreshes the OAuth access token itself when the OAuth client is
configured (service.oauth.client_id and client_secret, by default from
SEPIPE_OAUTH_CLIENT_ID and SEPIPE_OAUTH_CLIENT_SECRET). Refresh tokens rotate:
each refresh returns a new one and the old one stops working, so sepipe keeps
the newest in <out>/.sepipe/token.json (mode 0600). No command prints a token.`,
	}
	cmd.AddCommand(newAuthStatusCmd(g), newAuthLoginCmd(g))
	return cmd
}

func newAuthStatusCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say where the access token comes from and when it expires (never the token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.load(cmd, g)
			if err != nil {
				return err
			}
			w := g.stdout
			if !c.oauthClient() {
				if c.Credentials.AccessToken.Set() {
					fmt.Fprintf(w, "access token: static, from %s (not refreshed; it expires when the service says so)\n", c.Credentials.AccessToken)
					return nil
				}
				ref := c.Credentials.AccessToken.String() // ${VAR}: export VAR
				return usagef("no credential: export %s (static access token), or configure the OAuth client (%s, %s) with a refresh token",
					strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}"), c.secretRef("service.oauth.client_id"), c.secretRef("service.oauth.client_secret"))
			}
			src, err := g.oauthOf(c)
			if err != nil {
				return err
			}
			st, err := src.Status()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "OAuth client:  %s (secret from %s)\n", c.Service.OAuth.ClientID, c.Service.OAuth.ClientSecret)
			fmt.Fprintf(w, "token store:   %s\n", st.StorePath)
			switch st.Origin {
			case extract.OriginStore:
				fmt.Fprintf(w, "refresh token: from the token store (chain started by %s, last refreshed %s)\n", st.Source, st.Updated.Local().Format(time.RFC3339))
			case extract.OriginSeed:
				fmt.Fprintf(w, "refresh token: from %s, not used yet (the first sync exchanges it and stores the next one)\n", c.Service.OAuth.RefreshToken)
			default:
				fmt.Fprintf(w, "refresh token: none: export %s or run `sepipe auth login`\n", c.Service.OAuth.RefreshToken)
				return errNoToken
			}
			switch {
			case !st.HasAccess:
				fmt.Fprintln(w, "access token:  none yet (obtained at the next request)")
			case st.AccessExpired:
				fmt.Fprintf(w, "access token:  expired at %s (refreshed at the next request)\n", st.AccessExpiry.Local().Format(time.RFC3339))
			default:
				fmt.Fprintf(w, "access token:  valid until %s (in %s; refreshed %s before)\n", st.AccessExpiry.Local().Format(time.RFC3339),
					time.Until(st.AccessExpiry).Round(time.Second), extract.DefaultExpiryMargin)
			}
			return nil
		},
	}
	f.addTokenFlags(cmd)
	return cmd
}

// oauthOf builds the config's OAuth source, logging to stderr.
func (g *globals) oauthOf(c *Config) (*extract.OAuth, error) {
	log, err := g.loggerTo(g.stderr)
	if err != nil {
		return nil, err
	}
	return c.newOAuth(log)
}

// errNoToken: auth status found nothing to refresh with.
var errNoToken = fmt.Errorf("no refresh token")

func newAuthLoginCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Seed the token store with a refresh token read from standard input",
		Long: `Login reads a refresh token from standard input (not echoed on a terminal),
exchanges it at once at the token endpoint (which proves it works and rotates
it) and stores the new tokens in <out>/.sepipe/token.json. From then on the store
wins over SEPIPE_REFRESH_TOKEN. Run it again whenever the chain breaks (a
refresh token unused for 14 days expires).`,
		Example: `  sepipe auth login --out ./warehouse < refresh-token.txt
  pass show acme/refresh-token | sepipe auth login`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.load(cmd, g)
			if err != nil {
				return err
			}
			if !c.oauthClient() {
				return usagef("auth login needs the OAuth client: export %s and %s (or set service.oauth in the config)",
					c.secretRef("service.oauth.client_id"), c.secretRef("service.oauth.client_secret"))
			}
			tok, err := readSecretLine(cmd.InOrStdin(), g.stderr, "refresh token: ")
			if err != nil {
				return err
			}
			src, err := g.oauthOf(c)
			if err != nil {
				return err
			}
			if err := src.Login(cmd.Context(), tok); err != nil {
				return err
			}
			st, err := src.Status()
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "stored in %s; access token valid until %s\n", st.StorePath, st.AccessExpiry.Local().Format(time.RFC3339))
			return nil
		},
	}
	f.addTokenFlags(cmd)
	return cmd
}

// readSecretLine reads one line; from a terminal without echo, after a
// prompt on stderr.
func readSecretLine(in io.Reader, prompt io.Writer, label string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, label)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("read the refresh token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := bufio.NewReader(io.LimitReader(in, 64<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the refresh token from standard input: %w", err)
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return "", usagef("no refresh token on standard input")
	}
	return line, nil
}
