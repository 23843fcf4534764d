//go:build !linux

package simd

import "time"

// threadTime reports no thread CPU time off Linux.
func threadTime() (time.Duration, bool) { return 0, false }
