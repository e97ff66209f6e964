package load

import "testing"

// TestRunSettingsForHugePages: what a run's huge pages keep pinned, which
// the load raises its memory limit to (TestLimitForHugePages), and one
// DuckDB thread only when a page was huge.
func TestRunSettingsForHugePages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pages   Pages
		pinned  int64
		threads int
	}{
		{Pages{Largest: 1 << 20}, 2 << 20, 0},
		{Pages{Largest: 200 << 20, HugeBytes: 800 << 20}, 1200 << 20, 1},
		{Pages{}, 0, 0},
	} {
		var o openOptions
		for _, opt := range RunSettings("64MB", tc.pages) {
			opt(&o)
		}
		if o.pinned != tc.pinned || o.threads != tc.threads || o.memoryLimit != "64MB" || !o.anyOrder {
			t.Errorf("pages %+v: %+v, want pinned %d, threads %d", tc.pages, o, tc.pinned, tc.threads)
		}
	}
	for configured, want := range map[string]string{"64MB": "16MiB", "8MB": "8MB", "": "16MiB"} {
		var o openOptions
		for _, opt := range EarlySettings(configured) {
			opt(&o)
		}
		if o.memoryLimit != want || o.threads != 1 || o.lockWait != 0 {
			t.Errorf("early settings of %q: %+v, want %s on one thread", configured, o, want)
		}
	}
}
