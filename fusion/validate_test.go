package fusion

import (
	"errors"
	"math"
	"testing"
)

// smallGraph is embed, norm, matmul, rope, store_kv, attention, last_row:
// valid as built; each case below breaks one thing.
func smallGraph() *Graph {
	g := &Graph{Tokens: 2, KV: KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 8}}
	x := g.NewBuf("x", 2, 8)
	h := g.NewBuf("h", 2, 8)
	q := g.NewBuf("q", 2, 8)
	k := g.NewBuf("k", 2, 4)
	o := g.NewBuf("o", 2, 8)
	last := g.NewBuf("last", 1, 8)
	g.Add(Op{Kind: Embed, Out: x, Weight: "emb"})
	g.Add(Op{Kind: Norm, Out: h, In: []Buf{x}, Weight: "norm", NormKind: "rms", Eps: 1e-5})
	g.Add(Op{Kind: MatMul, Out: q, In: []Buf{h}, Weight: "wq"})
	g.Add(Op{Kind: MatMul, Out: k, In: []Buf{h}, Weight: "wk", Bias: "bk"})
	g.Add(Op{Kind: Rope, Out: q, In: []Buf{q}, Heads: 2, HeadDim: 4, RopeDims: 4, RopeBase: 1e4, RopeStyle: "halves"})
	g.Add(Op{Kind: StoreKV, In: []Buf{k, k}, Layer: 0, Heads: 2, KVHeads: 1, HeadDim: 4})
	g.Add(Op{Kind: Attention, Out: o, In: []Buf{q}, Layer: 0, Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5})
	g.Add(Op{Kind: LastRow, Out: last, In: []Buf{o}})
	g.Logits = last
	return g
}

func shapes(name string) ([]int, bool) {
	s, ok := map[string][]int{"emb": {10, 8}, "norm": {8}, "wq": {8, 8}, "wk": {4, 8}, "bk": {4}}[name]
	return s, ok
}

func TestValidate(t *testing.T) {
	if err := smallGraph().Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for _, tc := range []struct {
		name   string
		breaks func(g *Graph)
	}{
		{"embed width", func(g *Graph) { g.Bufs[0].Cols = 6; g.Bufs[1].Cols = 6 }},
		{"missing norm weight", func(g *Graph) { g.Ops[1].Weight = "" }},
		{"rms with bias", func(g *Graph) { g.Ops[1].Bias = "norm" }},
		{"norm weight length", func(g *Graph) { g.Ops[1].Weight = "bk" }},
		{"matmul weight transposed", func(g *Graph) { g.Ops[3].Weight = "wq" }},
		{"bias missing", func(g *Graph) { g.Ops[3].Bias = "bq" }},
		{"rope odd dims", func(g *Graph) { g.Ops[4].RopeDims = 3 }},
		{"rope base", func(g *Graph) { g.Ops[4].RopeBase = 0 }},
		{"rope on last row", func(g *Graph) { g.Ops[4].In = []Buf{5}; g.Ops[4].Out = 5 }},
		{"store wrong layer", func(g *Graph) { g.Ops[5].Layer = 1 }},
		{"attention heads", func(g *Graph) { g.Ops[6].Heads = 3 }},
		{"attention window", func(g *Graph) { g.Ops[6].Window = -1 }},
		{"attention cap", func(g *Graph) { g.Ops[6].Cap = -1 }},
		{"last row into many rows", func(g *Graph) { g.Ops[7].Out = 4 }},
		{"rows mismatch", func(g *Graph) { g.Ops[2].Out = 5 }},
		{"input count", func(g *Graph) { g.Ops[2].In = append(g.Ops[2].In, 0) }},
		{"missing weight", func(g *Graph) { g.Ops[0].Weight = "nope" }},
		{"kv spec negative", func(g *Graph) { g.KV.MaxLen = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := smallGraph()
			tc.breaks(g)
			if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestValidateArgmax checks the argmax contract: one input row, a 1x1
// output that does not alias it.
func TestValidateArgmax(t *testing.T) {
	withArgmax := func() *Graph {
		g := smallGraph()
		id := g.NewBuf("id", 1, 1)
		g.Logits = g.Add(Op{Kind: Argmax, Out: id, In: []Buf{g.Logits}})
		return g
	}
	if err := withArgmax().Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for _, tc := range []struct {
		name   string
		breaks func(g *Graph)
	}{
		{"input of many rows", func(g *Graph) { g.Ops[8].In = []Buf{4} }},
		{"output wider than one", func(g *Graph) { g.Bufs[6].Cols = 2 }},
		{"output of many rows", func(g *Graph) { g.Bufs[6].Rows = 2 }},
		{"output aliases input", func(g *Graph) { g.Ops[8].In = []Buf{6} }},
		{"two inputs", func(g *Graph) { g.Ops[8].In = []Buf{5, 5} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := withArgmax()
			tc.breaks(g)
			if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestValidateBatch: a batched graph passes ValidateBatch only, without
// one-row buffers, LastRow or Argmax; Validate refuses it with ErrBatch.
func TestValidateBatch(t *testing.T) {
	batched := func() *Graph {
		g := smallGraph()
		g.Ops = g.Ops[:len(g.Ops)-1] // drop LastRow
		g.Bufs = g.Bufs[:len(g.Bufs)-1]
		g.Logits = 4 // o
		g.Batch = true
		return g
	}
	if err := batched().ValidateBatch(shapes); err != nil {
		t.Fatalf("valid batched graph: %v", err)
	}
	if err := batched().Validate(shapes); !errors.Is(err, ErrBatch) {
		t.Errorf("Validate of a batched graph: %v, want ErrBatch", err)
	}
	if err := smallGraph().ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("ValidateBatch of a plain graph: %v, want ErrInvalid", err)
	}
	g := smallGraph()
	g.Batch = true
	if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("batched graph with LastRow: %v, want ErrInvalid", err)
	}
	g = batched()
	g.Ops = append(g.Ops, Op{Kind: Argmax, Out: g.NewBuf("id", 2, 1), In: []Buf{4}})
	if err := g.ValidateBatch(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("batched graph with Argmax: %v, want ErrInvalid", err)
	}
}

// TestValidateSample checks the sample contract: argmax's shapes and a
// rule that pipeline/sampler can run.
func TestValidateSample(t *testing.T) {
	withSample := func(r Sampling) *Graph {
		g := smallGraph()
		id := g.NewBuf("id", 1, 1)
		g.Logits = g.Add(Op{Kind: Sample, Out: id, In: []Buf{g.Logits}, Sampling: r})
		return g
	}
	good := Sampling{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1}
	if err := withSample(good).Validate(shapes); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	nan := float32(math.NaN())
	for _, r := range []Sampling{
		{Temperature: 0}, {Temperature: -1}, {Temperature: nan}, {Temperature: float32(math.Inf(1))},
		{Temperature: 1, TopK: -1}, {Temperature: 1, TopP: -0.1}, {Temperature: 1, TopP: 1.5}, {Temperature: 1, TopP: nan},
	} {
		if err := withSample(r).Validate(shapes); !errors.Is(err, ErrInvalid) {
			t.Errorf("rule %+v: %v, want ErrInvalid", r, err)
		}
	}
	g := withSample(good)
	g.Bufs[6].Cols = 2
	if err := g.Validate(shapes); !errors.Is(err, ErrInvalid) {
		t.Errorf("2-wide output: %v, want ErrInvalid", err)
	}
}
