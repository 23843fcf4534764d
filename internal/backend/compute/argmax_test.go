package compute_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
)

// TestArgmaxConformance runs the greedy-sampling cases (ties, negative
// rows, NaNs, rows around the workgroup size and of 32000) against internal/backend/cpu
// on WebGPU and Vulkan.
func TestArgmaxConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.ArgmaxCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}

// TestSampleConformance runs the device-sampling cases (every rule of
// internal/sampler, rows of 5 to 32000 ids, ties, a NaN, many steps)
// against internal/backend/cpu, which runs internal/sampler, on WebGPU and Vulkan: the
// ids must be the same.
func TestSampleConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.SampleCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}

// TestMaskConformance runs the token-mask cases (gpu.Program.SetTokenMask: argmax
// and sampling under masks set, changed and cleared between steps) against
// internal/backend/cpu on WebGPU and Vulkan.
func TestMaskConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.MaskCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
