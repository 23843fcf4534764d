//go:build cgo && unix

package vulkan

import (
	"syscall"
	"time"
)

// processCPUTime is the user and system CPU time this process has used,
// the driver's threads included.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
