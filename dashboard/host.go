package dashboard

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
)

// hostName is a DNS name as --allowed-hosts takes it: labels of letters,
// digits, - and _, separated by dots.
var hostName = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$`)

// ParseAllowedHosts reads the value of --allowed-hosts
// (dashboard.allowed_hosts): host names or IP addresses, separated by
// commas, without a port (any port is accepted), such as the name a
// proxy serves the dashboard under. It returns them normalized (lower
// case, no trailing dot, no brackets), or an error naming the entry at
// fault.
func ParseAllowedHosts(list string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		n, err := checkAllowedHost(h)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func checkAllowedHost(h string) (string, error) {
	n := normalHost(h)
	switch {
	case net.ParseIP(n) != nil:
		return n, nil
	case strings.Contains(h, "://") || strings.Contains(h, "/"):
		return "", fmt.Errorf("allowed host %q: want a host name or address, not a URL", h)
	case strings.Contains(n, ":"):
		return "", fmt.Errorf("allowed host %q: want a host name or address without a port (any port is accepted)", h)
	case strings.Contains(n, "*"):
		return "", fmt.Errorf("allowed host %q: want a host name, not a pattern (list each name)", h)
	case len(n) > 253 || !hostName.MatchString(n):
		return "", fmt.Errorf("allowed host %q: not a host name (letters, digits, -, _ and dots)", h)
	}
	return n, nil
}

// normalHost is h, a host without a port, as compared: lower case, no
// trailing dot, an IPv6 address without its brackets.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return h
}

// requestHost is the host of a request's Host header, without its port.
func requestHost(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return normalHost(h)
	}
	return normalHost(hostport)
}

// hostGuard refuses requests whose Host header names a host that is not
// this dashboard's: a page on another site that rebinds its own name to
// 127.0.0.1 (DNS rebinding) sends its own name as Host, and would
// otherwise read every panel of a dashboard without a login. Accepted:
// localhost, an IP address (no page can rebind an address, and a browser
// sends one only when it was asked for that address), the host of the
// listen address, and the allowed hosts.
type hostGuard struct {
	names map[string]bool
	next  http.Handler
}

func newHostGuard(addr string, allowed []string, next http.Handler) *hostGuard {
	g := &hostGuard{names: map[string]bool{"localhost": true}, next: next}
	if addr != "" {
		if h := requestHost(addr); h != "" {
			g.names[h] = true
		}
	}
	for _, h := range allowed {
		g.names[normalHost(strings.TrimSpace(h))] = true
	}
	return g
}

func (g *hostGuard) allows(hostport string) bool {
	h := requestHost(hostport)
	return h != "" && (g.names[h] || net.ParseIP(h) != nil)
}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.allows(r.Host) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprintf(w, "dashboard: host %q is not this dashboard's name; a page that rebinds its name to this address cannot read it. "+
			"Serving it under that name (a proxy)? Start it with --allowed-hosts %s\n", r.Host, requestHost(r.Host))
		return
	}
	g.next.ServeHTTP(w, r)
}
