package monitor

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/webhooks"
)

// Metrics is sepipe's metrics of one process: its runs (Run), its
// requests (it is an extract.RequestObserver) and, for a listener, its
// webhook deliveries (it is a webhooks.Observer; Listen adds the gauges of
// its state). Its methods are safe for concurrent use.
type Metrics struct {
	// runs holds what a run reports: written to a file or pushed after a
	// one-shot sync (batch.go), and served with the rest.
	runs *prometheus.Registry
	// runsReg registers in runs with the tenant's label.
	runsReg prometheus.Registerer
	// all is what /metrics serves: the runs', the listener's, Go's and
	// the process's; listenReg registers the listener's (with the
	// tenant's label).
	all       *prometheus.Registry
	listenReg prometheus.Registerer

	runsTotal     *prometheus.CounterVec
	lastRun       *prometheus.GaugeVec
	lastSuccess   prometheus.Gauge
	runDuration   prometheus.Gauge
	stepDuration  *prometheus.GaugeVec
	peakMemory    prometheus.Gauge
	streamRows    *prometheus.GaugeVec
	streamRejects *prometheus.GaugeVec
	streamPages   *prometheus.GaugeVec
	streamOK      *prometheus.GaugeVec
	streamCommit  *prometheus.GaugeVec
	streamDay     *prometheus.GaugeVec
	requests      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec
	quotaLimit    prometheus.Gauge
	quotaLeft     prometheus.Gauge
	quotaReset    prometheus.Gauge

	deliveries  *prometheus.CounterVec
	received    prometheus.Counter
	refused     *prometheus.CounterVec
	loaded      prometheus.Counter
	loadTime    prometheus.Histogram
	publishTime prometheus.Histogram

	mu         sync.Mutex
	quotaShown bool // the quota's gauges are registered
}

var _ extract.RequestObserver = (*Metrics)(nil)
var _ webhooks.Observer = (*Metrics)(nil)

// New makes the metrics of a process; tenant, when not empty, labels every
// one of them (a config serving several tenants runs a process for each).
func New(tenant string) *Metrics {
	m := &Metrics{runs: prometheus.NewRegistry(), all: prometheus.NewRegistry()}
	var labels prometheus.Labels
	if tenant != "" {
		labels = prometheus.Labels{"tenant": tenant}
	}
	runs := prometheus.WrapRegistererWith(labels, m.runs)
	m.listenReg = prometheus.WrapRegistererWith(labels, m.all)
	m.all.MustRegister(m.runs) // a Registry is a Collector: served with the rest, its labels its own
	m.all.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		runs.MustRegister(g)
		return g
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		runs.MustRegister(g)
		return g
	}
	m.runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sepipe_runs_total",
		Help: "Runs by how they ended: succeeded, partial (some streams committed, or none failed and a quota deferred them) or failed."}, []string{"status"})
	runs.MustRegister(m.runsTotal)
	for _, s := range []RunStatus{Succeeded, Partial, Failed} {
		m.runsTotal.WithLabelValues(string(s))
	}
	m.lastRun = gaugeVec("sepipe_last_run_timestamp_seconds", "When the last run ended, labelled by how.", "status")
	m.lastSuccess = gauge("sepipe_last_success_timestamp_seconds", "When the last run that succeeded ended.")
	m.runDuration = gauge("sepipe_last_run_duration_seconds", "How long the last run took.")
	m.stepDuration = gaugeVec("sepipe_last_run_step_duration_seconds", "How long each step of the last run took: fetch, load, publish, iceberg.", "step")
	m.peakMemory = gauge("sepipe_peak_resident_memory_bytes", "The process's peak resident memory (VmHWM) at the end of the last run.")
	m.streamRows = gaugeVec("sepipe_stream_rows", "Rows the last run committed of each stream.", "stream")
	m.streamRejects = gaugeVec("sepipe_stream_rejects", "Rows left out and values stored as null (each in _sepipe_rejects) by the last run, per stream.", "stream")
	m.streamPages = gaugeVec("sepipe_stream_pages", "Pages the last run read of each stream.", "stream")
	m.streamOK = gaugeVec("sepipe_stream_last_run_committed", "1 when the last run committed the stream, 0 when it failed, was skipped or deferred.", "stream")
	m.streamCommit = gaugeVec("sepipe_stream_last_commit_timestamp_seconds", "When the run that last committed each stream ended.", "stream")
	m.streamDay = gaugeVec("sepipe_stream_last_snapshot_date_timestamp_seconds", "The snapshot day (its midnight, UTC) last committed of each stream.", "stream")
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sepipe_requests_total",
		Help: "Requests sent to the service, by interface and HTTP status (code 0: no answer came)."}, []string{"interface", "code"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sepipe_request_retries_total",
		Help: "Requests sent again after a failed or refused attempt, by interface."}, []string{"interface"})
	m.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sepipe_request_duration_seconds",
		Help: "How long the service took to answer, by interface.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10)}, []string{"interface"})
	runs.MustRegister(m.requests, m.retries, m.requestTime)
	// Registered once a quota is announced (Run): an alert on a quota
	// nearly spent must not fire where the service announces none.
	m.runsReg = runs
	m.quotaLimit = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sepipe_quota_limit_requests", Help: "The service's announced request quota per window (absent until announced)."})
	m.quotaLeft = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sepipe_quota_remaining_requests", Help: "Requests left in the quota's window at the end of the last run."})
	m.quotaReset = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sepipe_quota_reset_timestamp_seconds", Help: "When the quota's window resets."})
	return m
}

