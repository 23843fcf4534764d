//go:build cgo && !unix

package vulkan

import "time"

// processCPUTime is unknown here: a software driver's long submission is
// held to waitTimeout like any other.
func processCPUTime() (time.Duration, bool) { return 0, false }
