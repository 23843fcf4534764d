package cpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// mamba2Layer compiles a graph of one Mamba-2 mixer of granite-4.0-h-1b's
// shape (d_inner 3072, 48 heads of 64, d_state 128, 1 group, conv 4) for
// tokens rows, its input embedded from a table of 16 random rows, on one
// thread (the kernel's own cost).
func mamba2Layer(tb testing.TB, tokens int) gpu.Program {
	tb.Helper()
	op := &fusion.Mamba2Op{Conv: "conv", ConvBias: "conv_b", DtBias: "dt_b", A: "a", D: "d", Norm: "norm",
		Inner: 3072, Heads: 48, Groups: 1, State: 128, Width: 4, Eps: 1e-5}
	g := &fusion.Graph{Tokens: tokens, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 1, MaxLen: 1 << 24,
		State: []fusion.LayerState{op.LayerState()}}}
	op.In, op.Out = g.NewBuf("in", tokens, op.InCols()), g.NewBuf("y", tokens, op.Inner)
	g.Add(&fusion.EmbedOp{Out: op.In, Weight: "emb"})
	g.Add(op)
	g.Logits = op.Out
	rng := rand.New(rand.NewPCG(3, 3))
	cc := op.ConvChannels()
	uniform := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float32()
		}
		return v
	}
	ws := []*tensors.Tensor{
		f32Tensor(tb, "emb", []int{16, op.InCols()}, randVals(rng, 16*op.InCols(), 1)),
		f32Tensor(tb, "conv", []int{cc, op.Width}, uniform(cc*op.Width, -0.5, 0.5)),
		f32Tensor(tb, "conv_b", []int{cc}, randVals(rng, cc, 0.02)),
		f32Tensor(tb, "dt_b", []int{op.Heads}, uniform(op.Heads, 0.9, 1.1)),
		f32Tensor(tb, "a", []int{op.Heads}, uniform(op.Heads, -2, -0.1)),
		f32Tensor(tb, "d", []int{op.Heads}, uniform(op.Heads, 0.9, 1.1)),
		f32Tensor(tb, "norm", []int{op.Inner}, uniform(op.Inner, 0.9, 1.1)),
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 1})
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		tb.Fatal(err)
	}
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := be.Compile(g, w, kv)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkMamba2 measures one Mamba-2 mixer of granite-4.0-h-1b's shape
// (after in_proj, before out_proj): a decode step (one token) and a
// 64-token prefill step, each continuing the state of the last.
func BenchmarkMamba2(b *testing.B) {
	for _, tokens := range []int{1, 64} {
		name := "decode"
		if tokens > 1 {
			name = fmt.Sprintf("prefill%d", tokens)
		}
		b.Run(name, func(b *testing.B) {
			p := mamba2Layer(b, tokens)
			ctx := context.Background()
			toks := make([]int32, tokens)
			for i := range toks {
				toks[i] = int32(i % 16)
			}
			pos := 0
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Run(ctx, toks, pos); err != nil {
					b.Fatal(err)
				}
				pos += tokens
			}
			b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// TestMamba2DecodeAllocatesNothing: a decode step through a Mamba-2 mixer
// (convolution, scan across the pool's threads, gated norm) makes no heap
// allocation.
func TestMamba2DecodeAllocatesNothing(t *testing.T) {
	p := mamba2Layer(t, 1)
	ctx := context.Background()
	pos := 0
	tok := []int32{0}
	if n := testing.AllocsPerRun(10, func() {
		tok[0] = int32(pos % 16)
		if err := p.Run(ctx, tok, pos); err != nil {
			t.Fatal(err)
		}
		pos++
	}); n != 0 {
		t.Errorf("%v allocations per decode step, want 0", n)
	}
}
