package gguf

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestQwen35Config: arch3's qwen35 imports as llama.cpp loads it: layers
// 0-2 Gated DeltaNet (conv kernel 4, 2 key heads, 4 value heads of 16),
// layer 3 gated attention with 8 of 32 dims rotated at base 1e7; attn_q's
// per-head interleaved query and gate rows split into WQ and WQGate.
func TestQwen35Config(t *testing.T) {
	path := testmodels.Path(t, "arch3", "qwen35.gguf")
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	if !slices.Equal(c.DeltaLayers, []int{0, 1, 2}) || c.DeltaConvWidth != 4 || c.DeltaKeyHeads != 2 || c.DeltaValueHeads != 4 || c.DeltaHeadDim != 16 {
		t.Errorf("delta layers %v, conv %d, heads %d/%d of %d", c.DeltaLayers, c.DeltaConvWidth, c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim)
	}
	if !c.AttnOutputGate || c.HeadDim != 32 || c.RopeDims != 8 || c.RopeBase != 1e7 || c.RopeStyle != model.RopeHalves || c.KVHeads != 2 || c.NormEps != 1e-6 || !c.Tied {
		t.Errorf("attention: gate %t, head dim %d, rope dims %d base %g style %s, kv heads %d, eps %g, tied %t",
			c.AttnOutputGate, c.HeadDim, c.RopeDims, c.RopeBase, c.RopeStyle, c.KVHeads, c.NormEps, c.Tied)
	}
	by := map[string][]float32{}
	for _, ts := range ck.Tensors {
		if v, err := ts.Float32(); err == nil {
			by[ts.Name] = v
		}
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw []float32
	for i := range f.Tensors {
		if f.Tensors[i].Name == "blk.3.attn_q.weight" {
			rt, err := f.readTensor(&f.Tensors[i], "q")
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = rt.Float32()
		}
	}
	q, g := by[model.Layer(3, model.WQ)], by[model.Layer(3, model.WQGate)]
	const hd, dim = 32, 64
	if len(raw) != 2*len(q) || len(q) != len(g) || len(q) != 4*hd*dim {
		t.Fatalf("sizes raw %d, q %d, gate %d", len(raw), len(q), len(g))
	}
	for h := range 4 {
		if !slices.Equal(q[h*hd*dim:(h+1)*hd*dim], raw[2*h*hd*dim:(2*h+1)*hd*dim]) || !slices.Equal(g[h*hd*dim:(h+1)*hd*dim], raw[(2*h+1)*hd*dim:(2*h+2)*hd*dim]) {
			t.Errorf("head %d: query and gate rows not those of attn_q's interleaved blocks", h)
		}
	}
}
