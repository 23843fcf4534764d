//go:build js

package compute

// compileWorkers is how many kernels compileKernels compiles at once. In
// the browser (GOMAXPROCS 1) a compile is an await of the browser's
// createComputePipelineAsync, which its GPU process runs off its main
// thread: the page starts many and waits for them together.
func compileWorkers() int { return 16 }
