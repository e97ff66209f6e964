package monitor_test

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/internal/promserver"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/webhooks"
)

var rulesDir = filepath.Join("..", "..", "deploy", "prometheus")

// TestRulesNameOnlyMetricsSepipeHas: every sepipe_ metric the shipped
// rules (and their unit tests) name is one sepipe exposes, so a renamed
// metric cannot leave an alert that never fires.
func TestRulesNameOnlyMetricsSepipeHas(t *testing.T) {
	m := monitor.New("acme")
	m.Listen(&webhooks.ListenState{})
	m.Delivered(webhooks.OutcomeAccepted)
	m.Loaded(1, 1, time.Millisecond)
	m.Published(time.Millisecond, time.Now())
	m.ObserveRequest(extract.IfaceReporting, 200, true, time.Millisecond)
	m.Run(monitor.Succeeded, &pipeline.Result{Started: time.Now(), Objects: []pipeline.ObjectResult{{Object: "course", Status: pipeline.StatusOK}}},
		[]load.StreamFreshness{{Stream: "course", SnapshotDate: "2026-11-28", CommittedAt: time.Now()}},
		extract.Quota{Known: true, Limit: 10, Remaining: 5, Reset: time.Now().Add(time.Hour)}, time.Now())
	rec := httptest.NewRecorder()
	monitor.Handler(m, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := promserver.ParseText(t, rec.Body)
	names := map[string]bool{}
	for name := range fams {
		names[name] = true
	}
	re := regexp.MustCompile(`\bsepipe_[a-z_]+`)
	for _, file := range []string{"sepipe-rules.yml", "sepipe-rules_test.yml"} {
		b, err := os.ReadFile(filepath.Join(rulesDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range re.FindAllString(string(b), -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if n, ok := strings.CutSuffix(name, suffix); ok && names[n] {
					base = n
				}
			}
			if !names[base] {
				t.Errorf("%s names %s, which sepipe does not expose", file, name)
			}
		}
	}
}

// TestRulesPassPromtool: promtool (Debian's prometheus package) checks
// the rules and runs their unit tests; without it the test skips, or
// fails under CI.
func TestRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and there is no promtool (apt-get install prometheus)")
		}
		t.Skip("no promtool on PATH (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "sepipe-rules.yml"}, {"test", "rules", "sepipe-rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
