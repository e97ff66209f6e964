package pipeline

import (
	"testing"

	"github.com/sepipe/sepipe/load"
)

func TestMemoryForHugePages(t *testing.T) {
	small := []*stagedObject{{largestPage: 1 << 20}}
	huge := []*stagedObject{{largestPage: 200 << 20, hugeBytes: 800 << 20}, nil}
	for _, tc := range []struct {
		configured string
		staged     []*stagedObject
		want       string
	}{
		{"64MB", small, "64MB"},
		{"64MB", huge, "1201MiB"},
		{"2GB", huge, "2GB"}, // a larger setting is kept
		{"512MiB", huge, "1201MiB"},
		{"64MB", []*stagedObject{{table: load.Table{Mode: load.Merge, Rows: 5_000_000}}}, "229MiB"},
		{"64MB", []*stagedObject{{table: load.Table{Mode: load.Merge, Rows: 5_000_000, FullRefresh: true}}}, "64MB"}, // nothing to delete
		{"64MB", []*stagedObject{{table: load.Table{Mode: load.Merge, Rows: 1_000_000}}}, "64MB"},
	} {
		if got := memoryFor(tc.configured, tc.staged); got != tc.want {
			t.Errorf("memoryFor(%q) = %q, want %q", tc.configured, got, tc.want)
		}
	}
	if threadsFor(huge) != 1 || threadsFor(small) != 0 {
		t.Error("one DuckDB thread only when pages are huge")
	}
}

func TestIDText(t *testing.T) {
	for raw, want := range map[string]string{`"01HX"`: "01HX", `123`: "123", `1e3`: "1e3", `null`: "", `{"a":1}`: "", `[1]`: "", `"`: ""} {
		if got := idText(raw); got != want {
			t.Errorf("idText(%s) = %q, want %q", raw, got, want)
		}
	}
}

// TestCPUIdle: the early load runs in the time the processors were idle
// since the last look, at least minSample apart, and not before a first
// window has passed.
func TestCPUIdle(t *testing.T) {
	var idle, total uint64
	c := cpuIdle{read: func() (uint64, uint64, bool) { return idle, total, true }}
	if c.idle() {
		t.Fatal("idle before a window has passed")
	}
	step := func(idleTicks, totalTicks uint64) bool {
		idle, total = idle+idleTicks, total+totalTicks
		c.at = c.at.Add(-minSample) // a window has passed
		return c.idle()
	}
	if !step(90, 100) {
		t.Error("90 % idle: not idle")
	}
	if step(10, 100) {
		t.Error("10 % idle (the fetch keeps the processors busy): idle")
	}
	idle, total = idle+100, total+100
	if c.idle() {
		t.Error("a look within minSample changed the answer")
	}
	if !step(50, 100) {
		t.Error("75 % idle over the window since the last sample (150 of 200): not idle")
	}
	if step(0, 0) {
		t.Error("no processor time passed: idle")
	}
	c = cpuIdle{read: func() (uint64, uint64, bool) { return 0, 0, false }}
	if !c.idle() {
		t.Error("where the processors' times cannot be read, the load runs")
	}
}
