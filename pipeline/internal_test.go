package pipeline

import (
	"errors"
	"slices"
	"testing"
)

func TestIDText(t *testing.T) {
	for raw, want := range map[string]string{`"01HX"`: "01HX", `123`: "123", `1e3`: "1e3", `null`: "", `{"a":1}`: "", `[1]`: "", `"`: ""} {
		if got := idText(raw); got != want {
			t.Errorf("idText(%s) = %q, want %q", raw, got, want)
		}
	}
}

// TestContinuationStreams: what a run reads on a day a quota left streams
// unfinished, by Config.Continuation; streams to rebuild are read in
// every mode.
func TestContinuationStreams(t *testing.T) {
	ids := []string{"course", "user", "assets", "themes"}
	left := func(names ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(names, id) }
	}
	for _, tc := range []struct {
		name       string
		c          Continuation
		unfinished func(string) bool
		refresh    []string
		want       []string
		cont       bool
	}{
		{"default continues", ContinueOrReadAll, left("user", "themes", "gone"), nil, []string{"user", "themes"}, true},
		{"default with a rebuild", ContinueOrReadAll, left("themes"), []string{"course"}, []string{"course", "themes"}, true},
		{"default, nothing left among them", ContinueOrReadAll, left("gone"), nil, ids, false},
		{"read all", ReadAll, left("user"), nil, ids, false},
		{"continue only", ContinueOnly, left("assets"), nil, []string{"assets"}, true},
		{"continue only, nothing left", ContinueOnly, left(), nil, nil, true},
		{"continue only, a rebuild", ContinueOnly, left(), []string{"user"}, []string{"user"}, true},
	} {
		got, cont := tc.c.streams(ids, tc.refresh, tc.unfinished)
		if !slices.Equal(got, tc.want) || cont != tc.cont {
			t.Errorf("%s: %v, continues %v; want %v, %v", tc.name, got, cont, tc.want, tc.cont)
		}
	}
}

// TestRunErrorGroupsOneReason: streams skipped or deferred for one reason
// are named together, the reason said once (a tenant without a Coach
// licence skipped five streams, and the message said the same 403 five
// times); different reasons stay apart, failures stay one by one.
func TestRunErrorGroupsOneReason(t *testing.T) {
	denied := errors.New("reporting: 403 Forbidden: no Coach licence")
	quota := errors.New("request quota exhausted")
	re := &RunError{RunID: "r1", Partial: true,
		Failed: []*ObjectError{{Object: "b", Step: "read", Err: quota}, {Object: "a", Step: "read", Err: quota}},
		Skipped: []*ObjectError{{Object: "course", Step: "list", Err: denied}, {Object: "user", Step: "list", Err: denied},
			{Object: "path\"x", Step: "list", Err: denied}, {Object: "group", Step: "describe", Err: denied}},
		Deferred: []*ObjectError{{Object: "themes", Step: "read", Err: quota}}}
	want := `run r1 partly failed: object "a": read: request quota exhausted; object "b": read: request quota exhausted; ` +
		`skipped objects "course", "user", "path\"x": list: reporting: 403 Forbidden: no Coach licence; ` +
		`skipped object "group": describe: reporting: 403 Forbidden: no Coach licence; ` +
		`deferred object "themes": read: request quota exhausted`
	if got := re.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
