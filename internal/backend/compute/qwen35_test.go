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

// TestQwen35OpsRefused: the ops Qwen3.5's graph adds have no kernels
// here yet: compiling its gated attention's SigmoidGateOp fails with
// gpu.ErrUnsupported naming the op kind (the planner's default; the
// DeltaNetOp is refused the same way: pipeline's TestQwen35GPURefused on
// the whole model), never a panic or a wrong graph, while a KV cache whose
// states hold Gated DeltaNet matrices is allocated as every recurrent
// state is. The CPU backend runs both (internal/backend/cpu's
// TestQwen35Golden).
func TestQwen35OpsRefused(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(35, 35))
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 8, tensors.F32, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	g := &fusion.Graph{Tokens: 2}
	x := embedInput(g, "x", 8)
	g.Logits = g.Add(&fusion.SigmoidGateOp{Out: g.NewBuf("y", 2, 8), In: x, Gate: x})
	if p, err := be.Compile(g, w, nil); err == nil {
		p.Release()
		t.Error("sigmoid gate compiled")
	} else if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), fusion.SigmoidGate.String()) {
		t.Errorf("sigmoid gate: %v, want gpu.ErrUnsupported naming %s", err, fusion.SigmoidGate)
	}
	st := (&fusion.DeltaNetOp{KeyHeads: 2, ValueHeads: 4, HeadDim: 16, Width: 4}).State()
	spec := fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 8, MaxLen: 4, State: []fusion.LayerState{st, {}}}
	c, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatalf("kv cache with delta net states: %v", err)
	}
	c.Release()
}
