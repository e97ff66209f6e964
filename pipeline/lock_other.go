//go:build !unix

package pipeline

// lockOut is a no-op where flock is not available; do not point two runs at
// one output folder there.
func lockOut(out string) (unlock func(), err error) { return func() {}, nil }

func lockFile(path string, busy error) (unlock func(), err error) { return func() {}, nil }
