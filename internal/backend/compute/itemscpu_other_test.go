//go:build !unix

package compute

import "time"

// benchCPU is the process's CPU time; not read on this system.
func benchCPU() time.Duration { return 0 }
