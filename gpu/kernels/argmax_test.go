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

// TestSampleConformance runs the device-sampling cases (every rule of
// pipeline/sampler, rows of 5 to 32000 ids, ties, a NaN, many steps)
// against gpu/cpu, which runs pipeline/sampler, on WebGPU and Vulkan: the
// ids must be the same.
func TestSampleConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.SampleCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, kernels.Options{})}
		})
	})
}
