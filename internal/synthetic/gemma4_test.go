package synthetic

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
)

// TestGemma4E2BShape pins gemma-4-e2b's structure: 35 layers of hidden
// 1536, four sliding layers (head dim 256, window 512, full rotation at
// base 1e4) to one global (head dim 512, a quarter of the pairs turning
// at base 1e6), the last 20 layers reading the caches of layer 13
// (sliding) and 14 (global), per-layer inputs of 256, vocabulary 262144;
// its cache holds keys and values for the first 15 layers only. The
// shrunk form keeps the same kinds (TestShrunkSpecsRun runs it on the
// CPU backend: a prefill and three decode steps).
func TestGemma4E2BShape(t *testing.T) {
	c, ok := ByName("gemma-4-e2b")
	if !ok {
		t.Fatal("gemma-4-e2b not found")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Layers != 35 || c.Dim != 1536 || c.VocabSize != 262144 || c.PerLayerDim != 256 || c.SlidingWindow != 512 || c.SharedKVLayers != 20 {
		t.Fatalf("config %+v", c)
	}
	spec := arch.KVSpec(&c, arch.BuildOptions{MaxLen: 64})
	var kvOf, dims []int
	for l := range c.Layers {
		kvOf = append(kvOf, c.KVLayer(l))
		dims = append(dims, c.LayerHeadDim(l))
		global := (l+1)%5 == 0
		if global != (c.LayerWindow(l) == 0) {
			t.Errorf("layer %d: window %d", l, c.LayerWindow(l))
		}
		base, factors, _, _ := c.LayerRope(l, 64)
		switch {
		case global && (dims[l] != 512 || base != 1e6 || len(factors) != 256 || factors[63] != 1 || factors[64] < 1e29):
			t.Errorf("global layer %d: head dim %d, base %g, factors %d", l, dims[l], base, len(factors))
		case !global && (dims[l] != 256 || base != 1e4 || factors != nil || c.LayerRopeDims(l) != 256):
			t.Errorf("sliding layer %d: head dim %d, base %g, rope dims %d", l, dims[l], base, c.LayerRopeDims(l))
		}
		own := l < 15
		if own != (kvOf[l] == l) || own != (spec.LayerHeadDim(l) > 0) {
			t.Errorf("layer %d reads layer %d's cache; its own cache has head dim %d", l, kvOf[l], spec.LayerHeadDim(l))
		}
		if !own && kvOf[l] != map[bool]int{true: 14, false: 13}[global] {
			t.Errorf("shared layer %d reads layer %d", l, kvOf[l])
		}
		if want := map[bool]int{true: 6144, false: 12288}[own]; c.LayerHiddenDim(l) != want {
			t.Errorf("layer %d: FFN %d, want %d", l, c.LayerHiddenDim(l), want)
		}
	}
	if !slices.Equal(spec.HeadDims[:15], []int{256, 256, 256, 256, 512, 256, 256, 256, 256, 512, 256, 256, 256, 256, 512}) {
		t.Errorf("cache head dims %v", spec.HeadDims)
	}
	s := shrink(c)
	for l := range s.Layers {
		if s.KVLayer(l) != l && s.LayerWindow(l) != s.LayerWindow(s.KVLayer(l)) {
			t.Errorf("shrunk: layer %d reads layer %d of another kind", l, s.KVLayer(l))
		}
	}
	if s.SharedKVLayers == 0 || s.HeadDimLocal == s.HeadDim || s.PerLayerDim == 0 {
		t.Errorf("shrunk config lost Gemma 4's knobs: %+v", s)
	}
}
