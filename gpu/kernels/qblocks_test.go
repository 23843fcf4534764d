package kernels_test

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// TestBlockTypeConformance runs the block-type parity cases (llama.cpp's
// Q4_1 ... Q6_K weights) against gpu/cpu on WebGPU and Vulkan, also with
// weights split into row blocks of at most 4 KiB (Q5_0 rows of 110 bytes
// do not end on words).
func TestBlockTypeConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []kernels.Options{{}, {MaxBinding: 4096}} {
			t.Run(fmt.Sprintf("split%d", opts.MaxBinding), func(t *testing.T) {
				conformance.RunCases(t, conformance.BlockCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}
