package compute_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
)

// TestShortConvConformance runs the short convolution's parity cases
// (conformance.ShortConvCases: the state carried across prefill chunks
// and decode steps, reset at position 0, channel counts around the
// workgroup, f32/f16/bf16 taps, f16 activations) against
// internal/backend/cpu on WebGPU and Vulkan.
func TestShortConvConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.ShortConvCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
