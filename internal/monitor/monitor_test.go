package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/internal/promserver"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// values is a family's values by the value of label ("" for none).
func values(f *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		key := ""
		for _, l := range m.Label {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		switch {
		case m.Gauge != nil:
			out[key] = m.Gauge.GetValue()
		case m.Counter != nil:
			out[key] = m.Counter.GetValue()
		}
	}
	return out
}

// TestRunsInTheTextfile: two runs of a process (a schedule's) written as
// the textfile collector reads them: runs counted by status, the last
// run's streams only (a stream the second run left out loses its rows,
// keeps its last commit), the quota absent until the service announces
// one, the tenant's label on every series, and the file replaced whole.
func TestRunsInTheTextfile(t *testing.T) {
	m := monitor.New("acme")
	path := filepath.Join(t.TempDir(), "sepipe.prom")
	started := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	first := &pipeline.Result{Started: started, Steps: map[string]time.Duration{pipeline.StepFetch: 3 * time.Second, pipeline.StepLoad: time.Second},
		Objects: []pipeline.ObjectResult{
			{Object: "course", Rows: 20, Pages: 1, Status: pipeline.StatusOK},
			{Object: "user", Rows: 50, Pages: 2, RejectedRows: 1, NulledValues: 2, Status: pipeline.StatusOK},
		}}
	fresh := []load.StreamFreshness{{Stream: "course", SnapshotDate: "2026-11-28", CommittedAt: started.Add(time.Minute)},
		{Stream: "user", SnapshotDate: "2026-11-28", CommittedAt: started.Add(time.Minute)}}
	m.Run(monitor.Succeeded, first, fresh, extract.Quota{}, started.Add(time.Minute))
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fams := promserver.ParseFile(t, path)
	if got := values(fams["sepipe_stream_rows"], "stream"); got["course"] != 20 || got["user"] != 50 || len(got) != 2 {
		t.Errorf("rows %v", got)
	}
	if got := values(fams["sepipe_stream_rejects"], "stream"); got["user"] != 3 {
		t.Errorf("rejects %v, want user 3 (a row left out, two values null)", got)
	}
	if got := values(fams["sepipe_last_run_duration_seconds"], ""); got[""] != 60 {
		t.Errorf("duration %v, want 60", got)
	}
	if got := values(fams["sepipe_last_run_step_duration_seconds"], "step"); got["fetch"] != 3 || got["load"] != 1 {
		t.Errorf("steps %v", got)
	}
	if fams["sepipe_quota_remaining_requests"] != nil {
		t.Error("a quota before the service announced one")
	}
	for name, f := range fams {
		for _, mm := range f.Metric {
			tenant := ""
			for _, l := range mm.Label {
				if l.GetName() == "tenant" {
					tenant = l.GetValue()
				}
			}
			if tenant != "acme" {
				t.Errorf("%s: a series without the tenant's label", name)
			}
		}
	}

	// The second run: user failed, a quota announced.
	second := &pipeline.Result{Started: started.Add(24 * time.Hour), Objects: []pipeline.ObjectResult{
		{Object: "course", Rows: 21, Pages: 1, Status: pipeline.StatusOK},
		{Object: "user", Status: pipeline.StatusFailed, Err: errors.New("boom")},
	}}
	fresh[0].CommittedAt = started.Add(24*time.Hour + time.Minute)
	m.Run(monitor.Partial, second, fresh, extract.Quota{Known: true, Limit: 1000, Remaining: 40, Reset: started.Add(25 * time.Hour)}, started.Add(24*time.Hour+time.Minute))
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fams = promserver.ParseFile(t, path)
	if got := values(fams["sepipe_runs_total"], "status"); got["succeeded"] != 1 || got["partial"] != 1 || got["failed"] != 0 {
		t.Errorf("runs %v", got)
	}
	if got := values(fams["sepipe_last_run_timestamp_seconds"], "status"); len(got) != 1 || got["partial"] == 0 {
		t.Errorf("last run %v, want the partial one only", got)
	}
	if got := values(fams["sepipe_stream_rows"], "stream"); len(got) != 1 || got["course"] != 21 {
		t.Errorf("rows %v, want course's only (user failed)", got)
	}
	if got := values(fams["sepipe_stream_last_run_committed"], "stream"); got["course"] != 1 || got["user"] != 0 {
		t.Errorf("committed %v", got)
	}
	commits := values(fams["sepipe_stream_last_commit_timestamp_seconds"], "stream")
	if commits["user"] != float64(started.Add(time.Minute).Unix()) || commits["course"] != float64(started.Add(24*time.Hour+time.Minute).Unix()) {
		t.Errorf("last commits %v", commits)
	}
	if got := values(fams["sepipe_last_run_step_duration_seconds"], "step"); len(got) != 0 {
		t.Errorf("the first run's steps stayed: %v", got)
	}
	if got := values(fams["sepipe_quota_remaining_requests"], ""); got[""] != 40 {
		t.Errorf("quota remaining %v", got)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("the folder holds %d files, want the metrics file only", len(ents))
	}
}

