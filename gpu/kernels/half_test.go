package kernels_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// TestHalfActivationConformance runs the f16-activation parity cases
// (conformance.HalfCases: every buffer an f16 activation) against gpu/cpu
// on WebGPU and Vulkan with the CPU- and GPU-class kernels, the latter in
// f32 arithmetic: the cases' tolerances are for f32 math
// (TestF16ArithmeticConformance checks the f16-arithmetic variants).
func TestHalfActivationConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []kernels.Options{{Class: kernels.ClassCPU}, {Class: kernels.ClassGPU, F16: kernels.F16Off}} {
			t.Run(opts.Class.String(), func(t *testing.T) {
				conformance.RunCases(t, conformance.HalfCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}
