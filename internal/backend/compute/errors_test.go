package compute_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// TestRunErrors: bad arguments fail with wrapped sentinel errors and leave
// the program usable.
func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(10, 10))
	g := &fusion.Graph{Tokens: 2, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 4}}
	x := embedInput(g, "x", 4)
	g.Add(&fusion.StoreKVOp{K: x, V: x, KVHeads: 1, HeadDim: 4})
	g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", 2, 4), Q: x, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4}, Scale: 1})
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 4, tensors.F32, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	p, err := be.Compile(g, w, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if _, err := p.Logits(make([]float32, 8)); !errors.Is(err, compute.ErrRun) {
		t.Errorf("logits before a run: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name   string
		ctx    context.Context
		tokens []int32
		pos    int
		want   error
	}{
		{"no tokens", ctx, nil, 0, compute.ErrRun},
		{"too many tokens", ctx, []int32{1, 2, 3}, 0, compute.ErrRun},
		{"negative position", ctx, []int32{1}, -1, compute.ErrRun},
		{"cache full", ctx, []int32{1, 2}, 3, gpu.ErrCacheFull},
		{"token past the vocabulary", ctx, []int32{vocab}, 0, compute.ErrRun},
		{"negative token", ctx, []int32{-1}, 0, compute.ErrRun},
		{"cancelled", cancelled, []int32{1}, 0, context.Canceled},
	}
	for _, tc := range cases {
		if err := p.Run(tc.ctx, tc.tokens, tc.pos); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := p.Run(ctx, []int32{1, 2}, 2); err != nil {
		t.Fatalf("valid run after errors: %v", err)
	}
	if _, err := p.Logits(make([]float32, 7)); !errors.Is(err, compute.ErrRun) {
		t.Errorf("short destination: %v", err)
	}
	if n, err := p.Logits(make([]float32, 8)); err != nil || n != 8 {
		t.Errorf("logits: %d, %v", n, err)
	}
}

func TestCompileAndLoadErrors(t *testing.T) {
	ctx := context.Background()
	be := gpuBackend(t, compute.Options{})
	r := rand.New(rand.NewPCG(11, 11))
	good := tensorOf(t, r, "x", vocab, 4, tensors.F32, 0, 0)
	bad := &tensors.Tensor{Name: "bad", DType: tensors.F32, Shape: []int{2, 3}, Data: make([]byte, 5)}
	for _, ts := range [][]*tensors.Tensor{{bad}, {good, good}, {nil}} {
		if _, err := be.LoadWeights(ctx, ts); err == nil {
			t.Errorf("LoadWeights accepted %v", ts)
		}
	}
	if _, err := be.LoadWeights(ctx, []*tensors.Tensor{bad}); !errors.Is(err, tensors.ErrShape) {
		t.Errorf("bad tensor: %v, want ErrShape", err)
	}
	if _, err := be.NewKVCache(fusion.KVSpec{Layers: 1, KVHeads: 0, HeadDim: 4, MaxLen: 4}); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("empty kv spec: %v", err)
	}
	if _, err := be.NewKVCache(fusion.KVSpec{Layers: 1, KVHeads: 1 << 15, HeadDim: 1 << 15, MaxLen: 1 << 20}); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("huge kv spec: %v", err)
	}
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{good})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	g := &fusion.Graph{Tokens: 1}
	g.Logits = embedInput(g, "x", 4)
	if _, err := be.Compile(nil, w, nil); err == nil {
		t.Error("nil graph compiled")
	}
	missing := &fusion.Graph{Tokens: 1}
	missing.Logits = embedInput(missing, "nope", 4)
	if _, err := be.Compile(missing, w, nil); !errors.Is(err, fusion.ErrInvalid) {
		t.Errorf("missing weight: %v, want ErrInvalid", err)
	}
	cw, err := cpu.New(cpu.Options{}).LoadWeights(ctx, []*tensors.Tensor{good})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Compile(g, cw, nil); err == nil {
		t.Error("compiled against another backend's weights")
	}
	attn := &fusion.Graph{Tokens: 1, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 4}}
	q := embedInput(attn, "x", 4)
	attn.Logits = attn.Add(&fusion.AttentionOp{Out: attn.NewBuf("o", 1, 4), Q: q,
		HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4}, Scale: 1})
	if _, err := be.Compile(attn, w, nil); err == nil {
		t.Error("attention compiled without a cache")
	}
	other, err := be.NewKVCache(fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := be.Compile(attn, w, other); !errors.Is(err, fusion.ErrInvalid) {
		t.Errorf("mismatched cache: %v, want ErrInvalid", err)
	}
	// An embedding model's symmetric window runs on the CPU backend
	// only: the kernels' windows reach back.
	kv, err := be.NewKVCache(attn.KV)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	a := attn.Ops[len(attn.Ops)-1].(*fusion.AttentionOp)
	a.NonCausal, a.SymmetricWindow, a.Window = true, true, 2
	if _, err := be.Compile(attn, w, kv); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("non-causal attention with a symmetric window: %v, want ErrUnsupported", err)
	}
	// And BERT's learned positions (an embedding by position).
	pos := &fusion.Graph{Tokens: 1}
	pos.Logits = pos.Add(&fusion.EmbedOp{Out: pos.NewBuf("p", 1, 4), Weight: "x", Positions: true})
	if _, err := be.Compile(pos, w, nil); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("learned positions: %v, want ErrUnsupported", err)
	}
}
