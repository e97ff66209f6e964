//go:build !unix

package flock

import "context"

// TryLock is a no-op where flock is not available: do not point two
// sepipe processes at one output folder there.
func TryLock(path string, busy error) (unlock func(), err error) { return func() {}, nil }

// Lock is a no-op where flock is not available.
func Lock(ctx context.Context, path string, o Options) (unlock func(), err error) {
	return func() {}, nil
}

// Wanted is always false where flock is not available.
func Wanted(path string) bool { return false }

// Available: the locks are no-ops here.
const Available = false