// ObserveRequest counts a request the client sent (extract.RequestObserver).
func (m *Metrics) ObserveRequest(iface string, status int, retry bool, took time.Duration) {
	m.requests.WithLabelValues(iface, strconv.Itoa(status)).Inc()
	if retry {
		m.retries.WithLabelValues(iface).Inc()
	}
	m.requestTime.WithLabelValues(iface).Observe(took.Seconds())
}

// RunStatus is how a run ended, as the exit code tells it (0, 3, else).
type RunStatus string

// The statuses of a run, the values of sepipe_runs_total's label status.
const (
	Succeeded RunStatus = "succeeded"
	Partial   RunStatus = "partial" // some streams committed, or a quota deferred them, or the publish is left
	Failed    RunStatus = "failed"
)

// Run records a run that ended with status: its time, its steps, each
// stream's rows, rejects and pages and whether it committed, each
// stream's last commit as the published warehouse holds it (fresh, which
// may be nil), the quota the client last saw and the process's peak
// memory. res may be nil (a run that failed before it read anything).
func (m *Metrics) Run(status RunStatus, res *pipeline.Result, fresh []load.StreamFreshness, quota extract.Quota, ended time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runsTotal.WithLabelValues(string(status)).Inc()
	m.lastRun.Reset()
	m.lastRun.WithLabelValues(string(status)).Set(seconds(ended))
	if status == Succeeded {
		m.lastSuccess.Set(seconds(ended))
	}
	if res != nil {
		if !res.Started.IsZero() {
			m.runDuration.Set(ended.Sub(res.Started).Seconds())
		}
		m.stepDuration.Reset()
		for step, d := range res.Steps {
			m.stepDuration.WithLabelValues(step).Set(d.Seconds())
		}
		for _, v := range []*prometheus.GaugeVec{m.streamRows, m.streamRejects, m.streamPages, m.streamOK} {
			v.Reset()
		}
		for _, o := range res.Objects {
			committed := 0.0
			if o.Err == nil && (o.Status == "" || o.Status == pipeline.StatusOK) {
				committed = 1
				m.streamRows.WithLabelValues(o.Object).Set(float64(o.Rows))
				m.streamRejects.WithLabelValues(o.Object).Set(float64(o.RejectedRows + o.NulledValues))
				m.streamPages.WithLabelValues(o.Object).Set(float64(o.Pages))
			}
			m.streamOK.WithLabelValues(o.Object).Set(committed)
		}
	}
	if fresh != nil {
		m.streamCommit.Reset()
		m.streamDay.Reset()
	}
	for _, f := range fresh {
		m.streamCommit.WithLabelValues(f.Stream).Set(seconds(f.CommittedAt))
		if d, err := time.Parse(time.DateOnly, f.SnapshotDate); err == nil {
			m.streamDay.WithLabelValues(f.Stream).Set(seconds(d))
		}
	}
	if quota.Known && quota.Limit > 0 {
		if !m.quotaShown {
			m.runsReg.MustRegister(m.quotaLimit, m.quotaLeft, m.quotaReset)
			m.quotaShown = true
		}
		m.quotaLimit.Set(float64(quota.Limit))
		m.quotaLeft.Set(float64(quota.Remaining))
		m.quotaReset.Set(seconds(quota.Reset))
	}
	if peak := peakRSS(); peak > 0 {
		m.peakMemory.Set(float64(peak))
	}
}

