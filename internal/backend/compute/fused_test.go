package compute_test

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
)

// sharedBackend keeps a test binary's shared backend open when a
// conformance run closes what its factory returned.
type sharedBackend struct{ gpu.Backend }

func (sharedBackend) Close() error { return nil }

// TestFusedConformance runs the fused-op parity cases against internal/backend/cpu on
// WebGPU and Vulkan, with the kernels the device picks, without subgroup
// operations where the device has them (Vulkan), and with weights split
// into row blocks of at most 1 KiB (several dispatches per fused op; not in
// the SwiftShader rerun).
func TestFusedConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []compute.Options{
			{},
			{MaxBinding: 1024},
			{Subgroups: compute.SubgroupsOff},
		} {
			if opts.Subgroups == compute.SubgroupsOff && dev.Caps().SubgroupSize == 0 {
				continue // the same kernels as {}
			}
			if opts.MaxBinding != 0 && gputest.RerunDriver() != "" {
				// Split weights are the host's plan (row blocks, one
				// dispatch each) over the same kernels: lavapipe runs
				// them on both backends; the second driver's rerun,
				// which must fit CI's time, runs each kernel once.
				continue
			}
			t.Run(fmt.Sprintf("%s_split%d", opts.Subgroups, opts.MaxBinding), func(t *testing.T) {
				conformance.RunCases(t, conformance.FusedCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// TestWideConformance runs conformance.WideCases (products with rows as
// wide as real models') against internal/backend/cpu on WebGPU and Vulkan.
func TestWideConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.WideCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
