//go:build !unix

package load

import (
	"context"
	"time"
)

// lockState does not lock where flock is not available: do not run two
// sepipe processes on one output folder there.
func lockState(ctx context.Context, path string, wait time.Duration) (func(), error) {
	return func() {}, nil
}

// writeLockHolder cannot tell where fcntl locks are not available.
func writeLockHolder(path string) (pid int, program string, ok bool) { return 0, "", false }
