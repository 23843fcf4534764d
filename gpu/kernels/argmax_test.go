package kernels_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// TestArgmaxConformance runs the greedy-sampling cases (ties, negative
// rows, NaNs, rows around the workgroup size and of 32000) against gpu/cpu
// on WebGPU and Vulkan.
func TestArgmaxConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.ArgmaxCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, kernels.Options{})}
		})
	})
}
