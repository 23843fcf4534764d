package kernels_test

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// sharedBackend keeps a test binary's shared backend open when a
// conformance run closes what its factory returned.
type sharedBackend struct{ gpu.Backend }

func (sharedBackend) Close() error { return nil }

// TestFusedConformance runs the fused-op parity cases against gpu/cpu on
// WebGPU and Vulkan, with the CPU- and GPU-class kernel variants (the
// GPU class with and without subgroup operations, where the device has
// them: Vulkan) and with weights split into row blocks of at most 1 KiB
// (several dispatches per fused op).
func TestFusedConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []kernels.Options{
			{Class: kernels.ClassCPU},
			{Class: kernels.ClassGPU},
			{Class: kernels.ClassCPU, MaxBinding: 1024},
			{Class: kernels.ClassGPU, MaxBinding: 1024},
			{Class: kernels.ClassGPU, Subgroups: kernels.SubgroupsOff},
		} {
			if opts.Subgroups == kernels.SubgroupsOff && dev.Info().SubgroupSize == 0 {
				continue // the same kernels as {Class: ClassGPU}
			}
			t.Run(fmt.Sprintf("%s_%s_split%d", opts.Class, opts.Subgroups, opts.MaxBinding), func(t *testing.T) {
				conformance.RunCases(t, conformance.FusedCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}
