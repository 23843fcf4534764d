package kernels_test

import (
	"testing"

	"github.com/gpurun/gpurun/internal/gputest"
)

// TestSwiftShader runs this package's conformance and golden tests again
// with both GPU backends on SwiftShader, the second Vulkan driver CI
// installs: kernel variants chosen by device features (no f16, 256
// invocations per workgroup there) run both ways.
func TestSwiftShader(t *testing.T) {
	gputest.RerunOnSwiftShader(t, "Conformance|Golden|TestQuantizedGGUF|TestBatchedStep|VariantChosen")
}
