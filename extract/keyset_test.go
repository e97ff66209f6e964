package extract

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// addAll adds keys [from, to) at their own number as position and fails
// on any duplicate.
func addAll(t testing.TB, k *keySet, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		d, err := k.add(keyName(i), i)
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		if d != nil {
			t.Fatalf("add %d: a duplicate of distinct keys: %+v", i, *d)
		}
	}
}

// A key set past its memory spills to a file in its folder, which it
// removes at once, and finds a key read twice whether its first reading
// was before or after the spill: at the latest when the read ends.
func TestKeySetSpills(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first, at int // the key read twice: first and again at at
	}{
		{"first read while in memory", 10, 150_000},
		{"first read after the spill", 90_000, 150_000},
		{"twice after the filter grew", 140_000, 149_999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			k := newKeySet(dir, 100)
			defer k.close()
			addAll(t, k, 0, tc.at)
			if k.m != nil || k.file == nil {
				t.Fatal("did not spill past its memory")
			}
			if k.capacity < k.keys {
				t.Fatalf("filter for %d keys holds %d", k.capacity, k.keys)
			}
			if runtime.GOOS != "windows" {
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("spill file left in the folder while open: %v", ents)
				}
			}
			d, err := k.add(keyName(tc.first), tc.at)
			if err == nil && d == nil {
				d, err = k.finish()
			}
			if err != nil {
				t.Fatal(err)
			}
			if d == nil || d.Key != keyName(tc.first) || d.At != tc.at || d.Prev != tc.first {
				t.Fatalf("duplicate = %+v, want %s at %d, first at %d", d, keyName(tc.first), tc.at, tc.first)
			}
		})
	}
	// In memory, a duplicate is found at once.
	k := newKeySet(t.TempDir(), 100)
	addAll(t, k, 0, 50)
	if d, err := k.add(keyName(7), 60); err != nil || d == nil || d.Prev != 7 {
		t.Fatalf("in memory: %+v, %v", d, err)
	}
}

// The filter passes about one unseen key in a thousand for seen: each is a
// suspect checked against the file, so a pass over the file comes every
// few million keys, not every few thousand; and when it does, nothing
// distinct is taken for a duplicate.
func TestKeySetFilterFalsePositives(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	k := newKeySet(t.TempDir(), 1000)
	defer k.close()
	const n = 1_000_000
	suspects := 0
	for i := range n {
		before := len(k.suspects)
		d, err := k.add(keyName(i), i)
		if err != nil || d != nil {
			t.Fatalf("add %d: %+v, %v", i, d, err)
		}
		if len(k.suspects) != before {
			suspects++
		}
	}
	if d, err := k.finish(); err != nil || d != nil {
		t.Fatalf("finish: %+v, %v", d, err)
	}
	if suspects == 0 || suspects > n/200 {
		t.Fatalf("%d suspects among %d distinct keys; want some, and under 0.5 %%", suspects, n)
	}
	t.Logf("%d suspects among %d keys (%.3f %%)", suspects, n, 100*float64(suspects)/n)
}

// A spill folder that cannot hold the file fails the read with the
// file's error, not a wrong answer.
func TestKeySetSpillError(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	k := newKeySet(notDir, 10)
	defer k.close()
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = k.add(keyName(i), i)
	}
	if err == nil || !strings.Contains(err.Error(), "spill the read's 10 row keys") {
		t.Fatalf("err = %v", err)
	}
	// A folder that does not exist yet is made.
	k2 := newKeySet(filepath.Join(t.TempDir(), "a", "tmp"), 10)
	defer k2.close()
	addAll(t, k2, 0, 20)
	if k2.file == nil {
		t.Fatal("did not spill into a new folder")
	}
}

// BenchmarkKeySet reports the heap a read's key set keeps per key, in
// memory and spilled (issue 14: at 5 M keys the map and the heap growth
// it caused were 300 MB of a merge's 499 MB peak).
func BenchmarkKeySet(b *testing.B) {
	const n = 2_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = keyName(i)
	}
	for _, bc := range []struct {
		name string
		mem  int
	}{{"map", n + 1}, {"spilled", defaultMemKeys}} {
		b.Run(bc.name, func(b *testing.B) {
			var heap uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				k := newKeySet(b.TempDir(), bc.mem)
				for i, key := range keys {
					if _, err := k.add(key, i); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(k)
				k.close()
			}
			b.ReportMetric(float64(heap)/n, "heap-B/key")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
		})
	}
}
