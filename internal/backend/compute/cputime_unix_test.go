//go:build unix

package compute

import (
	"syscall"
	"time"
)

// ProcessCPU is the process's user and system CPU time so far (every
// thread: a software driver's included), for the benchmarks of this
// package and of compute_test; 0 where it cannot be read.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
