package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// listenOn opens the HOST:PORT a command serves on (--addr of dashboard,
// listen and simulate); an address that is bad or taken is a usage error
// naming the flag.
func listenOn(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("--addr %s: %v", addr, err)
	}
	return ln, nil
}

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
