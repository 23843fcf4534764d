//go:build !unix

package compute_test

import "time"

// processCPU is 0 where getrusage is missing: the benchmark's cpu-us/op
// reads 0 there.
func processCPU() time.Duration { return 0 }
