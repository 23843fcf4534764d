// Package scripttest runs the repository's documented scripts
// (scripts/gpu-check and scripts/bench-report, in their --quick forms) so
// that they cannot rot. Each builds gpurun and measures on the GPU
// backends, minutes of work on a 2-core machine: they are a package of
// their own so that `go test ./...` runs them beside cmd/gpurun's tests,
// each package within its own timeout, rather than after them.
package scripttest
