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
	"github.com/gpurun/gpurun/tensors"
)

// TestGemma4OpsRefused: the ops Gemma 4's graph adds (ScaleOp, ColumnsOp,
// a unit NormOp) and its cache of per-layer head dims have no kernels
// here yet: compiling or allocating them fails with gpu.ErrUnsupported
// naming what is missing, never runs a wrong graph. The CPU backend runs
// them (internal/arch's TestGemma4Golden).
func TestGemma4OpsRefused(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(40, 40))
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 8, tensors.F32, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	for _, tc := range []struct {
		name string
		add  func(g *fusion.Graph, x fusion.Buf) fusion.Buf
	}{
		{"scale", func(g *fusion.Graph, x fusion.Buf) fusion.Buf {
			return g.Add(&fusion.ScaleOp{Out: g.NewBuf("y", 2, 8), In: x, Scale: 0.5})
		}},
		{"columns", func(g *fusion.Graph, x fusion.Buf) fusion.Buf {
			return g.Add(&fusion.ColumnsOp{Out: g.NewBuf("y", 2, 4), In: x, Offset: 4})
		}},
		{"norm without a weight", func(g *fusion.Graph, x fusion.Buf) fusion.Buf {
			return g.Add(&fusion.NormOp{Out: g.NewBuf("y", 2, 8), In: x, Norm: fusion.NormRMS, Unit: true, Eps: 1e-6, HeadDim: 4})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fusion.Graph{Tokens: 2}
			g.Logits = tc.add(g, embedInput(g, "x", 8))
			p, err := be.Compile(g, w, nil)
			if err == nil {
				p.Release()
				t.Fatal("compiled")
			}
			if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), strings.Fields(tc.name)[0]) {
				t.Fatalf("error %v, want gpu.ErrUnsupported naming %q", err, tc.name)
			}
		})
	}
	spec := fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 8, MaxLen: 4, HeadDims: []int{8, 0}}
	if _, err := be.NewKVCache(spec); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("kv cache %+v: %v, want gpu.ErrUnsupported", spec, err)
	}
}
