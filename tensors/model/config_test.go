package model

import (
	"errors"
	"math"
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
