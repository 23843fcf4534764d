package fusion

import (
	"errors"
	"testing"
)

// TestValidateMamba2: a Mamba-2 mixer validates against its layer's state
// in the KV spec (the conv window over x, B and C, one head dim x d_state
// matrix per head), its input's columns ([z | x | B | C | dt]) and each of
// its weights' shapes, and refuses inconsistent sizes.
func TestValidateMamba2(t *testing.T) {
	// inner 8, 2 heads of 4, 1 group, state 3, width 4: 8+6 = 14 conv
	// channels, 2*8+6+2 = 24 input columns.
	st := LayerState{ConvChannels: 14, ConvWindow: 3, MatrixHeads: 2, MatrixRows: 4, MatrixCols: 3}
	build := func(edit func(g *Graph, op *Mamba2Op)) *Graph {
		g := &Graph{Tokens: 2, KV: KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: 8, State: []LayerState{st, {}}}}
		in := g.NewBuf("zxbcdt", 2, 24)
		out := g.NewBuf("y", 2, 8)
		op := &Mamba2Op{Out: out, In: in, Conv: "conv", ConvBias: "conv_b", DtBias: "dt_b", A: "a", D: "d", Norm: "norm",
			Layer: 0, Inner: 8, Heads: 2, Groups: 1, State: 3, Width: 4, Eps: 1e-5}
		g.Add(&EmbedOp{Out: in, Weight: "emb"})
		g.Add(op)
		g.Logits = out
		edit(g, op)
		return g
	}
	shapes := map[string][]int{"conv": {14, 4}, "conv_b": {14}, "dt_b": {2}, "a": {2}, "d": {2}, "norm": {8}, "emb": {16, 24}}
	shape := func(name string) ([]int, bool) {
		s, ok := shapes[name]
		return s, ok
	}
	if err := build(func(*Graph, *Mamba2Op) {}).Validate(shape); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for name, edit := range map[string]func(*Graph, *Mamba2Op){
		"width off the state":    func(_ *Graph, op *Mamba2Op) { op.Width = 3 },
		"state size off":         func(_ *Graph, op *Mamba2Op) { op.State = 4 },
		"heads off the state":    func(_ *Graph, op *Mamba2Op) { op.Heads = 4 },
		"heads not dividing":     func(_ *Graph, op *Mamba2Op) { op.Heads = 3 },
		"groups not dividing":    func(_ *Graph, op *Mamba2Op) { op.Groups = 3 },
		"layer without state":    func(_ *Graph, op *Mamba2Op) { op.Layer = 1 },
		"layer out of range":     func(_ *Graph, op *Mamba2Op) { op.Layer = 2 },
		"aliased":                func(_ *Graph, op *Mamba2Op) { op.Out = op.In },
		"no eps":                 func(_ *Graph, op *Mamba2Op) { op.Eps = 0 },
		"no D":                   func(_ *Graph, op *Mamba2Op) { op.D = "" },
		"missing weight":         func(_ *Graph, op *Mamba2Op) { op.A = "nope" },
		"norm weight of a group": func(_ *Graph, op *Mamba2Op) { op.Norm = "dt_b" },
		"conv weight of a width": func(_ *Graph, op *Mamba2Op) { op.Conv = "emb" },
		"input columns":          func(g *Graph, op *Mamba2Op) { op.In = g.NewBuf("short", 2, 23) },
		"kv on a state layer": func(g *Graph, op *Mamba2Op) {
			k := g.NewBuf("k", 2, 4)
			g.Add(&StoreKVOp{K: k, V: k, Layer: 0, KVHeads: 1, HeadDim: 4})
		},
	} {
		err := build(edit).Validate(shape)
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
