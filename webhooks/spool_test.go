package webhooks_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestNoEventIsAcknowledgedThatTheSpoolCannotReplay pins the ceiling of a
// spooled event: a spool record holds at most 64 MiB, and replay takes a
// longer one for a torn write (dropping it and what follows it in its
// segment). So NewReceiver refuses a max body above
// MaxDeliveryBodyCeiling, naming the setting and the ceiling; a delivery
// at the ceiling, with the longest id and type, is answered 200 and comes
// back at replay with the event after it; and an event whose record would
// still be too long (a GET query whose event grows when rebuilt as JSON)
// is answered 413, never 200, and nothing is spooled.
func TestNoEventIsAcknowledgedThatTheSpoolCannotReplay(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir)
	defer func() { s.Close() }()
	for _, n := range []int64{80 << 20, webhooks.MaxDeliveryBodyCeiling + 1} {
		_, err := webhooks.NewReceiver(s, []string{webhooktest.Secret}, webhooks.WithMaxBody(n))
		if err == nil || !strings.Contains(err.Error(), "max body") || !strings.Contains(err.Error(), fmt.Sprint(webhooks.MaxDeliveryBodyCeiling)) {
			t.Fatalf("max body %d: %v; want an error naming the max body and the ceiling %d", n, err, webhooks.MaxDeliveryBodyCeiling)
		}
	}
	rc, err := webhooks.NewReceiver(s, []string{webhooktest.Secret}, webhooks.WithMaxBody(webhooks.MaxDeliveryBodyCeiling))
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(method string, body []byte) *httptest.ResponseRecorder {
		ts := time.Now().Unix()
		target := "/hook?subscription=lms"
		var req *http.Request
		if method == http.MethodGet {
			target = "/hook?" + string(body)
			req = httptest.NewRequest(method, target, nil)
		} else {
			req = httptest.NewRequest(method, target, bytes.NewReader(body))
		}
		req.Header.Set(webhooks.SignatureHeader, webhooktest.Sign(webhooktest.Secret, body, ts))
		req.Header.Set(webhooks.SignatureTimestampHeader, fmt.Sprint(ts))
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w
	}
	id, typ := strings.Repeat("i", 256), strings.Repeat("t", 256)
	head := `{"type":"` + typ + `","specversion":1,"id":"` + id + `","data":{"pad":"`
	big := []byte(head + strings.Repeat("x", webhooks.MaxDeliveryBodyCeiling-len(head)-3) + `"}}`)
	if len(big) != webhooks.MaxDeliveryBodyCeiling {
		t.Fatalf("test body of %d bytes, want %d", len(big), webhooks.MaxDeliveryBodyCeiling)
	}
	if w := deliver(http.MethodPost, big); w.Code != http.StatusOK {
		t.Fatalf("an event at the ceiling: %d %s", w.Code, w.Body)
	}
	if w := deliver(http.MethodPost, webhooktest.Event("small-1")); w.Code != http.StatusOK {
		t.Fatalf("small event: %d %s", w.Code, w.Body)
	}
	// 12 MiB of '<' in a GET query become 72 MiB of JSON (\u003c each).
	query := []byte("type=COURSE_COMPLETED&id=big-get&data=%22" + strings.Repeat("<", 12<<20) + "%22")
	w := deliver(http.MethodGet, query)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "big-get") || !strings.Contains(w.Body.String(), "limit") {
		t.Fatalf("an event too large for a spool record: %d %.200s; want 413 naming the event and the limit", w.Code, w.Body)
	}
	if n := s.Pending(); n != 2 {
		t.Fatalf("%d pending, want 2 (the event answered 413 is not spooled)", n)
	}
	s.Close() // nothing loaded: as after a kill -9 before the batch

	s = openSpool(t, dir)
	evs, _ := s.Unloaded(10)
	if len(evs) != 2 || evs[0].ID != id || !bytes.Equal(evs[0].Raw, big) || evs[1].ID != "small-1" {
		t.Fatalf("replay returned %d events; want the event at the ceiling, whole, then small-1 (both were answered 200)", len(evs))
	}
}

