package fusion

import (
	"errors"
	"testing"
)

// TestValidateVisionOps: the vision ops validate against their contracts
// and each broken field is an ErrInvalid.
func TestValidateVisionOps(t *testing.T) {
	build := func(edit func(g *Graph, sa *SelfAttnOp, ap *AvgPoolOp)) *Graph {
		g := &Graph{Tokens: 16}
		in := g.Add(&InputOp{Out: g.NewBuf("in", 16, 8)})
		sa := &SelfAttnOp{Out: g.NewBuf("att", 16, 8), Q: in, K: in, V: in, HeadShape: HeadShape{Heads: 2, KVHeads: 2, HeadDim: 4}, Scale: 0.5}
		ap := &AvgPoolOp{Out: g.NewBuf("pool", 16, 8), In: sa.Out, Side: 4, Kernel: 2}
		edit(g, sa, ap)
		g.Add(sa)
		g.Logits = g.Add(ap)
		return g
	}
	if err := build(func(*Graph, *SelfAttnOp, *AvgPoolOp) {}).Validate(nil); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(g *Graph, sa *SelfAttnOp, ap *AvgPoolOp){
		"attention aliased":  func(_ *Graph, sa *SelfAttnOp, _ *AvgPoolOp) { sa.Out = sa.Q },
		"attention scale":    func(_ *Graph, sa *SelfAttnOp, _ *AvgPoolOp) { sa.Scale = 0 },
		"attention heads":    func(_ *Graph, sa *SelfAttnOp, _ *AvgPoolOp) { sa.Heads = 3 },
		"attention kv heads": func(_ *Graph, sa *SelfAttnOp, _ *AvgPoolOp) { sa.KVHeads = 0 },
		"pool kernel":        func(_ *Graph, _ *SelfAttnOp, ap *AvgPoolOp) { ap.Kernel = 3 },
		"pool past tokens":   func(_ *Graph, _ *SelfAttnOp, ap *AvgPoolOp) { ap.Side, ap.Kernel = 8, 2 },
		"pool aliased":       func(_ *Graph, _ *SelfAttnOp, ap *AvgPoolOp) { ap.Out = ap.In },
		"pool width": func(g *Graph, _ *SelfAttnOp, ap *AvgPoolOp) {
			ap.Out = g.NewBuf("narrow", 16, 4)
		},
		"two inputs": func(g *Graph, _ *SelfAttnOp, _ *AvgPoolOp) { g.Add(&InputOp{Out: g.NewBuf("in2", 16, 8)}) },
		"batched":    func(g *Graph, _ *SelfAttnOp, _ *AvgPoolOp) { g.Batch = true },
	} {
		g := build(edit)
		validate := g.Validate
		if g.Batch {
			validate = g.ValidateBatch
		}
		if err := validate(nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if g := build(func(*Graph, *SelfAttnOp, *AvgPoolOp) {}); g.InputCols() != 8 {
		t.Errorf("InputCols %d, want 8", g.InputCols())
	}
}
