//go:build unix

package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var errBusy = errors.New("folder busy")

// flock(2) locks belong to an open file description, so a second open in
// the same process contends like another process would.
func TestTryLockRefusesWhileHeldAndNamesHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	unlock, err := TryLock(path, errBusy)
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(path, errBusy)
	if !errors.Is(err, errBusy) {
		t.Fatalf("second TryLock: %v, want %v", err, errBusy)
	}
	if pid := strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), "pid "+pid) {
		t.Errorf("error %q does not name the holder pid %s", err, pid)
	}
	unlock()
	unlock2, err := TryLock(path, errBusy)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}

func TestLockWaitsForRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token.lock")
	unlock, err := Lock(context.Background(), path, Options{Perm: 0o600, Note: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode: %v %v", fi, err)
	}
	go func() { time.Sleep(150 * time.Millisecond); unlock() }()
	unlock2, err := Lock(context.Background(), path, Options{Wait: -1, Note: "second"})
	if err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
	defer unlock2()
	b, _ := os.ReadFile(path)
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid())+" second" {
		t.Errorf("lock file holds %q after the second Lock", got)
	}
}

func TestLockBoundedWaitGivesHeldError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.lock")
	unlock, err := Lock(context.Background(), path, Options{Note: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = Lock(context.Background(), path, Options{Wait: 120 * time.Millisecond, Busy: errBusy})
	var h *HeldError
	if !errors.As(err, &h) || !errors.Is(err, errBusy) {
		t.Fatalf("bounded wait: %v, want a HeldError wrapping %v", err, errBusy)
	}
	if !strings.HasSuffix(h.Holder, " writer") || h.Waited != 120*time.Millisecond {
		t.Errorf("HeldError = %+v", h)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("shutting down")
	go func() { time.Sleep(100 * time.Millisecond); cancel(stop) }()
	if _, err := Lock(ctx, path, Options{Wait: -1}); !errors.Is(err, stop) {
		t.Fatalf("Lock after the context ended: %v, want %v", err, stop)
	}
}

func TestWantedWhileAnotherLockWaits(t *testing.T) {
	dir := t.TempDir()
	path, wantPath := filepath.Join(dir, "db.lock"), filepath.Join(dir, "db.want")
	if Wanted(wantPath) {
		t.Fatal("Wanted before anyone waited")
	}
	unlock, err := Lock(context.Background(), path, Options{Want: wantPath})
	if err != nil {
		t.Fatal(err)
	}
	if Wanted(wantPath) {
		t.Fatal("Wanted while no one waits")
	}
	got := make(chan error, 1)
	go func() {
		u, err := Lock(context.Background(), path, Options{Wait: -1, Want: wantPath})
		if err == nil {
			u()
		}
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !Wanted(wantPath) {
		if time.Now().After(deadline) {
			t.Fatal("a waiting Lock was never Wanted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatalf("the waiting Lock: %v", err)
	}
	if Wanted(wantPath) {
		t.Error("still Wanted after the waiter took the lock and let it go")
	}
	// A Lock that does not wait never says it wants the lock.
	unlock, err = Lock(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := Lock(context.Background(), path, Options{Want: wantPath}); err == nil {
		t.Fatal("second Lock without a wait succeeded")
	}
	if Wanted(wantPath) {
		t.Error("Wanted after a Lock that does not wait")
	}
}

// TestLockWaitsWhenItCannotSayItWants: a Want file that cannot be opened
// does not stop a Lock from waiting.
func TestLockWaitsWhenItCannotSayItWants(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db.lock")
	unlock, err := Lock(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(150 * time.Millisecond); unlock() }()
	u, err := Lock(context.Background(), path, Options{Wait: time.Minute, Want: filepath.Join(dir, "missing", "db.want")})
	if err != nil {
		t.Fatalf("waiting Lock with an unusable Want: %v", err)
	}
	u()
}
