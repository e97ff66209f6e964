package webhooks

import (
	"sync/atomic"
	"syscall"
)

// Segment faults a test can switch on (BreakSegment).
const (
	FailWrite    = 1 << iota // a write stops halfway with ENOSPC: a disk that fills mid-record
	FailSync                 // an fsync fails with EIO after a whole write
	FailTruncate             // cutting a failed commit off fails with EIO
)

// BreakSegment makes the spool's active segment fail as faults says until
// heal is called; a segment started later is not broken.
func BreakSegment(s *Spool, faults int) (heal func()) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	b := &brokenFile{segFile: s.f}
	b.faults.Store(int32(faults))
	s.f = b
	return func() { b.faults.Store(0) }
}

type brokenFile struct {
	segFile
	faults atomic.Int32
}

func (f *brokenFile) Write(b []byte) (int, error) {
	if f.faults.Load()&FailWrite != 0 {
		n, _ := f.segFile.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return f.segFile.Write(b)
}

func (f *brokenFile) Sync() error {
	if f.faults.Load()&FailSync != 0 {
		return syscall.EIO
	}
	return f.segFile.Sync()
}

func (f *brokenFile) Truncate(size int64) error {
	if f.faults.Load()&FailTruncate != 0 {
		return syscall.EIO
	}
	return f.segFile.Truncate(size)
}
