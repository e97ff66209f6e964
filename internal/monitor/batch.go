package monitor

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// WriteFile writes the run's metrics to path in Prometheus's text format,
// for the node exporter's textfile collector: to a temporary file in the
// same folder, renamed over path, so the collector never reads half a
// file. path should end in .prom, as the collector reads no other file.
func (m *Metrics) WriteFile(path string) error {
	if err := prometheus.WriteToTextfile(path, m.runs); err != nil {
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	return nil
}

// CheckPushgateway refuses a Pushgateway address that is not an http(s)
// URL, or one with user information (a credential belongs in the
// environment, never in a flag or the config); its message reads after the
// setting's name.
func CheckPushgateway(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%q: not a URL: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("%q: want an http(s) URL, such as http://pushgateway:9091", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("%q: holds user information; put no credential in a URL", u.Redacted())
	}
	return nil
}

// Push pushes the run's metrics to the Pushgateway at gateway, under job
// "sepipe" and the grouping labels given (the tenant's, when a config
// serves several), replacing what the group held: a gateway holds each
// group's last push, as the textfile holds the last run's.
func (m *Metrics) Push(ctx context.Context, gateway string, grouping map[string]string) error {
	if err := CheckPushgateway(gateway); err != nil {
		return fmt.Errorf("pushgateway %w", err)
	}
	p := push.New(strings.TrimRight(gateway, "/"), "sepipe").Gatherer(m.runs).Client(&http.Client{Timeout: 30 * time.Second})
	for k, v := range grouping {
		p = p.Grouping(k, v)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("pushgateway %s: %w", gateway, err)
	}
	return nil
}
