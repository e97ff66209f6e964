//go:build unix

package load

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

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
