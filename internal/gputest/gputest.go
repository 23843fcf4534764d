// Package gputest decides what a GPU test does when no device can be opened:
// skip with a clear message on a developer machine without a Vulkan driver,
// fail under CI (CI=true), where lavapipe must be installed.
package gputest

import (
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
)

// InCI reports whether the tests run under CI (ci.Enabled).
func InCI() bool { return ci.Enabled() }

// NoDevice ends the test when a device could not be opened: a failure in CI,
// a skip elsewhere. It does nothing when err is nil.
func NoDevice(t testing.TB, backend string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	ci.Missing(t, "%s: no device (install mesa-vulkan-drivers for lavapipe; .ci/setup does): %v", backend, err)
}
