package monitor

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sepipe/sepipe/webhooks"
)

// Paths are the paths Handler serves.
var Paths = []string{"/metrics", "/healthz", "/readyz"}

// Serves reports whether r is a request Handler answers: a GET (or HEAD)
// of one of Paths. A command that serves them beside its own handler
// (listen, dashboard) routes by it.
func Serves(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(Paths, r.URL.Path)
}

// Beside serves the monitoring's requests (Serves: GET /metrics,
// /healthz, /readyz) with mon beside a command's own handler on its own
// listener: listen's receiver and the dashboard. A request for one of
// those paths that carries a webhook signature is a delivery (listen
// takes deliveries on any path), never the monitoring's.
func Beside(mon http.Handler) func(http.Handler) http.Handler {
	return func(own http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if Serves(r) && r.Header.Get(webhooks.SignatureHeader) == "" {
				mon.ServeHTTP(w, r)
				return
			}
			own.ServeHTTP(w, r)
		})
	}
}

// ReadyFunc says why a process cannot do its job now, a cause each (none:
// it can). It is called for each /readyz, and must answer within the
// probe's time.
type ReadyFunc func(ctx context.Context) []string

// Handler serves the metrics and the probes of a long-lived command
// (listen, schedule, dashboard):
//
//   - /metrics: the metrics in Prometheus's text format (or OpenMetrics,
//     as the scraper asks);
//   - /healthz: 200 {"status":"ok"} while the process serves (a liveness
//     probe);
//   - /readyz: 200 {"status":"ready"} when ready finds no cause, else 503
//     {"status":"not ready","causes":[...]} naming each (a readiness
//     probe). A nil ready is always ready.
func Handler(m *Metrics, ready ReadyFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(m.all, promhttp.HandlerFor(m.all, promhttp.HandlerOpts{
		EnableOpenMetrics: true, Timeout: 10 * time.Second})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		var causes []string
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			causes = ready(ctx)
			cancel()
		}
		if len(causes) > 0 {
			answer(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "causes": causes})
			return
		}
		answer(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	return mux
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
