package load

import (
	"strings"
	"testing"
)

func TestNamesAreSafeUniqueAndStable(t *testing.T) {
	t.Parallel()
	collections := []string{"themes", "assets"}
	ids := []string{"course", "../../etc", "a/b", "User", "user", "events", "_sepipe_runs", "foo", "foo_history",
		"x[1]", "q?y=1", "k=v", "", "..", "tab\tbed", "assets", "ASSETS", "bad\xff", strings.Repeat("z", 300)}
	n := NewNames(nil)
	n.Assign(ids, collections)
	seen := map[string]string{}
	for _, id := range ids {
		name, ok := n.Name(id)
		if !ok {
			t.Fatalf("%q has no name", id)
		}
		if err := CheckName(name); err != nil {
			t.Errorf("%q -> %v", id, err)
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			t.Errorf("%q and %q both named %q", prev, id, name)
		}
		seen[strings.ToLower(name)] = id
		l := strings.ToLower(name)
		if id != "assets" && (l == "events" || strings.HasPrefix(l, "_sepipe") || strings.HasSuffix(l, "_history") || l == "assets" || l == "themes") {
			t.Errorf("%q took sepipe's own name %q", id, name)
		}
	}
	for id, want := range map[string]string{"course": "course", "foo": "foo", "assets": "assets"} {
		if got, _ := n.Name(id); got != want {
			t.Errorf("%q named %q, want itself", id, got)
		}
	}
	// Stable: a later run with the recorded names and a new colliding id
	// keeps every old name.
	rec := map[string]string{}
	for _, id := range ids {
		rec[id], _ = n.Name(id)
	}
	m := NewNames(rec)
	m.Assign(append([]string{"COURSE", "Foo"}, ids...), collections)
	for _, id := range ids {
		if got, _ := m.Name(id); got != rec[id] {
			t.Errorf("%q moved from %q to %q", id, rec[id], got)
		}
	}
	if got, _ := m.Name("COURSE"); strings.EqualFold(got, "course") {
		t.Errorf("COURSE took course's name %q", got)
	}
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"course", "../x", "User", "events", "a[b]", "\x00", "_sepipe_state", "k=v"} {
		f.Add(s, strings.ToUpper(s))
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		n := NewNames(nil)
		n.Assign([]string{a, b, "themes"}, []string{"themes"})
		na, _ := n.Name(a)
		nb, _ := n.Name(b)
		for _, name := range []string{na, nb} {
			if err := CheckName(name); err != nil {
				t.Fatalf("%q, %q: %v", a, b, err)
			}
		}
		if a != b && strings.EqualFold(na, nb) {
			t.Fatalf("%q and %q collide as %q", a, b, na)
		}
		again := NewNames(nil)
		again.Assign([]string{b, a, "themes"}, []string{"themes"})
		if x, _ := again.Name(a); x != na {
			t.Fatalf("%q named %q, then %q in another order", a, na, x)
		}
	})
}

// TestWatermarkLess: numbers compare as numbers, negatives and integers
// past 2^53 included (as text -50 came after -10; as floats 2^53+1 was
// 2^53); dates compare as their fixed-width text.
func TestWatermarkLess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9", "10", true}, {"10", "9", false},
		{"-50", "-10", true}, {"-10", "-50", false},
		{"9007199254740992", "9007199254740993", true},
		{"1.5", "2", true}, {"-0.5", "-1e-9", true},
		{"2026-01-02T00:00:00.000000Z", "2026-01-10T00:00:00.000000Z", true},
		{"2026-01-10T00:00:00.000000Z", "2026-01-02T00:00:00.000000Z", false},
	} {
		if got := watermarkLess(c.a, c.b); got != c.want {
			t.Errorf("watermarkLess(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestSameRead: a watermark holds for reads with the filters it was saved
// from; a state saved before they were recorded holds for any.
func TestSameRead(t *testing.T) {
	t.Parallel()
	saved := State{ReadFilters: `[{"field":"status","operator":"in","values":["Completed"]}]`, FiltersKnown: true}
	if !saved.SameRead(saved.ReadFilters) || saved.SameRead("[]") {
		t.Error("a known state must hold only for its own filters")
	}
	if old := (State{}); !old.SameRead("[]") || !old.SameRead(saved.ReadFilters) {
		t.Error("a state without recorded filters must hold for any read")
	}
}
