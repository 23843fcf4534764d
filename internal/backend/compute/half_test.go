package compute_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
)

// TestHalfActivationConformance runs the f16-activation parity cases
// (conformance.HalfCases: every buffer an f16 activation) against internal/backend/cpu
// on WebGPU and Vulkan in f32 arithmetic (the cases' tolerances are for
// f32 math), and where the device has f16 arithmetic variants (Vulkan with
// f16: lavapipe) with them, at conformance.F16ArithCases' tolerance.
func TestHalfActivationConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []compute.Options{{F16: compute.F16Off}, {}} {
			cases := conformance.HalfCases()
			name := "f32arith"
			if opts.F16 == compute.F16Auto {
				if !dev.Caps().F16() {
					continue // the same kernels as F16Off
				}
				cases, name = conformance.F16ArithCases(), "f16arith"
			}
			t.Run(name, func(t *testing.T) {
				conformance.RunCases(t, cases, func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}
