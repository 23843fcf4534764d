// Package gputest decides what a GPU test does when no device can be opened:
// skip with a clear message on a developer machine without a Vulkan driver,
// fail under CI (CI=true), where lavapipe must be installed.
package gputest

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// NoDevice ends the test when a device could not be opened: a failure in CI,
// a skip elsewhere. It does nothing when err is nil.
func NoDevice(t testing.TB, backend string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("%s: no device in CI (install mesa-vulkan-drivers; see .ci/setup): %v", backend, err)
	}
	t.Skipf("%s: no device, skipping GPU test (install mesa-vulkan-drivers for lavapipe): %v", backend, err)
}
