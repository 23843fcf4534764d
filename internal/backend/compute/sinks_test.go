package compute_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// TestBatchedSinks: a batched decode step whose attention has sinks
// (fusion.AttentionOp.Sinks) gives each row what the CPU reference gives
// for that sequence's one-row step, on sequences prefilled to different
// lengths (one and two chunks of attn_split), f32 and f16 caches, with the
// split kernels and the per-head one. The conformance cases
// (conformance.AttentionCases) cover the unbatched steps.
func TestBatchedSinks(t *testing.T) {
	const heads, kvHeads, hd, maxLen, vocab, seqs = 4, 2, 16, 96, 13, 3
	const qc, kc = heads * hd, kvHeads * hd
	sinkVals := []float32{2.5, -1, 0.75, 4}
	build := func(tokens int, batch, f16 bool) *fusion.Graph {
		g := &fusion.Graph{Tokens: tokens, Batch: batch, KV: fusion.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, MaxLen: maxLen, F16: f16}}
		in := func(name string, cols int) fusion.Buf {
			return g.Add(&fusion.EmbedOp{Out: g.NewBuf(name, tokens, cols), Weight: name})
		}
		q, k, v := in("q", qc), in("k", kc), in("v", kc)
		g.Add(&fusion.StoreKVOp{K: k, V: v, KVHeads: kvHeads, HeadDim: hd})
		g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", tokens, qc), Q: q,
			HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}, Scale: 0.7, Sinks: "sinks"})
		return g
	}
	table := func(name string, rows, cols int, seed int) *tensors.Tensor {
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(math.Sin(float64(i*seed+1))) * 2
		}
		w, err := tensors.FromF32(name, []int{rows, cols}, vals, tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	sinks, err := tensors.FromF32("sinks", []int{heads}, sinkVals, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	ws := []*tensors.Tensor{table("q", vocab, qc, 7), table("k", vocab, kc, 11), table("v", vocab, kc, 13), sinks}
	prompt := func(s int) []int32 { // sequence s: 3, 40 and 77 positions
		ids := make([]int32, 3+37*s)
		for i := range ids {
			ids[i] = int32((7*i + 3 + s) % vocab)
		}
		return ids
	}
	rows := make([]gpu.Row, seqs)
	for s := range rows {
		rows[s] = gpu.Row{Token: int32((5*s + 2) % vocab), Pos: len(prompt(s)), Seq: s}
	}
	ctx := context.Background()
	// prefill runs each sequence's prompt on its own cache of be.
	prefill := func(t *testing.T, be gpu.Backend, w gpu.Weights, f16 bool) []gpu.KVCache {
		var kvs []gpu.KVCache
		for s := range seqs {
			kv, err := be.NewKVCache(build(1, false, f16).KV)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { kv.Release() })
			p, err := be.Compile(build(len(prompt(s)), false, f16), w, kv)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(ctx, prompt(s), 0); err != nil {
				t.Fatal(err)
			}
			p.Release()
			kvs = append(kvs, kv)
		}
		return kvs
	}
	// The reference: each sequence's one-row step on the CPU.
	want := map[bool][][]float32{}
	for _, f16 := range []bool{false, true} {
		ref := cpu.New(cpu.Options{Threads: 1})
		defer ref.Close()
		rw, err := ref.LoadWeights(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		want[f16] = make([][]float32, seqs)
		for s, kv := range prefill(t, ref, rw, f16) {
			p, err := ref.Compile(build(1, false, f16), rw, kv)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(ctx, []int32{rows[s].Token}, rows[s].Pos); err != nil {
				t.Fatal(err)
			}
			want[f16][s] = make([]float32, qc)
			if _, err := p.Logits(want[f16][s]); err != nil {
				t.Fatal(err)
			}
			p.Release()
		}
		rw.Release()
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, f16 := range []bool{false, true} {
			for _, kind := range []compute.AttentionKind{compute.AttentionAuto, compute.AttentionPerHead} {
				t.Run(fmt.Sprintf("f16=%v/%s", f16, kind), func(t *testing.T) {
					be := backendOn(t, dev, compute.Options{Attention: kind})
					w, err := be.LoadWeights(ctx, ws)
					if err != nil {
						t.Fatal(err)
					}
					defer w.Release()
					p, err := be.CompileBatch(build(seqs, true, f16), w, prefill(t, be, w, f16))
					if err != nil {
						t.Fatal(err)
					}
					defer p.Release()
					order := []gpu.Row{rows[2], rows[0], rows[1]}
					if err := p.RunBatch(ctx, order); err != nil {
						t.Fatal(err)
					}
					got := make([]float32, seqs*qc)
					if _, err := p.Logits(got); err != nil {
						t.Fatal(err)
					}
					for i, r := range order {
						for j, x := range want[f16][r.Seq] {
							if d := math.Abs(float64(got[i*qc+j] - x)); !(d <= 1e-5+5e-5*math.Abs(float64(x))) {
								t.Fatalf("row %d (sequence %d at %d): value %d = %v, cpu %v", i, r.Seq, r.Pos, j, got[i*qc+j], x)
							}
						}
					}
				})
			}
		}
	})
}
