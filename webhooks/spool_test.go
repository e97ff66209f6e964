package webhooks_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/sepipe/sepipe/internal/webhooktest"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/webhooks"
)

func openSpool(t *testing.T, dir string, opts ...webhooks.SpoolOption) *webhooks.Spool {
	t.Helper()
	s, err := webhooks.OpenSpool(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	sort.Strings(m)
	return m
}

func TestSpoolGroupCommitReplayAndDedup(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, webhooks.WithSegmentSize(4096))
	ctx := context.Background()
	var wg sync.WaitGroup
	dups := make([]bool, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := s.Accept(ctx, webhooktest.Received(i%200)) // every event twice, concurrently
			if err != nil {
				t.Error(err)
			}
			dups[i] = dup
		}()
	}
	wg.Wait()
	nd := 0
	for _, d := range dups {
		if d {
			nd++
		}
	}
	if nd != 200 || s.Pending() != 200 {
		t.Fatalf("%d duplicates, %d pending; want 200 and 200", nd, s.Pending())
	}
	if len(segments(t, dir)) < 2 {
		t.Errorf("no rotation at 4 KiB: %v", segments(t, dir))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(ctx, webhooktest.Received(999)); err == nil {
		t.Error("accepted after Close")
	}

	s = openSpool(t, dir)
	defer s.Close()
	evs, upTo := s.Unloaded(1000)
	if len(evs) != 200 || upTo == 0 {
		t.Fatalf("replayed %d events", len(evs))
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		var i int
		fmt.Sscanf(ev.ID, "ev-%05d", &i)
		want := webhooktest.Received(i)
		if seen[ev.ID] || string(ev.Raw) != string(want.Raw) || !ev.Time.Equal(want.Time) || !ev.ReceivedAt.Equal(want.ReceivedAt) ||
			ev.Subscription != "lms" || ev.Type != want.Type {
			t.Fatalf("replayed %+v, want %+v", ev, want)
		}
		seen[ev.ID] = true
	}
	if dup, err := s.Accept(ctx, webhooktest.Received(7)); err != nil || !dup {
		t.Errorf("redelivery after replay: dup %v, %v", dup, err)
	}
	if err := s.MarkLoaded(upTo); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 0 || len(segments(t, dir)) != 1 {
		t.Errorf("after loading all: %d pending, segments %v", s.Pending(), segments(t, dir))
	}
	if fi, err := os.Stat(segments(t, dir)[0]); err != nil || fi.Size() != 0 {
		t.Errorf("the remaining segment is not the fresh empty one: %v %v", fi, err)
	}
}

func TestSpoolMarkLoadedKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, webhooks.WithSegmentSize(1))
	ctx := context.Background()
	for i := range 10 {
		if _, err := s.Accept(ctx, webhooktest.Received(i)); err != nil {
			t.Fatal(err)
		}
	}
	evs, upTo := s.Unloaded(4)
	if len(evs) != 4 || evs[0].ID != "ev-00000" || evs[3].ID != "ev-00003" {
		t.Fatalf("first batch %v", evs)
	}
	if err := s.MarkLoaded(upTo); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openSpool(t, dir)
	defer s.Close()
	evs, _ = s.Unloaded(100)
	if len(evs) != 6 || evs[0].ID != "ev-00004" {
		t.Fatalf("after loading 4 of 10 and reopening: %d events, first %v", len(evs), evs[0].ID)
	}
}

// TestSpoolTornTail cuts the last record at every byte and flips a bit in
// it: replay keeps the whole records before it, truncates the rest, and
// appends after them.
func TestSpoolTornTail(t *testing.T) {
	base := t.TempDir()
	s := openSpool(t, base)
	for i := range 3 {
		if _, err := s.Accept(context.Background(), webhooktest.Received(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	segs := segments(t, base)
	full, _ := os.ReadFile(segs[len(segs)-1])
	if len(full) == 0 {
		segs = segs[:len(segs)-1]
		full, _ = os.ReadFile(segs[len(segs)-1])
	}
	recLen := func(off int) int { return 8 + int(binary.BigEndian.Uint32(full[off:off+4])) }
	two := recLen(0) + recLen(recLen(0)) // the first two records
	damages := map[string][]byte{"zeros": append(full[:two:two], make([]byte, 40)...)}
	for cut := two + 1; cut < len(full); cut += 7 {
		damages[fmt.Sprintf("cut %d", cut)] = full[:cut]
	}
	flipped := append([]byte(nil), full...)
	flipped[len(flipped)-5] ^= 0x10
	damages["bit flip"] = flipped
	for name, data := range damages {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, filepath.Base(segs[len(segs)-1]))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			s := openSpool(t, dir)
			evs, _ := s.Unloaded(10)
			if len(evs) != 2 || evs[1].ID != "ev-00001" {
				t.Fatalf("replayed %d events", len(evs))
			}
			if fi, _ := os.Stat(path); fi.Size() != int64(two) {
				t.Errorf("torn tail not truncated: %d bytes, want %d", fi.Size(), two)
			}
			if dup, err := s.Accept(context.Background(), webhooktest.Received(2)); err != nil || dup {
				t.Fatalf("the torn event must be accepted anew: dup %v %v", dup, err)
			}
			s.Close()
			s = openSpool(t, dir)
			defer s.Close()
			if n := s.Pending(); n != 3 {
				t.Errorf("after re-accepting: %d pending, want 3", n)
			}
		})
	}
}

func TestSpoolRemember(t *testing.T) {
	s := openSpool(t, t.TempDir(), webhooks.WithDedupWindow(2))
	defer s.Close()
	s.Remember("a", "b")
	ctx := context.Background()
	if dup, _ := s.Accept(ctx, &service.Event{ID: "a", Type: "x"}); !dup {
		t.Error("a remembered id is not a duplicate")
	}
	s.Accept(ctx, &service.Event{ID: "c", Type: "x"}) // evicts a
	s.Accept(ctx, &service.Event{ID: "d", Type: "x"}) // evicts b
	if dup, _ := s.Accept(ctx, &service.Event{ID: "a", Type: "x"}); dup {
		t.Error("an id out of the window is still a duplicate")
	}
}

func BenchmarkSpoolAcceptParallel(b *testing.B) {
	s, err := webhooks.OpenSpool(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n sync.Mutex
	i := 0
	b.SetParallelism(50)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Lock()
			i++
			ev := webhooktest.Received(i)
			n.Unlock()
			if _, err := s.Accept(context.Background(), ev); err != nil {
				b.Error(err)
			}
		}
	})
}
