//go:build unix

package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockOut takes an exclusive, non-blocking lock on <out>/.sepipe/lock, so
// two runs never write one output folder at once. The kernel drops the lock
// when the process dies, so a killed run never leaves it stuck.
func lockOut(out string) (unlock func(), err error) {
	dir := filepath.Join(out, ".sepipe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", out, err)
	}
	return lockFile(filepath.Join(dir, "lock"), ErrBusy)
}

// lockFile takes an exclusive, non-blocking flock on path (created if
// needed); busy is the error wrapped when another process holds it.
func lockFile(path string, busy error) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("%w (%s held by pid %s)", busy, path, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
