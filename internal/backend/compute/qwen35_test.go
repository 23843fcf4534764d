package compute_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
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

// TestDeltaNetRefused: a DeltaNetOp the kernels cannot run fails to
// compile with gpu.ErrUnsupported saying why, never a panic or a wrong
// graph: head dims past shaders.DeltaMaxHeadDim (the kernels own 4 value
// columns per invocation of 64) and int8 taps (delta_conv reads f32, f16
// and bf16; GGUF keeps ssm_conv1d f32).
func TestDeltaNetRefused(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	for _, tc := range []struct {
		name string
		d    int
		dt   tensors.DType
		want string
	}{{"head dim", shaders.DeltaMaxHeadDim + 16, tensors.F32, "head dim"}, {"int8 taps", 16, tensors.I8, "bf16 taps"}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(40, uint64(tc.d)))
			op := &fusion.DeltaNetOp{Conv: "taps", DtBias: "dt", A: "a", KeyHeads: 1, ValueHeads: 1, HeadDim: tc.d, Width: 4, Eps: 1e-6}
			g := &fusion.Graph{Tokens: 2}
			g.KV = fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8, State: []fusion.LayerState{op.State()}}
			ch := op.Channels()
			op.QKV, op.Beta, op.Alpha = embedInput(g, "qkv", ch), embedInput(g, "beta", 1), embedInput(g, "alpha", 1)
			op.Out = g.NewBuf("o", 2, tc.d)
			g.Logits = g.Add(op)
			w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "qkv", vocab, ch, tensors.F32, 0, 0),
				tensorOf(t, r, "beta", vocab, 1, tensors.F32, 0, 0), tensorOf(t, r, "alpha", vocab, 1, tensors.F32, 0, 0),
				tensorOf(t, r, "taps", ch, 4, tc.dt, 0, tensors.F32), vectorOf(t, r, "dt"), vectorOf(t, r, "a")})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()
			kv, err := be.NewKVCache(g.KV)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			if p, err := be.Compile(g, w, kv); err == nil {
				p.Release()
				t.Error("compiled")
			} else if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want gpu.ErrUnsupported saying %q", err, tc.want)
			}
		})
	}
}

// vectorOf is a one-value f32 vector weight.
func vectorOf(t *testing.T, r *rand.Rand, name string) *tensors.Tensor {
	t.Helper()
	v, err := tensors.FromF32(name, []int{1}, []float32{r.Float32()}, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
