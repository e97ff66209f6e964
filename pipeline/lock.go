package pipeline

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sepipe/sepipe/internal/flock"
)

// lockOut takes an exclusive, non-blocking lock on <out>/.sepipe/lock, so
// two runs never write one output folder at once. The kernel drops the lock
// when the process dies, so a killed run never leaves it stuck.
func lockOut(out string) (unlock func(), err error) {
	dir := filepath.Join(out, ".sepipe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", out, err)
	}
	return flock.TryLock(filepath.Join(dir, "lock"), ErrBusy)
}
