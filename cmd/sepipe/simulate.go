package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/sepipe/sepipe/extract/servicetest"
)

func newSimulateCmd(g *globals) *cobra.Command {
	var (
		addr, token, limited string
		users                int
		seed                 int64
	)
	cmd := &cobra.Command{
		Use:   "simulate [--addr HOST:PORT]",
		Short: "Serve the fake tenant in the foreground, for curl, BI tools or sepipe sync",
		Long: `Simulate serves sepipe's fake of the service on --addr until interrupted
(Ctrl-C or SIGTERM). It prints the base URL and the tokens to use, e.g.:

  export SEPIPE_ACCESS_TOKEN=demo-access-token
  sepipe sync --base-url http://127.0.0.1:8080 --out ./data

The data is synthetic and deterministic: the same --seed and --users always
give the same tenant.`,
		Example: `  sepipe simulate --addr 127.0.0.1:8080 --users 1000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if users < 0 {
				return usagef("--users must not be negative, got %d", users)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usagef("--addr %s: %v", addr, err)
			}
			svc := servicetest.New(servicetest.WithSeed(seed), servicetest.WithUsers(users),
				servicetest.WithAccessToken(token), servicetest.WithLimitedToken(limited))
			hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
			base := "http://" + ln.Addr().String()
			fmt.Fprintf(g.stdout, "sepipe fake service listening\n")
			fmt.Fprintf(g.stdout, "  base URL:        %s\n", base)
			fmt.Fprintf(g.stdout, "  reporting API:   %s%s\n", base, servicetest.BasePath)
			fmt.Fprintf(g.stdout, "  access token:    %s\n", svc.AccessToken())
			fmt.Fprintf(g.stdout, "  limited token:   %s (valid, no reporting role: 403)\n", svc.LimitedToken())
			fmt.Fprintf(g.stdout, "  tenant:          %d users, seed %d\n", users, seed)
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			fmt.Fprintln(g.stdout, "stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address HOST:PORT (port 0 picks a free one)")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of the tenant's data")
	cmd.Flags().IntVar(&users, "users", 500, "users in the tenant (about 12 userCourseProgress rows each)")
	cmd.Flags().StringVar(&token, "access-token", servicetest.DefaultAccessToken, "OAuth access token the fake accepts for reporting")
	cmd.Flags().StringVar(&limited, "limited-token", servicetest.DefaultLimitedToken, "a valid token without the reporting role (answered 403)")
	return cmd
}
