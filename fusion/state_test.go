package fusion

import (
	"errors"
	"testing"
)

// TestValidateShortConv: a short convolution validates against its
// layer's state in the KV spec (channels, window = width - 1), and a
// state layer takes no keys and values.
func TestValidateShortConv(t *testing.T) {
	build := func(edit func(g *Graph, op *ShortConvOp)) *Graph {
		g := &Graph{Tokens: 2, KV: KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: 8,
			State: []LayerState{{ConvChannels: 8, ConvWindow: 2}, {}}}}
		in := g.NewBuf("bcx", 2, 24)
		out := g.NewBuf("out", 2, 8)
		op := &ShortConvOp{Out: out, In: in, Weight: "conv", Layer: 0, Channels: 8, Width: 3}
		g.Add(&EmbedOp{Out: in, Weight: "emb"})
		g.Add(op)
		g.Logits = out
		edit(g, op)
		return g
	}
	shape := func(name string) ([]int, bool) {
		switch name {
		case "conv":
			return []int{8, 3}, true
		case "emb":
			return []int{16, 24}, true
		}
		return nil, false
	}
	if err := build(func(*Graph, *ShortConvOp) {}).Validate(shape); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	for name, edit := range map[string]func(*Graph, *ShortConvOp){
		"width off the state":  func(_ *Graph, op *ShortConvOp) { op.Width = 4 },
		"layer without state":  func(_ *Graph, op *ShortConvOp) { op.Layer = 1 },
		"layer out of range":   func(_ *Graph, op *ShortConvOp) { op.Layer = 2 },
		"input not 3 channels": func(g *Graph, op *ShortConvOp) { op.Channels = 4 },
		"aliased":              func(_ *Graph, op *ShortConvOp) { op.Out = op.In },
		"states for 1 layer":   func(g *Graph, _ *ShortConvOp) { g.KV.State = g.KV.State[:1] },
		"kv on a state layer": func(g *Graph, op *ShortConvOp) {
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
