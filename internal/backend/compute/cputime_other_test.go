//go:build !unix

package compute

import "time"

// ProcessCPU is 0 where getrusage is missing: the benchmarks' CPU
// metrics read 0 there.
func ProcessCPU() time.Duration { return 0 }
