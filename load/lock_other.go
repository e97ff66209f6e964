//go:build !unix

package load

// writeLockHolder cannot tell where fcntl locks are not available.
func writeLockHolder(path string) (pid int, program string, ok bool) { return 0, "", false }

// processName is unknown where /proc is not available.
func processName(int) string { return "" }
