// Package monitor is what the monitoring operators already run reads of
// sepipe: Prometheus metrics (metrics.go: a run's, the webhook
// listener's, and Go's and the process's), served on /metrics beside the
// Kubernetes-style probes /healthz and /readyz (serve.go), written for the
// node exporter's textfile collector or pushed to a Pushgateway after a
// one-shot sync (batch.go). Every metric is named here, by Prometheus's
// conventions: a sepipe_ prefix, base units, _total for counters, and
// labels of few values (stream, as its table is named; interface; status;
// outcome; reason; step), never an id, a URL or a credential.
//
// It serves the commands (cmd/sepipe) and internal/demo; it is never
// part of a run's data path.
//
// Imports of sepipe's: extract, load, pipeline, webhooks.
package monitor
