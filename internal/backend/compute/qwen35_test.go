package compute_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// qwen35Tol is the f32 tolerance of the arch3 Qwen3.5 golden on the GPU
// backends, the CPU backend's (internal/backend/cpu qwen35Tol): llama.cpp's
// logits are printed to 6 significant digits (5e-6 of rounding) and an
// independent float64 pass reproduces them within 2.8e-6; 1e-4 leaves 20
// times that for other summation orders (the GPU's chunked delta rule
// sums in chunks of 32 rows, the CPU's in chunks of 64) and stays 240
// times below the smallest convention effect measured on this model
// (arch3/README.md: the attention output gate zeroed, 2.4e-2). With f16
// activations: archHalfTol (2e-3), 12 times below that effect.
const qwen35Tol = 1e-4

// TestQwen35Golden runs arch3/qwen35.gguf (Gated DeltaNet layers with
// their recurrent states beside gated full attention) on WebGPU and
// Vulkan as llama.cpp 81ff7abe5 ran it: the 12 prompt ids in one step
// (delta_chunk) with logits at every position, then 24 decode steps
// (delta_rule), each carrying the convolution windows and the delta
// rule's matrices; greedy ids equal and every logit within qwen35Tol,
// unfused, fused, and fused with f16 activations (archHalfTol). The
// SwiftShader rerun runs the fused case only: the others differ in what
// the host plans, not in the kernels a driver compiles.
func TestQwen35Golden(t *testing.T) {
	path := testmodels.Path(t, "arch3", "qwen35.gguf")
	golden := testmodels.Arch3(t, "qwen35").ArchGolden
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		t.Run("qwen35_fused", func(t *testing.T) { archGoldenCase(t, dev, path, golden, qwen35Tol, true, compute.Options{}) })
		if gputest.RerunDriver() != "" {
			return
		}
		t.Run("qwen35", func(t *testing.T) { archGoldenCase(t, dev, path, golden, qwen35Tol, false, compute.Options{}) })
		t.Run("qwen35_fused_f16", func(t *testing.T) { archGoldenCase(t, dev, path, golden, archHalfTol, true, compute.Options{}, true) })
	})
}

// TestQwen35States holds the GPU backends' Gated DeltaNet states to the
// contract TestLFM2States holds LFM2's to (recurrentStates: steps only
// where the states end, CopyKV of exactly their position and the reset,
// RunSteps to llama.cpp's greedy ids, batched rounds of sequences at
// different positions, one idle, each row within qwen35Tol of llama.cpp's
// logits); zeroing the states before a decode step (the windows and
// matrices not carried) moves its logits more than ten tolerances.
func TestQwen35States(t *testing.T) { recurrentStates(t, "qwen35", qwen35Tol) }

// TestQwen35OpsConformance runs Qwen3.5's ops whole through the planner
// (conformance.DeltaNetCases: DeltaNetOp's state carried across prefill
// chunks and decode steps and reset at position 0, in the recurrent and
// the chunked form, f32 and f16 activations, the decay ablated; the
// SigmoidGateOp apart, in place and with one gate column) against
// internal/backend/cpu on WebGPU and Vulkan.
func TestQwen35OpsConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, conformance.DeltaNetCases(), func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}
