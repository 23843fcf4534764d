package kernels_test

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
	"github.com/gpurun/gpurun/internal/gputest"
)

// sharedBackend keeps a test binary's shared backend open when a
// conformance run closes what its factory returned.
type sharedBackend struct{ gpu.Backend }

func (sharedBackend) Close() error { return nil }

// TestFusedConformance runs the fused-op parity cases against gpu/cpu on
// WebGPU and Vulkan, with the CPU- and GPU-class kernel variants (the
// GPU class with and without subgroup operations, where the device has
// them: Vulkan) and with weights split into row blocks of at most 1 KiB
// (several dispatches per fused op; not in the SwiftShader rerun).
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
			if opts.MaxBinding != 0 && gputest.RerunDriver() != "" {
				// Split weights are the host's plan (row blocks, one
				// dispatch each) over the same kernels: lavapipe runs
				// them on both backends; the second driver's rerun,
				// which must fit CI's time, compiles and runs each
				// kernel once per class instead of twice.
				continue
			}
			t.Run(fmt.Sprintf("%s_%s_split%d", opts.Class, opts.Subgroups, opts.MaxBinding), func(t *testing.T) {
				conformance.RunCases(t, conformance.FusedCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// TestWindowConformance runs conformance.WindowCases (products whose
// weights the CPU-class kernels read through several uniform windows and
// dispatches) against gpu/cpu on WebGPU and Vulkan, with both classes'
// kernels, and WindowHalfCases (f16 activations) with the CPU class's.
// The second driver's rerun takes the CPU class only: on these shapes the
// GPU class runs the lane kernels the other conformance tests already hold
// there, and the rerun must fit CI's time.
func TestWindowConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, class := range []kernels.DeviceClass{kernels.ClassCPU, kernels.ClassGPU} {
			if class == kernels.ClassGPU && gputest.RerunDriver() != "" {
				continue
			}
			t.Run(class.String(), func(t *testing.T) {
				cases := conformance.WindowCases()
				if class == kernels.ClassCPU {
					cases = append(cases, conformance.WindowHalfCases()...)
				}
				conformance.RunCases(t, cases, func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, kernels.Options{Class: class})}
				})
			})
		}
	})
}
