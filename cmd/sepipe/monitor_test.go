package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/promserver"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/webhooks"
)

// rulesFile is the Prometheus rules sepipe ships.
var rulesFile = filepath.Join("..", "..", "deploy", "prometheus", "sepipe-rules.yml")

// startCommand runs a long-lived sepipe command in this process until the
// test ends (what SIGTERM does: its context is cancelled), and waits until
// addr accepts connections.
func startCommand(t *testing.T, addr string, args ...string) (stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stderr = &syncBuffer{}
	go func() { done <- run(ctx, args, io.Discard, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("sepipe %s: exit %d\n%s", args[0], code, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Errorf("sepipe %s did not stop within a minute of its signal", args[0])
		}
	})
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return stderr
		}
		select {
		case code := <-done:
			t.Fatalf("sepipe %s ended (exit %d) before it served %s:\n%s", args[0], code, addr, stderr.String())
		default:
		}
		if i == 200 {
			t.Fatalf("sepipe %s does not serve %s:\n%s", args[0], addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probe GETs url and returns its status and its JSON body's causes.
func probe(t *testing.T, url string) (int, []string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string   `json:"status"`
		Causes []string `json:"causes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: not JSON: %v", url, err)
	}
	if resp.Header.Get("Content-Type") != "application/json" || body.Status == "" {
		t.Errorf("%s: %s %+v, want a JSON body with a status", url, resp.Header.Get("Content-Type"), body)
	}
	return resp.StatusCode, body.Causes
}

// waitReady polls a /readyz until it answers want (and, for a 503, a
// cause holding cause), and returns its causes.
func waitReady(t *testing.T, url string, want int, cause string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, causes := probe(t, url)
		if code == want && (cause == "" || strings.Contains(strings.Join(causes, "\n"), cause)) {
			return causes
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %q, want %d naming %q", url, code, causes, want, cause)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readOnly makes dir read-only until the function it returns is called: a
// read-only bind mount over it where the test may mount (root, as CI
// runs), else its mode (which root ignores).
func readOnly(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		return func() { os.Chmod(dir, 0o755) }
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot bind-mount %s: %v %s", dir, err, out)
		}
		t.Skipf("cannot bind-mount %s read-only: %v %s", dir, err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		exec.Command("umount", dir).Run()
		t.Fatalf("cannot remount %s read-only: %v %s", dir, err, out)
	}
	var done bool
	restore = func() {
		if !done {
			done = true
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v %s", dir, err, out)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// tableCount counts a warehouse table's rows.
func tableCount(t *testing.T, out, table string) float64 {
	t.Helper()
	n, err := strconv.ParseFloat(queryOne(t, out, "SELECT count(*) FROM "+load.Ident(table)), 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPrometheusScrapesListenAndSchedule is issue 42's operator's view: a
// real Prometheus (Debian's package, with deploy/prometheus's rules)
// scrapes a running 'sepipe listen' (on its own listener) while the fake
// delivers signed events, and a 'sepipe schedule' (on --metrics-addr)
// that runs a sync of the fake into the same folder. Prometheus has the
// deliveries acknowledged equal to the events sent, none refused, every
// stream's rows equal to its table's count, the run's requests, steps
// and peak memory, Go's and the process's metrics, and the rules'
// recorded ages. /healthz and /readyz answer 200, /readyz 503 naming the
// cause while the working database is held by another writer and while
// the spool is read-only, and 200 again after. Then sepipe status exits 0,
// and 1 naming the streams once they are older than --max-age.
func TestPrometheusScrapesListenAndSchedule(t *testing.T) {
	promserver.Binary(t) // skips (fails under CI) before the rest starts
	fake := servicetest.NewServer(servicetest.WithUsers(30), servicetest.WithDeliveryRetryDelays(100*time.Millisecond))
	defer fake.Close()
	setEnv(t, fake)
	listenAddr, scheduleAddr := promserver.FreeAddr(t), promserver.FreeAddr(t)
	code, out, errOut := runCLI(t, "webhooks", "create", "--base-url", fake.URL, "--name", "prom",
		"--url", "http://"+listenAddr+"/events?subscription=prom", "--types", "COURSE_COMPLETED")
	if code != exitOK {
		t.Fatalf("webhooks create: %s", errOut)
	}
	secret := strings.TrimSpace(strings.SplitN(strings.SplitN(out, "signing secret: ", 2)[1], "\n", 2)[0])
	t.Setenv("SEPIPE_WEBHOOK_SECRET", secret)
	dir := t.TempDir()

	startCommand(t, listenAddr, "listen", "--out", dir, "--addr", listenAddr, "--batch-interval", "100ms", "--publish-interval", "200ms")
	// One run, a few seconds from now: a 6-field cron (seconds first) in UTC.
	at := time.Now().UTC().Add(4 * time.Second)
	spec := fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour())
	startCommand(t, scheduleAddr, "schedule", "--base-url", fake.URL, "--out", dir, "--cron", spec, "--time-zone", "UTC",
		"--metrics-addr", scheduleAddr)
	prom := promserver.Start(t, time.Second, []string{rulesFile},
		promserver.Target{Job: "listen", Addr: listenAddr}, promserver.Target{Job: "schedule", Addr: scheduleAddr})

	// Both alive and ready.
	for _, addr := range []string{listenAddr, scheduleAddr} {
		if code, _ := probe(t, "http://"+addr+"/healthz"); code != http.StatusOK {
			t.Errorf("%s/healthz: %d", addr, code)
		}
		waitReady(t, "http://"+addr+"/readyz", http.StatusOK, "")
	}

	// The events: acknowledged as many as sent, none refused, loaded and
	// published.
	sent := fake.Service.Advance(60 * 24 * time.Hour)
	if sent == 0 {
		t.Fatal("the fake sent no events")
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fake.Service.WaitDeliveries(wctx); err != nil {
		t.Fatal(err)
	}
	one := func(s []promserver.Sample) float64 {
		if len(s) != 1 {
			return -1
		}
		return s[0].Value
	}
	prom.WaitFor(t, `sepipe_webhook_deliveries_total{job="listen",outcome="accepted"}`, time.Minute,
		func(s []promserver.Sample) bool { return one(s) == float64(sent) })
	if got := one(prom.Query(t, `sum(sepipe_webhook_deliveries_refused_total{job="listen"})`)); got != 0 {
		t.Errorf("%v deliveries refused, want 0", got)
	}
	if got := one(prom.Query(t, `sepipe_webhook_deliveries_received_total{job="listen"}`)); got != float64(sent) {
		t.Errorf("%v deliveries received, want %d", got, sent)
	}
	prom.WaitFor(t, `sepipe_webhook_events_loaded_total{job="listen"}`, time.Minute,
		func(s []promserver.Sample) bool { return one(s) >= float64(sent) })
	prom.WaitFor(t, `sepipe_webhook_oldest_unpublished_age_seconds{job="listen"} == 0 and sepipe_webhook_spool_events{job="listen"} == 0`, time.Minute,
		func(s []promserver.Sample) bool { return len(s) == 1 })
	prom.WaitFor(t, `sepipe_webhook_last_publish_timestamp_seconds{job="listen"} > 0 and sepipe_webhook_publish_duration_seconds_count{job="listen"} > 0`,
		time.Minute, func(s []promserver.Sample) bool { return len(s) == 1 })

	// The scheduled run: succeeded, each stream's rows its table's count.
	prom.WaitFor(t, `sepipe_runs_total{job="schedule",status="succeeded"}`, 2*time.Minute,
		func(s []promserver.Sample) bool { return one(s) == 1 })
	rows := prom.WaitFor(t, `sepipe_stream_rows{job="schedule"}`, 30*time.Second,
		func(s []promserver.Sample) bool { return len(s) > 0 })
	if n := tableCount(t, dir, "events"); n != float64(sent) {
		t.Errorf("the warehouse holds %v events, want %d", n, sent)
	}
	streams := map[string]bool{}
	for _, s := range rows {
		st := s.Labels["stream"]
		streams[st] = true
		if want := tableCount(t, dir, st); s.Value != want {
			t.Errorf("sepipe_stream_rows{stream=%q} = %v, its table holds %v", st, s.Value, want)
		}
	}
	for _, st := range []string{"course", "user", "userCourseProgress", "assets", "webhook_delivery_logs"} {
		if !streams[st] {
			t.Errorf("no sepipe_stream_rows for %s (have %v)", st, slices.Sorted(maps.Keys(streams)))
		}
	}
	for _, expr := range []string{
		`sepipe_stream_last_commit_timestamp_seconds{job="schedule"}`,
		`sepipe_stream_last_snapshot_date_timestamp_seconds{job="schedule"}`,
		`sepipe_stream_pages{job="schedule"}`,
		`sepipe_stream_rejects{job="schedule"}`,
		`sepipe:stream_last_commit_age:seconds{job="schedule"} < 600`, // the rules file's recording rule
	} {
		prom.WaitFor(t, expr, 30*time.Second, func(s []promserver.Sample) bool { return len(s) == len(rows) })
	}
	for _, expr := range []string{
		`sum(sepipe_requests_total{job="schedule",interface="reporting",code="200"}) > 0`,
		`sepipe_request_duration_seconds_count{job="schedule",interface="reporting"} > 0`,
		`sepipe_last_run_step_duration_seconds{job="schedule",step="fetch"} > 0`,
		`sepipe_last_run_step_duration_seconds{job="schedule",step="load"} > 0`,
		`sepipe_last_run_step_duration_seconds{job="schedule",step="publish"} > 0`,
		`sepipe_last_run_duration_seconds{job="schedule"} > 0`,
		`sepipe_last_success_timestamp_seconds{job="schedule"} > 0`,
		`sepipe_peak_resident_memory_bytes{job="schedule"} > 1e6`,
		`go_goroutines{job="listen"} > 0`,
		`process_resident_memory_bytes{job="schedule"} > 0`,
	} {
		prom.WaitFor(t, expr, 30*time.Second, func(s []promserver.Sample) bool { return len(s) == 1 })
	}
	if firing := prom.Query(t, `ALERTS{alertstate="firing"}`); len(firing) > 0 {
		t.Errorf("alerts fire on a healthy pair: %v", firing)
	}
	// No series carries a credential, the service's URL or an id.
	all := prom.Query(t, `{job=~"listen|schedule"}`)
	for _, s := range all {
		for k, v := range s.Labels {
			if strings.Contains(v, fake.Service.AccessToken()) || strings.Contains(v, fake.Service.APIToken()) ||
				strings.Contains(v, secret) || strings.Contains(v, strings.TrimPrefix(fake.URL, "http://")) {
				t.Errorf("series %v: label %s carries a secret or the service's address", s.Labels, k)
			}
		}
	}

	// Readiness: the working database held by another program for
	// writing, then let go.
	release := holdFile(t, load.Lake{Root: dir}.StatePath(), "rw")
	for _, addr := range []string{listenAddr, scheduleAddr} {
		waitReady(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "working database")
	}
	release()
	for _, addr := range []string{listenAddr, scheduleAddr} {
		waitReady(t, "http://"+addr+"/readyz", http.StatusOK, "")
	}
	// The spool read-only, then writable again.
	restore := readOnly(t, webhooks.SpoolDir(dir))
	causes := waitReady(t, "http://"+listenAddr+"/readyz", http.StatusServiceUnavailable, "event spool")
	if !strings.Contains(strings.Join(causes, "\n"), webhooks.SpoolDir(dir)) {
		t.Errorf("causes %q do not name the spool %s", causes, webhooks.SpoolDir(dir))
	}
	restore()
	waitReady(t, "http://"+listenAddr+"/readyz", http.StatusOK, "")
	if code, _ := probe(t, "http://"+listenAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("listen /healthz after: %d", code)
	}

	// Freshness for people and cron monitors.
	code, out, errOut = runCLI(t, "status", "--out", dir)
	if code != exitOK || !strings.Contains(out, "userCourseProgress") || !strings.Contains(out, "fresh") {
		t.Errorf("status after the run: exit %d\n%s%s", code, out, errOut)
	}
	time.Sleep(1100 * time.Millisecond)
	code, out, errOut = runCLI(t, "status", "--out", dir, "--max-age", "1s", "--format", "json")
	var st struct {
		Fresh   bool     `json:"fresh"`
		Stale   []string `json:"stale"`
		Streams []struct {
			Stream string `json:"stream"`
			Rows   int64  `json:"rows"`
			Stale  bool   `json:"stale"`
		} `json:"streams"`
		LastEventAt *time.Time `json:"last_event_at"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	if code != exitFailed || st.Fresh || len(st.Stale) != len(st.Streams) || len(st.Streams) != len(rows) ||
		!strings.Contains(errOut, "userCourseProgress") || st.LastEventAt == nil {
		t.Errorf("status --max-age 1s: exit %d, %+v\nstderr: %s", code, st, errOut)
	}
}

// syncBuffer is a bytes.Buffer safe for a command's goroutine and the
// test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// byLabel is a family's values by one label's value.
func byLabel(f *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label {
				switch {
				case m.Gauge != nil:
					out[l.GetValue()] = m.Gauge.GetValue()
				case m.Counter != nil:
					out[l.GetValue()] = m.Counter.GetValue()
				}
			}
		}
	}
	return out
}