// TestFailedCommitFailsOnlyItsAccepts pins what a failed write or fsync (a
// full disk) costs: the Accepts of that commit fail (503, the service
// retries), and the spool takes events again as soon as the disk does.
// The segment is cut back to its last whole record; when that cut (or its
// fsync) fails too, the next commit starts a new segment rather than write
// after torn bytes. Replay then returns every acknowledged event and nothing else
// (a record written whole before its fsync failed may come back too: it
// was retried, and the warehouse's primary key keeps one).
func TestFailedCommitFailsOnlyItsAccepts(t *testing.T) {
	for name, faults := range map[string]int{
		"write":                webhooks.FailWrite,
		"fsync":                webhooks.FailSync,
		"write, then truncate": webhooks.FailWrite | webhooks.FailTruncate,
		"fsync, then truncate": webhooks.FailSync | webhooks.FailTruncate,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSpool(t, dir)
			defer func() { s.Close() }()
			ctx := context.Background()
			accept := func(i int) error {
				_, err := s.Accept(ctx, webhooktest.Received(i))
				return err
			}
			acked := []int{0, 1}
			for _, i := range acked {
				if err := accept(i); err != nil {
					t.Fatal(err)
				}
			}
			before := len(segments(t, dir))
			heal := webhooks.BreakSegment(s, faults)
			if err := accept(2); err == nil {
				t.Fatal("a failed commit was acknowledged")
			}
			heal() // space is back
			for _, i := range []int{4, 5, 2} {
				dup, err := s.Accept(ctx, webhooktest.Received(i))
				if err != nil {
					t.Fatalf("event %d after the failure: %v (the spool refuses for ever)", i, err)
				}
				if dup {
					t.Fatalf("event %d: answered as a duplicate, but its first commit failed", i)
				}
				acked = append(acked, i)
			}
			if n := s.Pending(); n != len(acked) {
				t.Fatalf("%d pending, want %d", n, len(acked))
			}
			wantSegs := before
			if faults&(webhooks.FailTruncate|webhooks.FailSync) != 0 {
				wantSegs++ // the cut failed, or its fsync did
			}
			if n := len(segments(t, dir)); n != wantSegs {
				t.Fatalf("%d segments, want %d (a new one only when the cut could not be made durable)", n, wantSegs)
			}
			s.Close()

			s = openSpool(t, dir)
			evs, _ := s.Unloaded(100)
			got := map[string]int{}
			for _, ev := range evs {
				got[ev.ID]++
			}
			for _, i := range acked {
				id := webhooktest.Received(i).ID
				if got[id] == 0 {
					t.Errorf("acknowledged event %s is not replayed", id)
				}
				delete(got, id)
			}
			if len(got) > 0 {
				t.Errorf("replay returned events never acknowledged: %v", got)
			}
		})
	}
}

// TestSpoolRecoversAfterDiskFull: a moment of a really full disk (a 1 MiB
// tmpfs; needs root to mount, skipped elsewhere) answers 503, and once
// space is back deliveries are stored again and replayed, the event of the
// failed commit only from its retry.
func TestSpoolRecoversAfterDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "events")
	s := openSpool(t, dir)
	defer func() { s.Close() }()
	rc, err := webhooks.NewReceiver(s, []string{webhooktest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	if st := webhooktest.Deliver(srv.Client(), srv.URL, webhooktest.Event("before"), webhooktest.Secret, 0); st != http.StatusOK {
		t.Fatalf("before the disk fills: %d", st)
	}
	// Fill the disk.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("z", 4096))
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	big := []byte(`{"type":"COURSE_COMPLETED","id":"during","data":"` + strings.Repeat("d", 64<<10) + `"}`)
	if st := webhooktest.Deliver(srv.Client(), srv.URL, big, webhooktest.Secret, 0); st != http.StatusServiceUnavailable {
		t.Fatalf("disk full: %d, want 503", st)
	}
	// Space is back (logs rotated, an operator freed space).
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for i := range 5 {
		statuses = append(statuses, webhooktest.Deliver(srv.Client(), srv.URL, webhooktest.Event(fmt.Sprintf("after-%d", i)), webhooktest.Secret, 0))
	}
	statuses = append(statuses, webhooktest.Deliver(srv.Client(), srv.URL, big, webhooktest.Secret, 0))
	for _, st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("after space came back, deliveries answered %v; want 200s (the listener keeps running and refuses every event for ever)", statuses)
		}
	}
	s.Close()
	s = openSpool(t, dir)
	evs, _ := s.Unloaded(100)
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	if want := "before after-0 after-1 after-2 after-3 after-4 during"; strings.Join(ids, " ") != want {
		t.Fatalf("replayed %v, want %s", ids, want)
	}
}
