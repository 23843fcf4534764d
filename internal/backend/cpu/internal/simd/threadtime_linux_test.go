package simd

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadTime returns the CPU time of the calling OS thread.
func threadTime() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