// TestRequestsByInterfaceAndStatus: the client's observer counts each
// attempt by interface and status, and retries apart.
func TestRequestsByInterfaceAndStatus(t *testing.T) {
	m := monitor.New("")
	m.ObserveRequest(extract.IfaceReporting, 200, false, 10*time.Millisecond)
	m.ObserveRequest(extract.IfaceReporting, 429, false, time.Millisecond)
	m.ObserveRequest(extract.IfaceReporting, 200, true, time.Millisecond)
	m.ObserveRequest(extract.IfaceV3, 0, false, time.Second)
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fams := promserver.ParseFile(t, path)
	got := map[string]float64{}
	for _, mm := range fams["sepipe_requests_total"].Metric {
		var iface, code string
		for _, l := range mm.Label {
			switch l.GetName() {
			case "interface":
				iface = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		got[iface+" "+code] = mm.Counter.GetValue()
	}
	if got["reporting 200"] != 2 || got["reporting 429"] != 1 || got["v3 0"] != 1 || len(got) != 3 {
		t.Errorf("requests %v", got)
	}
	if r := values(fams["sepipe_request_retries_total"], "interface"); r["reporting"] != 1 || len(r) != 1 {
		t.Errorf("retries %v", r)
	}
}

// TestHandlerServesMetricsAndProbes: /metrics in the text format (with
// Go's and the process's), /healthz 200, /readyz 200 or 503 naming each
// cause; Serves routes exactly those.
func TestHandlerServesMetricsAndProbes(t *testing.T) {
	m := monitor.New("")
	var causes []string
	srv := httptest.NewServer(monitor.Handler(m, func(context.Context) []string { return causes }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_resident_memory_bytes") || !strings.Contains(body, "sepipe_runs_total") {
		t.Errorf("/metrics: %d\n%.500s", code, body)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
	causes = []string{"the event spool /x cannot be written: read-only file system"}
	code, body = get("/readyz")
	var r struct {
		Status string   `json:"status"`
		Causes []string `json:"causes"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != 503 || r.Status != "not ready" || len(r.Causes) != 1 || r.Causes[0] != causes[0] {
		t.Errorf("/readyz not ready: %d %s (%v)", code, body, err)
	}
	for _, c := range []struct {
		method, path string
		want         bool
	}{{"GET", "/metrics", true}, {"HEAD", "/healthz", true}, {"GET", "/readyz", true}, {"POST", "/metrics", false}, {"GET", "/events", false}, {"GET", "/metrics/x", false}} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if monitor.Serves(r) != c.want {
			t.Errorf("Serves(%s %s) = %v", c.method, c.path, !c.want)
		}
	}
}

// TestPushgatewayAddressIsChecked: not a URL, not http(s), or a URL with a
// credential (never echoed) is refused.
func TestPushgatewayAddressIsChecked(t *testing.T) {
	for raw, want := range map[string]string{
		"pushgateway:9091":               "want an http(s) URL",
		"ftp://pushgateway":              "want an http(s) URL",
		"http://bob:s3cret@gateway:9091": "user information",
		"http://gateway:9091":            "",
	} {
		err := monitor.CheckPushgateway(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", raw, err, want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error echoes the password: %v", raw, err)
		}
	}
}
