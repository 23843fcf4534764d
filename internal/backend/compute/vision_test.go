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

// TestVisionOpsUnsupported: the ops only the CPU backend runs so far (a
// vision encoder's self_attention and avg_pool, a step's input rows and
// non-causal attention) fail to compile with gpu.ErrUnsupported naming
// the op, and SetInput of a compiled program is ErrUnsupported.
func TestVisionOpsUnsupported(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(3, 3))
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 4, tensors.F32, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	kvSpec := fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8}
	kv, err := be.NewKVCache(kvSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	for name, build := range map[string]func(g *fusion.Graph, x fusion.Buf) fusion.Op{
		"self_attention": func(g *fusion.Graph, x fusion.Buf) fusion.Op {
			return &fusion.SelfAttnOp{Out: g.NewBuf("o", 4, 4), Q: x, K: x, V: x, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4}, Scale: 0.5}
		},
		"avg_pool": func(g *fusion.Graph, x fusion.Buf) fusion.Op {
			return &fusion.AvgPoolOp{Out: g.NewBuf("o", 4, 4), In: x, Side: 2, Kernel: 2}
		},
		"input": func(g *fusion.Graph, x fusion.Buf) fusion.Op { return &fusion.InputOp{Out: g.NewBuf("o", 4, 4)} },
		"attention": func(g *fusion.Graph, x fusion.Buf) fusion.Op {
			g.Add(&fusion.StoreKVOp{K: x, V: x, Layer: 0, KVHeads: 1, HeadDim: 4})
			return &fusion.AttentionOp{Out: g.NewBuf("o", 4, 4), Q: x, Layer: 0, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4}, Scale: 0.5, NonCausal: true}
		},
	} {
		g := &fusion.Graph{Tokens: 4, KV: kvSpec}
		x := g.Add(&fusion.EmbedOp{Out: g.NewBuf("x", 4, 4), Weight: "x"})
		g.Logits = g.Add(build(g, x))
		_, err := be.Compile(g, w, kv)
		if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err %v, want gpu.ErrUnsupported naming it", name, err)
		}
	}
}
