package extract

import (
	"errors"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// spillIn makes spill files in dir, unlinked at once, and counts them.
func spillIn(dir string, made *int) func() (*os.File, error) {
	return func() (*os.File, error) {
		f, err := os.CreateTemp(dir, "keys-*")
		if err == nil {
			*made++
			os.Remove(f.Name())
		}
		return f, err
	}
}

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
	t.Parallel()
	for _, tc := range []struct {
		name      string
		first, at int // the key read twice: first and again at at
	}{
		{"first read while in memory", 10, 150_000},
		{"first read after the spill", 90_000, 150_000},
		{"twice after the filter grew", 140_000, 149_999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, made := t.TempDir(), 0
			k := newKeySet(spillIn(dir, &made), 100)
			defer k.close()
			addAll(t, k, 0, tc.at)
			if k.m != nil || k.file == nil || made != 1 {
				t.Fatalf("did not spill past its memory into one file (%d made)", made)
			}
			if k.capacity < k.keys {
				t.Fatalf("filter for %d keys holds %d", k.capacity, k.keys)
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
	made := 0
	k := newKeySet(spillIn(t.TempDir(), &made), 100)
	addAll(t, k, 0, 50)
	if d, err := k.add(keyName(7), 60); err != nil || d == nil || d.Prev != 7 || made != 0 {
		t.Fatalf("in memory: %+v, %v, %d files", d, err, made)
	}
}

// A full filter passes about two unseen keys in a thousand for seen, at
// any size: each is a suspect checked against the file, so a pass over
// the file comes every few million keys, not every few thousand. (Bit
// positions drawn from the bits that also pick the block gave 1.7 % at
// 8 M keys, and more the larger the filter.)
func TestKeyFilterFalsePositives(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("16 MB of filter, 8 M hashes")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 23 // the filter's fourth doubling after a spill at 262,144 keys
	f := newKeyFilter(n)
	for range n {
		f.testAndSet(rng.Uint64())
	}
	const probes = 200_000
	fp := 0
	for range probes {
		if f.testAndSet(rng.Uint64()) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 0.003 {
		t.Fatalf("%d of %d unseen hashes pass for seen (%.2f %%), want under 0.3 %%", fp, probes, 100*rate)
	}
	t.Logf("%d of %d unseen hashes pass for seen (%.3f %%)", fp, probes, 100*float64(fp)/probes)
}

// A read of distinct keys through a spilled set takes nothing for a
// duplicate, and passes over the file rarely.
func TestKeySetDistinctKeys(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a million keys")
	}
	var made int
	k := newKeySet(spillIn(t.TempDir(), &made), 1000)
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
	if suspects > n/200 {
		t.Fatalf("%d suspects among %d distinct keys; want under 0.5 %%", suspects, n)
	}
}

// A duplicate is found by the pass a full list of suspects starts, in the
// middle of the read, and says where the key was read each time, also
// when its first reading was itself a suspect (the filter erred on it).
func TestKeySetChecksMidRead(t *testing.T) {
	t.Parallel()
	var made int
	k := newKeySet(spillIn(t.TempDir(), &made), 10)
	defer k.close()
	k.waitMax = 2 // two suspects start a pass (under 2,048 keys written)
	addAll(t, k, 0, 1000)
	if d, err := k.finish(); err != nil || d != nil { // no suspect of the filter's own waits
		t.Fatalf("distinct keys: %+v, %v", d, err)
	}
	// The first reading of key-1000 a suspect, as if the filter erred.
	h := maphash.String(k.seed, keyName(1000))
	k.filter.testAndSet(h)
	// The key is a slice of its page's keys, as the decoder gives them.
	page := strings.Repeat("x", 40_000) + keyName(1000)
	key := page[40_000:]
	if d, err := k.add(key, 1000); err != nil || d != nil || len(k.suspects) != 1 {
		t.Fatalf("a first reading the filter erred on: %+v, %v, %d suspects", d, err, len(k.suspects))
	}
	if unsafe.StringData(k.suspects[0].key) == unsafe.StringData(key) {
		t.Fatal("a suspect keeps its page's keys: want a copy of its own")
	}
	d, err := k.add(keyName(1000), 1001)
	if err != nil || d == nil {
		t.Fatalf("read twice, add says %+v, %v; want the duplicate at once", d, err)
	}
	if d.Key != keyName(1000) || d.At != 1001 || d.Prev != 1000 {
		t.Fatalf("duplicate = %+v, want key-1000 at 1001, first at 1000", *d)
	}
}

// A spill file that cannot be made leaves the keys in memory, where a
// duplicate is found as before; a spill file that fails later fails the
// read with its error, not a wrong answer, and keeps failing it.
func TestKeySetSpillError(t *testing.T) {
	t.Parallel()
	full := errors.New("no space left on device")
	k := newKeySet(func() (*os.File, error) { return nil, full }, 10)
	defer k.close()
	addAll(t, k, 0, 100)
	if !errors.Is(k.spillErr, full) || !strings.Contains(k.spillErr.Error(), "spill the read's 10 keys") || k.m == nil {
		t.Fatalf("spillErr = %v, map kept: %v", k.spillErr, k.m != nil)
	}
	if d, err := k.add(keyName(42), 100); err != nil || d == nil || d.Prev != 42 {
		t.Fatalf("in memory after a failed spill: %+v, %v", d, err)
	}

	// A file closed under the set once it spilled: the writes fail when
	// the buffer flushes.
	var made int
	k2 := newKeySet(spillIn(t.TempDir(), &made), 10)
	defer k2.close()
	addAll(t, k2, 0, 10)
	if k2.file == nil {
		t.Fatal("did not spill")
	}
	k2.file.Close()
	var err error
	for i := 10; i < 100_000 && err == nil; i++ {
		_, err = k2.add(keyName(i), i)
	}
	if err == nil || !strings.Contains(err.Error(), "spill keys to") {
		t.Fatalf("writes to a closed file: err = %v", err)
	}
	// The error stays: the report reader's other pages may still add keys.
	if _, again := k2.add("another", 1); again != err {
		t.Fatalf("after the error, add says %v, want %v", again, err)
	}
	if _, again := k2.finish(); again != err {
		t.Fatalf("after the error, finish says %v, want %v", again, err)
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
				var made int
				k := newKeySet(spillIn(b.TempDir(), &made), bc.mem)
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
