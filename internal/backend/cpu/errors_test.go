package cpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// tinyGraph is a small embed, matmul, attention, last-row graph whose
// parts the table below breaks one at a time.
func tinyGraph() *fusion.Graph {
	g := &fusion.Graph{Tokens: 2, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 4}}
	x := g.NewBuf("x", 2, 4)
	y := g.NewBuf("y", 2, 4)
	o := g.NewBuf("o", 2, 4)
	last := g.NewBuf("last", 1, 4)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "e"})
	g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w"}})
	g.Add(&fusion.StoreKVOp{K: y, V: y, Layer: 0, KVHeads: 1, HeadDim: 4})
	g.Add(&fusion.AttentionOp{Out: o, Q: y, Layer: 0, HeadShape: fusion.HeadShape{Heads: 1, KVHeads: 1, HeadDim: 4}, Scale: 0.5})
	g.Add(&fusion.LastRowOp{Out: last, In: o})
	g.Logits = last
	return g
}

func tinyWeights(t testing.TB) []*tensors.Tensor {
	return []*tensors.Tensor{
		f32Tensor(t, "e", []int{3, 4}, make([]float32, 12)),
		f32Tensor(t, "w", []int{4, 4}, make([]float32, 16)),
		f32Tensor(t, "w3", []int{3, 4}, make([]float32, 12)),
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(g *fusion.Graph)
	}{
		{"missing weight", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Weight = "nope" }},
		{"weight shape", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Weight = "w3" }},
		{"missing bias", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Bias = "nope" }},
		{"bias shape", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Bias = "e" }},
		{"missing prologue scale", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Prologue = &fusion.RMSPrologue{Weight: "nope"} }},
		{"buffer out of range", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).In = 9 }},
		{"negative buffer", func(g *fusion.Graph) { g.Ops[1].(*fusion.MatMulOp).Out = -1 }},
		{"nil op", func(g *fusion.Graph) { g.Ops[1] = nil }},
		{"matmul aliasing", func(g *fusion.Graph) { m := g.Ops[1].(*fusion.MatMulOp); m.Out = m.In }},
		{"layer outside cache", func(g *fusion.Graph) { g.Ops[2].(*fusion.StoreKVOp).Layer = 1 }},
		{"kv heads", func(g *fusion.Graph) { g.Ops[3].(*fusion.AttentionOp).KVHeads = 2 }},
		{"zero scale", func(g *fusion.Graph) { g.Ops[3].(*fusion.AttentionOp).Scale = 0 }},
		{"heads not filling", func(g *fusion.Graph) { g.Ops[3].(*fusion.AttentionOp).Heads = 2 }},
		{"last row rows", func(g *fusion.Graph) { g.Bufs[3].Rows = 2 }},
		{"odd rows", func(g *fusion.Graph) { g.Bufs[0].Rows = 3 }},
		{"logits out of range", func(g *fusion.Graph) { g.Logits = 7 }},
		{"zero tokens", func(g *fusion.Graph) { g.Tokens = 0 }},
		{"unknown act", func(g *fusion.Graph) {
			g.Ops = append(g.Ops, &fusion.ActivationOp{Out: 1, In: 1, Act: fusion.Act(9)})
		}},
		{"unknown norm", func(g *fusion.Graph) {
			g.Ops = append(g.Ops, &fusion.NormOp{Out: 1, In: 1, Weight: "e", Norm: fusion.NormKind(3)})
		}},
		{"rope dims", func(g *fusion.Graph) {
			g.Ops = append(g.Ops, &fusion.RopeOp{Out: 1, In: 1, Heads: 1, HeadDim: 4,
				RopeParams: fusion.RopeParams{Dims: 6, Base: 1e4, Style: fusion.RopeHalves}})
		}},
		{"kv spec differs from cache", func(g *fusion.Graph) { g.KV.MaxLen = 8 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := cpu.New(cpu.Options{})
			w, err := be.LoadWeights(context.Background(), tinyWeights(t))
			if err != nil {
				t.Fatal(err)
			}
			kv, err := be.NewKVCache(tinyGraph().KV)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := be.Compile(tinyGraph(), w, kv); err != nil {
				t.Fatalf("unbroken graph: %v", err)
			}
			g := tinyGraph()
			tc.breakIt(g)
			if _, err := be.Compile(g, w, kv); !errors.Is(err, fusion.ErrInvalid) {
				t.Errorf("Compile: %v, want fusion.ErrInvalid", err)
			}
		})
	}
}

func TestLoadWeightsErrors(t *testing.T) {
	good := f32Tensor(t, "a", []int{2, 2}, make([]float32, 4))
	short := &tensors.Tensor{Name: "s", DType: tensors.F32, Shape: []int{2, 2}, Data: make([]byte, 15)}
	noScales := &tensors.Tensor{Name: "q", DType: tensors.I8, Shape: []int{2, 2}, Data: make([]byte, 4)}
	for _, tc := range []struct {
		name string
		ws   []*tensors.Tensor
	}{
		{"short data", []*tensors.Tensor{short}},
		{"int8 without scales", []*tensors.Tensor{noScales}},
		{"duplicate", []*tensors.Tensor{good, good}},
		{"nil", []*tensors.Tensor{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := cpu.New(cpu.Options{}).LoadWeights(context.Background(), tc.ws); err == nil {
				t.Error("LoadWeights succeeded")
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	be := cpu.New(cpu.Options{})
	w, err := be.LoadWeights(context.Background(), tinyWeights(t))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := be.NewKVCache(tinyGraph().KV)
	if err != nil {
		t.Fatal(err)
	}
	p, err := be.Compile(tinyGraph(), w, kv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Logits(make([]float32, 4)); err == nil {
		t.Error("Logits before any Run succeeded")
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		tokens []int32
		pos    int
		want   error // nil: any error
	}{
		{"cache full", context.Background(), []int32{1, 2}, 3, gpu.ErrCacheFull},
		{"cache full at end", context.Background(), []int32{1}, 4, gpu.ErrCacheFull},
		{"too many tokens", context.Background(), []int32{1, 2, 0}, 0, nil},
		{"no tokens", context.Background(), nil, 0, nil},
		{"negative position", context.Background(), []int32{1}, -1, nil},
		{"token outside vocab", context.Background(), []int32{3}, 0, nil},
		{"negative token", context.Background(), []int32{-1}, 0, nil},
		{"cancelled", cancelled, []int32{1}, 0, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Run(tc.ctx, tc.tokens, tc.pos)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("Run: %v, want %v", err, tc.want)
			}
			if _, err := p.Logits(make([]float32, 4)); err == nil {
				t.Error("Logits after a failed Run succeeded")
			}
		})
	}
	if err := p.Run(context.Background(), []int32{1, 2}, 2); err != nil {
		t.Fatalf("last two positions: %v", err)
	}
	if _, err := p.Logits(make([]float32, 3)); err == nil {
		t.Error("Logits into a short buffer succeeded")
	}
	if n, err := p.Logits(make([]float32, 8)); n != 4 || err != nil {
		t.Errorf("Logits of a last-row graph: %d, %v; want 4 values", n, err)
	}
	if _, err := be.NewKVCache(fusion.KVSpec{Layers: 1 << 20, KVHeads: 1 << 10, HeadDim: 1 << 10, MaxLen: 1 << 20}); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("huge cache: %v", err)
	}
}
