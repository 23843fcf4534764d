package compute_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/tensors"
)

// TestVisionConformance runs the vision ops' parity cases
// (conformance.VisionCases: self-attention, average pooling, input rows,
// non-causal attention) against internal/backend/cpu on WebGPU and Vulkan
// with each attention variant forced (the planner's choice in a driver
// rerun), and a few of them under the f16 activation policy
// (conformance.VisionHalfCases).
func TestVisionConformance(t *testing.T) {
	kinds := []compute.AttentionKind{compute.AttentionPerHead, compute.AttentionSplit, compute.AttentionTiled}
	if gputest.RerunDriver() != "" {
		// On the rerun's driver the planner's own choice: the split
		// kernels for the short steps, the tiled ones for the rest (every
		// kind runs there in TestAttentionConformance; the vision ops
		// change only their parameters).
		kinds = []compute.AttentionKind{compute.AttentionAuto}
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, kind := range kinds {
			t.Run(fmt.Sprint(kind), func(t *testing.T) {
				conformance.RunCases(t, conformance.VisionCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, compute.Options{Attention: kind})}
				})
			})
		}
		t.Run("f16", func(t *testing.T) {
			conformance.RunCases(t, conformance.VisionHalfCases(), func(t testing.TB) gpu.Backend {
				return sharedBackend{backendOn(t, dev, compute.Options{})}
			})
		})
	})
}

// TestVisionOpsErrors: SetInput of a program without an input op is
// gpu.ErrUnsupported and rows that are not whole fusion.ErrInvalid; a run
// with fewer input rows than its step, or an avg_pool step of other than
// its grid's rows, fails with gpu.ErrStep; a symmetric window (an
// embedding model's) is still refused with gpu.ErrUnsupported.
func TestVisionOpsErrors(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(3, 3))
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 4, tensors.F32, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	compile := func(g *fusion.Graph, kv gpu.KVCache) (gpu.Program, error) {
		p, err := be.Compile(g, w, kv)
		if err == nil {
			t.Cleanup(p.Release)
		}
		return p, err
	}
	plain := &fusion.Graph{Tokens: 4}
	plain.Logits = plain.Add(&fusion.EmbedOp{Out: plain.NewBuf("x", 4, 4), Weight: "x"})
	p, err := compile(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetInput(make([]float32, 16)); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("set input without an input op: %v, want ErrUnsupported", err)
	}

	in := &fusion.Graph{Tokens: 4}
	in.Logits = in.Add(&fusion.InputOp{Out: in.NewBuf("x", 4, 4)})
	if p, err = compile(in, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SetInput(make([]float32, 7)); !errors.Is(err, fusion.ErrInvalid) {
		t.Errorf("7 values for rows of 4: %v, want ErrInvalid", err)
	}
	if err := p.Run(ctx, make([]int32, 4), 0); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("a run before any input: %v, want ErrStep", err)
	}
	if err := p.SetInput(make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx, make([]int32, 3), 0); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("3 rows on an input of 2: %v, want ErrStep", err)
	}
	if err := p.Run(ctx, make([]int32, 2), 0); err != nil {
		t.Errorf("2 rows on an input of 2: %v", err)
	}

	pool := &fusion.Graph{Tokens: 4}
	x := pool.Add(&fusion.EmbedOp{Out: pool.NewBuf("x", 4, 4), Weight: "x"})
	pool.Logits = pool.Add(&fusion.AvgPoolOp{Out: pool.NewBuf("o", 4, 4), In: x, Side: 2, Kernel: 2})
	if p, err = compile(pool, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx, make([]int32, 3), 0); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("avg_pool of a 2x2 grid over 3 rows: %v, want ErrStep", err)
	}

	kvSpec := fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8}
	kv, err := be.NewKVCache(kvSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	sym := &fusion.Graph{Tokens: 4, KV: kvSpec}
	q := sym.Add(&fusion.EmbedOp{Out: sym.NewBuf("x", 4, 4), Weight: "x"})
	sym.Add(&fusion.StoreKVOp{K: q, V: q, Layer: 0, KVHeads: 1, HeadDim: 4})
	sym.Logits = sym.Add(&fusion.AttentionOp{Out: sym.NewBuf("o", 4, 4), Q: q, Layer: 0, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4},
		Scale: 0.5, Window: 2, NonCausal: true, SymmetricWindow: true})
	if _, err := compile(sym, kv); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("a symmetric window: %v, want ErrUnsupported", err)
	}
}
