package model

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func validConfig() Config {
	return Config{Arch: ArchLlama, VocabSize: 512, Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, HeadDim: 8,
		MaxSeqLen: 512, Norm: NormRMS, NormEps: 1e-5, RopeStyle: RopeInterleaved, RopeDims: 8, RopeBase: 10000,
		Act: ActSiLU, GatedFFN: true, Tied: true, BOS: 1, EOS: 2, AddBOS: true}
}

func TestValidate(t *testing.T) {
	if c := validConfig(); c.Validate() != nil {
		t.Fatalf("valid config rejected: %v", c.Validate())
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"zero dim", func(c *Config) { c.Dim = 0 }},
		{"negative layers", func(c *Config) { c.Layers = -1 }},
		{"huge vocab", func(c *Config) { c.VocabSize = 1 << 30 }},
		{"heads not a multiple of kv heads", func(c *Config) { c.KVHeads = 3 }},
		{"odd rope dims", func(c *Config) { c.RopeDims = 7 }},
		{"rope dims above head dim", func(c *Config) { c.RopeDims = 16 }},
		{"unknown norm", func(c *Config) { c.Norm = "batch" }},
		{"unknown rope style", func(c *Config) { c.RopeStyle = "spiral" }},
		{"unknown activation", func(c *Config) { c.Act = "swish2" }},
		{"unknown policy", func(c *Config) { c.Activations = "f8" }},
		{"unknown sliding layers", func(c *Config) { c.SlidingLayers = "odd" }},
		{"bos outside vocab", func(c *Config) { c.BOS = 512 }},
		{"stop token outside vocab", func(c *Config) { c.StopTokens = []int{-1} }},
		{"sliding layer outside the model", func(c *Config) { c.SlidingLayers, c.SlidingLayerList = "list", []int{5} }},
		{"no-rope layer outside the model", func(c *Config) { c.NoRopeLayers = []int{-1} }},
		{"rope factors of the wrong length", func(c *Config) { c.RopeFactors = []float32{1, 2, 3} }},
		{"zero rope factor", func(c *Config) { c.RopeFactors = []float32{1, 0, 1, 1} }},
		{"short factors alone", func(c *Config) { c.RopeFactorsShort, c.RopeOrigCtx = []float32{1, 1, 1, 1}, 32 }},
		{"short factors without original context", func(c *Config) {
			c.RopeFactors, c.RopeFactorsShort = []float32{1, 1, 1, 1}, []float32{1, 1, 1, 1}
		}},
		{"negative attention factor", func(c *Config) { c.RopeAttnFactor = -1 }},
		{"NaN local base", func(c *Config) { c.RopeBaseLocal = float32(math.NaN()) }},
		{"local rope dims above the local head dim", func(c *Config) { c.HeadDimLocal, c.RopeDimsLocal = 4, 8 }},
		{"local rope dims without a local head dim", func(c *Config) { c.RopeDimsLocal = 4 }},
		{"layer widths of the wrong count", func(c *Config) { c.LayerHidden = []int{172} }},
		{"layer width above hidden dim", func(c *Config) { c.LayerHidden = []int{172, 172, 172, 172, 173} }},
		{"negative per-layer dim", func(c *Config) { c.PerLayerDim = -1 }},
		{"shared kv without a sliding layer before", func(c *Config) { c.SharedKVLayers = 2 }},
		{"shared kv of every layer", func(c *Config) {
			c.SlidingLayers, c.SlidingLayerList, c.SlidingWindow, c.SharedKVLayers = "list", []int{0, 1, 2}, 4, 5
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
}

// TestKVLayer: Gemma 4's shared layers read the cache of layer n-2 when
// they slide and n-1 when global (n = layers - shared), the others their
// own.
func TestKVLayer(t *testing.T) {
	c := validConfig()
	c.Layers, c.SlidingLayers, c.SlidingLayerList, c.SlidingWindow, c.SharedKVLayers = 6, "list", []int{0, 1, 2, 4}, 4, 2
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []int
	for l := range c.Layers {
		got = append(got, c.KVLayer(l))
	}
	if want := []int{0, 1, 2, 3, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("kv layers %v, want %v", got, want)
	}
}

func TestScaleAndWindow(t *testing.T) {
	c := validConfig()
	if got, want := c.Scale(), float32(1/math.Sqrt(8)); got != want {
		t.Errorf("default scale %g, want 1/sqrt(head_dim) = %g", got, want)
	}
	c.AttnScale = 0.5
	if c.Scale() != 0.5 {
		t.Errorf("explicit scale ignored: %g", c.Scale())
	}
	c.SlidingWindow = 8
	for _, tc := range []struct {
		layers string
		want   [3]int // layers 0, 1, 2
	}{{"", [3]int{0, 0, 0}}, {"even", [3]int{8, 0, 8}}, {"all", [3]int{8, 8, 8}}} {
		c.SlidingLayers = tc.layers
		for l, w := range tc.want {
			if got := c.LayerWindow(l); got != w {
				t.Errorf("sliding %q layer %d: window %d, want %d", tc.layers, l, got, w)
			}
		}
	}
}

func TestNames(t *testing.T) {
	if got := Layer(3, WQ); got != "params.lm.transformer.x_layers_3.self_attention.q.w" {
		t.Errorf("Layer(3, WQ) = %q", got)
	}
	if got := ScaleName(TokenEmbedding); got != "params.lm.token_embedding.w_quantized_scale" {
		t.Errorf("ScaleName = %q", got)
	}
}

func TestLayerRope(t *testing.T) {
	long, short := []float32{1, 2, 3, 4}, []float32{1, 1.5, 2, 2.5}
	c := validConfig()
	c.RopeFactors, c.RopeFactorsShort, c.RopeOrigCtx, c.RopeAttnFactor = long, short, 32, 1.25
	c.NoRopeLayers = []int{3}
	c.SlidingWindow, c.SlidingLayers, c.SlidingLayerList, c.RopeBaseLocal = 8, "list", []int{0, 1}, 100
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layer, ctx int
		base       float32
		factors    []float32
		scale      float32
		ok         bool
	}{
		{0, 128, 100, nil, 1, true},       // local layer: its own base, no factors
		{2, 128, 10000, long, 1.25, true}, // context past the original: long factors
		{2, 32, 10000, short, 1.25, true}, // within it: short factors
		{3, 128, 0, nil, 0, false},        // NoPE
	} {
		base, factors, scale, ok := c.LayerRope(tc.layer, tc.ctx)
		if base != tc.base || !slices.Equal(factors, tc.factors) || scale != tc.scale || ok != tc.ok {
			t.Errorf("LayerRope(%d, %d) = %g, %v, %g, %v; want %g, %v, %g, %v", tc.layer, tc.ctx, base, factors, scale, ok,
				tc.base, tc.factors, tc.scale, tc.ok)
		}
	}
	if w := c.LayerWindow(1); w != 8 {
		t.Errorf("listed layer 1: window %d, want 8", w)
	}
	if w := c.LayerWindow(2); w != 0 {
		t.Errorf("unlisted layer 2: window %d, want 0", w)
	}
}
