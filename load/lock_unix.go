//go:build unix

package load

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

// lockState takes the exclusive flock that serializes sepipe's processes
// on one working database (a sync's commit, a listen's batch, a
// publish), waiting up to wait for it. The kernel drops it when the
// process dies, so a killed run never leaves it stuck.
func lockState(ctx context.Context, path string, wait time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+processName(os.Getpid())+"\n"), 0)
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !time.Now().Before(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("%s: %w: another sepipe process (pid %s) has been writing for longer than %s",
				path, ErrWarehouseLocked, strings.TrimSpace(string(holder)), wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeLockHolder reports the process holding a write lock on the DuckDB
// file at path (DuckDB takes an fcntl write lock for a read-write
// connection, a read lock for a read-only one): its pid and program, or
// ok false when no other process holds one.
func writeLockHolder(path string) (pid int, program string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type != syscall.F_WRLCK {
		return 0, "", false
	}
	return int(lk.Pid), processName(int(lk.Pid)), true
}

// processName is a process's program as the kernel names it ("" when
// unknown).
func processName(pid int) string {
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
		return exe
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}
