package cpu_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// TestRowLoRA: a batched step of y = W·x then fusion.RowLoRAOp gives each
// row W·x plus its adapter set's B·(A·x) (two pairs in set 2, none in set
// 0, one in set 1), and nothing to a row whose index is past the sets,
// against float64 sums written here; the rows are out of sequence order.
func TestRowLoRA(t *testing.T) {
	const vocab, in, out, rows = 5, 24, 10, 4
	r := rand.New(rand.NewPCG(3, 4))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.Float64()*2 - 1)
		}
		return v
	}
	mats := map[string][2]int{"emb": {vocab, in}, "w": {out, in}, "a1": {3, in}, "b1": {out, 3}, "a2": {5, in}, "b2": {out, 5}}
	data := map[string][]float32{}
	var ts []*tensors.Tensor
	for name, s := range mats {
		data[name] = vals(s[0] * s[1])
		tt, err := tensors.FromF32(name, []int{s[0], s[1]}, data[name], tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tt)
	}
	// A cache per sequence (each row stores x in it) so the rows can name
	// four sequences.
	g := &fusion.Graph{Tokens: rows, Batch: true, KV: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: in, MaxLen: 8}}
	x, y := g.NewBuf("x", rows, in), g.NewBuf("y", rows, out)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "emb"})
	g.Add(&fusion.StoreKVOp{K: x, V: x, Layer: 0, KVHeads: 1, HeadDim: in})
	g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w"}})
	g.Add(&fusion.RowLoRAOp{Out: y, In: x, Sets: [][]fusion.LoRAWeights{nil, {{A: "a1", B: "b1", Rank: 3}},
		{{A: "a2", B: "b2", Rank: 5}, {A: "a1", B: "b1", Rank: 3}}}})
	g.Logits = y
	be := cpu.New(cpu.Options{})
	defer be.Close()
	w, err := be.LoadWeights(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	var kvs []gpu.KVCache
	for range rows {
		kv, err := be.NewKVCache(g.KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		kvs = append(kvs, kv)
	}
	p, err := be.CompileBatch(g, w, kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	step := []gpu.Row{{Token: 1, Seq: 2, Adapter: 2}, {Token: 3, Seq: 0, Adapter: 0}, {Token: 4, Seq: 3, Adapter: 7}, {Token: 2, Seq: 1, Adapter: 1}}
	if err := p.RunBatch(context.Background(), step); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*out)
	if _, err := p.Logits(got); err != nil {
		t.Fatal(err)
	}
	// prod is m·v for m of shape s.
	prod := func(m []float32, s [2]int, v []float64) []float64 {
		o := make([]float64, s[0])
		for i := range o {
			for j := range s[1] {
				o[i] += float64(m[i*s[1]+j]) * v[j]
			}
		}
		return o
	}
	sets := [][][2]string{nil, {{"a1", "b1"}}, {{"a2", "b2"}, {"a1", "b1"}}}
	for i, row := range step {
		xv := make([]float64, in)
		for j := range xv {
			xv[j] = float64(data["emb"][int(row.Token)*in+j])
		}
		want := prod(data["w"], mats["w"], xv)
		if row.Adapter < len(sets) {
			for _, pr := range sets[row.Adapter] {
				u := prod(data[pr[1]], mats[pr[1]], prod(data[pr[0]], mats[pr[0]], xv))
				for k := range want {
					want[k] += u[k]
				}
			}
		}
		for k, wv := range want {
			if d := math.Abs(float64(got[i*out+k]) - wv); d > 1e-5 {
				t.Errorf("row %d (adapter %d) [%d]: got %v, want %v", i, row.Adapter, k, got[i*out+k], wv)
			}
		}
	}
}
