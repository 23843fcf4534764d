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
// workgroup, f32, f16, bf16, int8 and int4 taps) against
// internal/backend/cpu on WebGPU and Vulkan (TestHalfActivationConformance
// runs three of them with f16 activations; internal/vulkan's conformance
// runs them too, with staging buffers and under the validation layer).
func TestShortConvConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.ShortConvCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
