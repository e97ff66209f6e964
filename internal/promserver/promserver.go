package promserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// binary finds a server's binary: the environment variable env, else name
// on PATH; without one the test skips, or fails under CI.
func binary(t testing.TB, env, name, pkg string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("no %s on PATH (apt-get install %s)", name, pkg)
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %s", msg)
		}
		t.Skip(msg)
	}
	return p
}

// Binary is the path of the prometheus server: SEPIPE_PROMETHEUS, else
// prometheus on PATH. Without one the test skips, or fails under CI.
func Binary(t testing.TB) string {
	t.Helper()
	return binary(t, "SEPIPE_PROMETHEUS", "prometheus", "prometheus")
}

// Server is a running Prometheus.
type Server struct {
	URL string // http://127.0.0.1:PORT
	log string // its log file
}

// Target is what a scrape job scrapes.
type Target struct {
	Job  string
	Addr string // HOST:PORT
	Path string // default /metrics
	// HonorLabels keeps the labels the target's series carry (a
	// Pushgateway's job and grouping labels).
	HonorLabels bool
}

// Start runs Prometheus on a free loopback port, scraping targets every
// interval (also its rules' evaluation interval), with the rule files
// given loaded. It is stopped when the test ends.
func Start(t testing.TB, interval time.Duration, rules []string, targets ...Target) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n  scrape_timeout: %s\n", interval, interval, interval)
	if len(rules) > 0 {
		b.WriteString("rule_files:\n")
		for _, r := range rules {
			abs, err := filepath.Abs(r)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  - %q\n", abs)
		}
	}
	b.WriteString("scrape_configs:\n")
	for _, tg := range targets {
		path := tg.Path
		if path == "" {
			path = "/metrics"
		}
		fmt.Fprintf(&b, "  - job_name: %q\n    metrics_path: %q\n    honor_labels: %t\n    static_configs:\n      - targets: [%q]\n", tg.Job, path, tg.HonorLabels, tg.Addr)
	}
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	s := &Server{URL: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	run(t, logf, s.URL+"/-/ready", bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	return s
}

// StartPushgateway runs a Pushgateway (Debian's prometheus-pushgateway,
// or SEPIPE_PUSHGATEWAY) on a free loopback port and returns its
// HOST:PORT; it is stopped when the test ends.
func StartPushgateway(t testing.TB) string {
	t.Helper()
	bin := binary(t, "SEPIPE_PUSHGATEWAY", "prometheus-pushgateway", "prometheus-pushgateway")
	addr := FreeAddr(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "pushgateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, logf, "http://"+addr+"/-/ready", bin, "--web.listen-address="+addr, "--log.level=warn")
	return addr
}

// run starts a server, logging to logf, stops it when the test ends, and
// waits until ready answers 200.
func run(t testing.TB, logf *os.File, ready, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s is not ready after 30 s: %v\n%s", bin, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreeAddr is a free loopback HOST:PORT.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Log is what Prometheus logged.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query through the HTTP API.
func (s *Server) Query(t testing.TB, expr string) []Sample {
	t.Helper()
	out, err := s.query(expr)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return out
}

func (s *Server) query(expr string) ([]Sample, error) {
	resp, err := http.Get(s.URL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", body.Data.ResultType)
	}
	var out []Sample
	for _, r := range body.Data.Result {
		text, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %v", r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// WaitFor queries expr until ok accepts its answer, or fails the test
// after timeout with the last answer: a scrape, or a rule's evaluation,
// comes within an interval or two.
func (s *Server) WaitFor(t testing.TB, expr string, timeout time.Duration, ok func([]Sample) bool) []Sample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := s.query(expr)
		if err == nil && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: after %s: %v %v\nprometheus log:\n%s", expr, timeout, got, err, s.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ParseText reads metrics in Prometheus's text format with client_golang's
// own parser, as the node exporter's textfile collector and a scrape read
// them.
func ParseText(t testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("metrics in the text format: %v", err)
	}
	return fams
}

// ParseFile reads a metrics file in the text format (ParseText).
func ParseFile(t testing.TB, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ParseText(t, f)
}