// TestSyncWritesMetricsFileAndPushes is the one-shot sync's monitoring: a
// sync with --metrics-file writes its run's metrics atomically for the
// node exporter's textfile collector (read back with client_golang's own
// text parser) and with --pushgateway pushes them to a real Pushgateway
// (Debian's) under the tenant's group, which a real Prometheus scrapes:
// the run succeeded, each stream's rows are its table's count in both. A
// hostile tenant's ids appear only in their table names' safe form, and no
// series carries a credential or the service's address. A bad metrics
// file or Pushgateway is a usage error naming the flag or the key.
func TestSyncWritesMetricsFileAndPushes(t *testing.T) {
	fake := servicetest.NewServer(servicetest.WithUsers(10), servicetest.WithHostile())
	defer fake.Close()
	setEnv(t, fake)
	gateway := promserver.StartPushgateway(t)
	prom := promserver.Start(t, time.Second, []string{rulesFile}, promserver.Target{Job: "pushgateway", Addr: gateway, HonorLabels: true})
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	file := filepath.Join(dir, "sepipe.prom")
	cfg := writeConfig(t, dir, fake.URL, out, "")
	mustRun(t, "sync", "--config", cfg, "--metrics-file", file, "--pushgateway", "http://"+gateway)

	fams := promserver.ParseFile(t, file)
	if got := byLabel(fams["sepipe_runs_total"], "status"); got["succeeded"] != 1 || got["failed"] != 0 || got["partial"] != 0 {
		t.Errorf("sepipe_runs_total %v, want one succeeded", got)
	}
	rows := byLabel(fams["sepipe_stream_rows"], "stream")
	if len(rows) < 5 {
		t.Fatalf("sepipe_stream_rows of %d streams: %v", len(rows), rows)
	}
	for stream, n := range rows {
		if want := tableCount(t, out, stream); n != want {
			t.Errorf("file: sepipe_stream_rows{stream=%q} = %v, its table holds %v", stream, n, want)
		}
	}
	if got := byLabel(fams["sepipe_stream_last_commit_timestamp_seconds"], "stream"); len(got) != len(rows) {
		t.Errorf("last commit of %d streams, rows of %d", len(got), len(rows))
	}
	if fams["sepipe_requests_total"] == nil || fams["sepipe_last_run_step_duration_seconds"] == nil || fams["sepipe_peak_resident_memory_bytes"] == nil {
		t.Errorf("the file lacks the run's requests, steps or peak memory: %v", slices.Sorted(maps.Keys(fams)))
	}
	b, _ := os.ReadFile(file)
	for _, secret := range []string{fake.Service.AccessToken(), fake.Service.APIToken(), fake.Service.Password(), strings.TrimPrefix(fake.URL, "http://")} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the metrics file holds a secret or the service's address %q", secret)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.prom.*")); len(leftovers) > 0 {
		t.Errorf("temporary files left beside the metrics file: %v", leftovers)
	}

	// The Pushgateway's copy, through Prometheus.
	pushed := prom.WaitFor(t, `sepipe_stream_rows{job="sepipe"}`, time.Minute,
		func(s []promserver.Sample) bool { return len(s) == len(rows) })
	for _, s := range pushed {
		if s.Value != rows[s.Labels["stream"]] {
			t.Errorf("pushed sepipe_stream_rows{stream=%q} = %v, the file's %v", s.Labels["stream"], s.Value, rows[s.Labels["stream"]])
		}
	}
	prom.WaitFor(t, `sepipe_runs_total{job="sepipe",status="succeeded"}`, 30*time.Second,
		func(s []promserver.Sample) bool { return len(s) == 1 && s[0].Value == 1 })

	// Bad settings: usage errors naming what is at fault, before any run.
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--metrics-file", filepath.Join(dir, "metrics.txt")}, "--metrics-file"},
		{[]string{"--metrics-file", filepath.Join(dir, "nowhere", "m.prom")}, "does not exist"},
		{[]string{"--pushgateway", "pushgateway:9091"}, "--pushgateway"},
		{[]string{"--pushgateway", "http://user:pw@pushgateway:9091"}, "user information"},
	} {
		code, _, errOut := runCLI(t, append([]string{"sync", "--config", cfg}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.msg) || strings.Contains(errOut, ":pw@") {
			t.Errorf("sync %v: exit %d %q, want 2 naming %q", c.args, code, errOut, c.msg)
		}
	}
	bad := writeConfig(t, t.TempDir(), fake.URL, out, "metrics:\n  file: /tmp/sepipe-metrics.txt\n")
	if code, _, errOut := runCLI(t, "sync", "--config", bad); code != exitUsage || !strings.Contains(errOut, "metrics.file") {
		t.Errorf("metrics.file not *.prom: exit %d %q", code, errOut)
	}
}
