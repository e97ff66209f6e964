//go:build !unix

package bench

import "time"

// processCPU is 0 where getrusage(2) is not available: the bench reports
// no CPU time there.
func processCPU() time.Duration { return 0 }
