package kernels_test

import (
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
	"github.com/gpurun/gpurun/gpu/kernels"
)

// TestAttentionConformance runs the attention parity cases against gpu/cpu
// on WebGPU and Vulkan with each attention variant forced: per (head,
// token), and split over the sequence (attn_split + attn_combine) for
// every graph, prefill included, so both variants see every geometry.
func TestAttentionConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, kind := range []kernels.AttentionKind{kernels.AttentionPerHead, kernels.AttentionSplit, kernels.AttentionTiled, kernels.AttentionDecode} {
			t.Run(fmt.Sprint(kind), func(t *testing.T) {
				opts := kernels.Options{Attention: kind}
				conformance.RunCases(t, conformance.AttentionCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}
