//go:build unix

package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// poll is how often a waiting Lock tries again.
const poll = 50 * time.Millisecond

// Available: the locks are real here (flock(2)), and Wanted answers.
const Available = true

// TryLock takes an exclusive, non-blocking flock on path (created if
// needed) and writes this process's pid into it; busy is the error wrapped
// when another process holds it, with the holder's pid.
func TryLock(path string, busy error) (unlock func(), err error) {
	unlock, err = Lock(context.Background(), path, Options{Busy: busy})
	var h *HeldError
	if errors.As(err, &h) {
		return nil, fmt.Errorf("%w (%s held by pid %s)", busy, path, h.Holder)
	}
	return unlock, err
}

// Lock takes an exclusive flock on path (created with o.Perm if needed),
// waiting as o says, and writes this process's pid (and o.Note) into the
// file for whoever finds it held. When the wait ends with the lock held
// elsewhere the error is a *HeldError wrapping o.Busy; when ctx ends
// first, ctx's cause.
func Lock(ctx context.Context, path string, o Options) (unlock func(), err error) {
	perm := o.Perm
	if perm == 0 {
		perm = 0o644
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	deadline := time.Now().Add(o.Wait)
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			note := strconv.Itoa(os.Getpid())
			if o.Note != "" {
				note += " " + o.Note
			}
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(note+"\n"), 0)
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if o.Wait != 0 && o.Want != "" && !waiting {
			// Best effort: a waiter that cannot say so still waits.
			if release, err := want(o.Want, perm); err == nil {
				defer release()
			}
			waiting = true
		}
		if o.Wait >= 0 && !time.Now().Before(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, &HeldError{Path: path, Holder: strings.TrimSpace(string(holder)), Waited: o.Wait, Err: o.Busy}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, context.Cause(ctx))
		case <-time.After(poll):
		}
	}
}

// want holds a shared lock on path while a Lock waits (Options.Want).
// The blocking flock waits only for a Wanted probe, which holds the
// exclusive lock for an instant.
func want(path string, perm os.FileMode) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Wanted reports whether a Lock is waiting with Options.Want set to
// path: the holder of that lock should finish, or give it up, soon.
func Wanted(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false // no one has ever waited
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
