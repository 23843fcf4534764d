// Package swiftshader holds no code: its test reruns internal/backend/compute's
// conformance and golden tests on SwiftShader, the second Vulkan driver CI
// installs, through both GPU backends, so kernel variants chosen by device
// features (no f16, 256 invocations per workgroup there) run both ways.
// The rerun takes about twice as long as the package's own tests on
// lavapipe; as a package of its own, go test runs it beside them.
package swiftshader_test

import (
	"testing"

	"github.com/gpurun/gpurun/internal/gputest"
)

func TestKernelsOnSwiftShader(t *testing.T) {
	gputest.RerunPackageOnSwiftShader(t, "..", "Conformance|Golden|TestQuantizedGGUF|TestBatchedStep|VariantChosen")
}
