//go:build !js

package compute

import "runtime"

// compileWorkers is how many kernels compileKernels compiles at once: one
// per thread the Go scheduler runs (a software driver compiles on the
// calling thread).
func compileWorkers() int { return runtime.GOMAXPROCS(0) }
