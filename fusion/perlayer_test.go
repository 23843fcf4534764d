package fusion

import (
	"errors"
	"math"
	"testing"
)

// TestValidateGemma4: the ops and cache fields Gemma 4 adds, valid as
// built (a unit norm, a scale by a constant and by a one-value weight, a
// run of columns, a cache of two head dims with a layer that has none,
// whose attention reads another layer's), and each broken in one way.
func TestValidateGemma4(t *testing.T) {
	build := func() *Graph {
		g := &Graph{Tokens: 2, KV: KVSpec{Layers: 3, KVHeads: 1, HeadDim: 8, MaxLen: 8, HeadDims: []int{4, 8, 0}}}
		x := g.NewBuf("x", 2, 8)
		k := g.NewBuf("k", 2, 4)
		q := g.NewBuf("q", 2, 8)
		o := g.NewBuf("o", 2, 8)
		g.Add(&EmbedOp{Out: x, Weight: "emb"})
		g.Add(&NormOp{Out: x, In: x, Norm: NormRMS, Unit: true, Eps: 1e-6, HeadDim: 4})
		g.Add(&ScaleOp{Out: x, In: x, Scale: 0.5})
		g.Add(&ScaleOp{Out: x, In: x, Weight: "scalar"})
		g.Add(&ColumnsOp{Out: k, In: x, Offset: 4})
		g.Add(&StoreKVOp{K: k, V: k, Layer: 0, KVHeads: 1, HeadDim: 4})
		g.Add(&MatMulOp{Out: q, In: x, Projection: Projection{Weight: "wq"}})
		g.Add(&AttentionOp{Out: o, Q: q, Layer: 1, HeadShape: HeadShape{Heads: 1, KVHeads: 1, HeadDim: 8}, Scale: 1})
		g.Logits = o
		return g
	}
	shape := func(name string) ([]int, bool) {
		s, ok := map[string][]int{"emb": {10, 8}, "scalar": {1}, "wq": {8, 8}, "norm": {4}}[name]
		return s, ok
	}
	if err := build().Validate(shape); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Graph)
	}{
		{"unit norm with a weight", func(g *Graph) { g.Ops[1].(*NormOp).Weight = "norm" }},
		{"unit layer norm", func(g *Graph) { g.Ops[1].(*NormOp).Norm = NormLayer }},
		{"NaN scale", func(g *Graph) { g.Ops[2].(*ScaleOp).Scale = float32(math.NaN()) }},
		{"scale by a matrix", func(g *Graph) { g.Ops[3].(*ScaleOp).Weight = "wq" }},
		{"columns past the row", func(g *Graph) { g.Ops[4].(*ColumnsOp).Offset = 5 }},
		{"negative columns offset", func(g *Graph) { g.Ops[4].(*ColumnsOp).Offset = -1 }},
		{"store into a layer without a cache", func(g *Graph) { g.Ops[5].(*StoreKVOp).Layer = 2 }},
		{"store of the other head dim", func(g *Graph) { g.Ops[5].(*StoreKVOp).Layer = 1 }},
		{"attention to a layer without a cache", func(g *Graph) { g.Ops[7].(*AttentionOp).Layer = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build()
			tc.edit(g)
			if err := g.Validate(shape); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}