// Delivered counts a delivery answered 200 (webhooks.Observer).
func (m *Metrics) Delivered(outcome string) {
	m.listenOnce()
	m.received.Inc()
	m.deliveries.WithLabelValues(outcome).Inc()
}

// Refused counts a delivery refused (webhooks.Observer).
func (m *Metrics) Refused(reason string) {
	m.listenOnce()
	m.received.Inc()
	m.refused.WithLabelValues(reason).Inc()
}

// Loaded counts events loaded (webhooks.Observer).
func (m *Metrics) Loaded(events, _ int, took time.Duration) {
	m.listenOnce()
	m.loaded.Add(float64(events))
	m.loadTime.Observe(took.Seconds())
}

// Published times a publish (webhooks.Observer).
func (m *Metrics) Published(took time.Duration, _ time.Time) {
	m.listenOnce()
	m.publishTime.Observe(took.Seconds())
}

// Listen registers the listener's metrics, the gauges read from state at
// each scrape among them: events waiting in the spool, the time of the
// last publish, the age of the oldest acknowledged event readers do not
// see yet. Call it before Listen starts.
func (m *Metrics) Listen(state *webhooks.ListenState) {
	m.listenOnce()
	m.listenReg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sepipe_webhook_spool_events",
			Help: "Acknowledged webhook events waiting in the spool to be loaded."}, func() float64 { return float64(state.Pending()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sepipe_webhook_last_publish_timestamp_seconds",
			Help: "When the listener last published the warehouse (0: not yet)."}, func() float64 { return seconds(state.LastPublish()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sepipe_webhook_oldest_unpublished_age_seconds",
			Help: "How long ago the oldest acknowledged event that readers of the published warehouse do not see yet was received (0: none)."},
			func() float64 {
				if t := state.OldestUnpublished(); !t.IsZero() {
					return time.Since(t).Seconds()
				}
				return 0
			}),
	)
}

// listenOnce makes the listener's counters (on first use).
func (m *Metrics) listenOnce() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deliveries != nil {
		return
	}
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sepipe_webhook_deliveries_total",
		Help: "Webhook deliveries answered 200, by outcome: accepted (stored) or duplicate (stored before)."}, []string{"outcome"})
	m.received = prometheus.NewCounter(prometheus.CounterOpts{Name: "sepipe_webhook_deliveries_received_total",
		Help: "Webhook deliveries received, whatever their answer."})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sepipe_webhook_deliveries_refused_total",
		Help: "Webhook deliveries refused, by reason (" + strings.Join(webhooks.Refusals, ", ") + ")."}, []string{"reason"})
	m.loaded = prometheus.NewCounter(prometheus.CounterOpts{Name: "sepipe_webhook_events_loaded_total",
		Help: "Webhook events loaded into the working database (a replayed event counts again)."})
	m.loadTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sepipe_webhook_load_duration_seconds",
		Help: "How long a batch of events took to load.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)})
	m.publishTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sepipe_webhook_publish_duration_seconds",
		Help: "How long a publish of the warehouse took.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)})
	for _, o := range []string{webhooks.OutcomeAccepted, webhooks.OutcomeDuplicate} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range webhooks.Refusals {
		m.refused.WithLabelValues(r)
	}
	m.listenReg.MustRegister(m.deliveries, m.received, m.refused, m.loaded, m.loadTime, m.publishTime)
}

// seconds is t as Unix seconds (0 for the zero time).
func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes; 0
// where /proc is not.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
