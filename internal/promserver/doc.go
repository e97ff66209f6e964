// Package promserver starts a real Prometheus server (Debian's prometheus
// package) on 127.0.0.1 for the tests of sepipe's metrics: it scrapes the
// targets a test names, with the rules of deploy/prometheus loaded, and
// answers queries through its HTTP API; and a real Pushgateway (Debian's
// prometheus-pushgateway) that a sync pushes to. Tests only.
//
// Without the binary on PATH (or SEPIPE_PROMETHEUS, SEPIPE_PUSHGATEWAY) a
// test skips, or fails when CI is set (.ci/run installs the packages).
//
// Imports nothing of sepipe's.
package promserver
