package fusion

import (
	"errors"
	"testing"
)

// TestValidateDeltaNet: a Gated DeltaNet op validates against its layer's
// state in the KV spec (window = width - 1 over (2K+V)·D channels, V
// matrices of D×D), its buffers' widths and its weights; a sigmoid gate
// needs input, gate and output of one shape and a gate it does not
// overwrite.
func TestValidateDeltaNet(t *testing.T) {
	// K = 1 key head, V = 2 value heads of D = 4: 16 channels.
	st := LayerState{ConvChannels: 16, ConvWindow: 3, MatrixHeads: 2, MatrixRows: 4, MatrixCols: 4}
	build := func(edit func(g *Graph, op *DeltaNetOp)) *Graph {
		g := &Graph{Tokens: 2, KV: KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: 8, State: []LayerState{st, {}}}}
		qkv := g.NewBuf("qkv", 2, 16)
		beta, alpha := g.NewBuf("beta", 2, 2), g.NewBuf("alpha", 2, 2)
		out := g.NewBuf("out", 2, 8)
		op := &DeltaNetOp{Out: out, QKV: qkv, Beta: beta, Alpha: alpha, Conv: "conv", DtBias: "dt", A: "a",
			Layer: 0, KeyHeads: 1, ValueHeads: 2, HeadDim: 4, Width: 4, Eps: 1e-6}
		g.Add(&EmbedOp{Out: qkv, Weight: "emb"})
		g.Add(&EmbedOp{Out: beta, Weight: "emb2"})
		g.Add(&EmbedOp{Out: alpha, Weight: "emb2"})
		g.Add(op)
		g.Logits = out
		edit(g, op)
		return g
	}
	shape := func(name string) ([]int, bool) {
		switch name {
		case "conv":
			return []int{16, 4}, true
		case "dt", "a":
			return []int{2}, true
		case "emb":
			return []int{16, 16}, true
		case "emb2":
			return []int{16, 2}, true
		}
		return nil, false
	}
	if err := build(func(*Graph, *DeltaNetOp) {}).Validate(shape); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for name, edit := range map[string]func(*Graph, *DeltaNetOp){
		"width off the state":          func(_ *Graph, op *DeltaNetOp) { op.Width = 3 },
		"layer without state":          func(_ *Graph, op *DeltaNetOp) { op.Layer = 1 },
		"layer out of range":           func(_ *Graph, op *DeltaNetOp) { op.Layer = 2 },
		"value heads not a multiple":   func(g *Graph, op *DeltaNetOp) { op.KeyHeads, op.ValueHeads = 2, 3 },
		"matrix off the state":         func(g *Graph, _ *DeltaNetOp) { g.KV.State[0].MatrixCols = 8 },
		"aliased":                      func(_ *Graph, op *DeltaNetOp) { op.Out = op.QKV },
		"beta of the wrong width":      func(_ *Graph, op *DeltaNetOp) { op.Beta = op.QKV },
		"no decay weight":              func(_ *Graph, op *DeltaNetOp) { op.A = "" },
		"dt bias of the wrong size":    func(_ *Graph, op *DeltaNetOp) { op.DtBias = "conv" },
		"conv weight of another width": func(_ *Graph, op *DeltaNetOp) { op.Conv = "emb" },
		"negative eps":                 func(_ *Graph, op *DeltaNetOp) { op.Eps = -1 },
		"kv on a state layer": func(g *Graph, op *DeltaNetOp) {
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

	gate := func(edit func(op *SigmoidGateOp, g *Graph)) error {
		g := &Graph{Tokens: 2}
		a, b := g.NewBuf("a", 2, 8), g.NewBuf("b", 2, 8)
		g.Add(&EmbedOp{Out: a, Weight: "emb"})
		g.Add(&EmbedOp{Out: b, Weight: "emb"})
		op := &SigmoidGateOp{Out: a, In: a, Gate: b}
		edit(op, g)
		g.Add(op)
		g.Logits = op.Out
		return g.Validate(func(string) ([]int, bool) { return []int{16, 8}, true })
	}
	if err := gate(func(*SigmoidGateOp, *Graph) {}); err != nil {
		t.Fatalf("valid sigmoid gate: %v", err)
	}
	for name, edit := range map[string]func(*SigmoidGateOp, *Graph){
		"gate overwritten": func(op *SigmoidGateOp, _ *Graph) { op.Out = op.Gate },
		"gate narrower":    func(op *SigmoidGateOp, g *Graph) { op.Gate = g.NewBuf("c", 2, 4) },
	} {
		if err := gate(edit); !errors.Is(err, ErrInvalid) {
			t.Errorf("sigmoid gate, %s: %v, want ErrInvalid", name, err)
		}
	}
}
