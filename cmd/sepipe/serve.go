package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// serve runs srv on ln until ctx ends (Ctrl-C), then gives the requests in
// flight up to five seconds to finish. A server that stops on its own
// returns its error.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
