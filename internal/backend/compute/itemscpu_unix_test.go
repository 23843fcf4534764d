//go:build unix

package compute

import (
	"syscall"
	"time"
)

// benchCPU is the process's CPU time so far (user and system, every
// thread: a software driver's included), 0 where it cannot be read.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
