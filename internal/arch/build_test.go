package arch_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/tensors/model"
)

func baseConfig() model.Config {
	return model.Config{Arch: model.ArchLlama, VocabSize: 32, Dim: 16, HiddenDim: 24, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 4, Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved, RopeDims: 4, RopeBase: 1e4,
		Act: model.ActSiLU, GatedFFN: true, BOS: 1, EOS: 2}
}

func TestBuildErrors(t *testing.T) {
	bad := baseConfig()
	bad.KVHeads = 3
	both := baseConfig()
	both.Parallel, both.PostNorms = true, true
	good := baseConfig()
	for _, tc := range []struct {
		name string
		cfg  *model.Config
		opts arch.BuildOptions
		want error
	}{
		{"nil config", nil, arch.BuildOptions{Tokens: 1, MaxLen: 8}, model.ErrConfig},
		{"invalid config", &bad, arch.BuildOptions{Tokens: 1, MaxLen: 8}, model.ErrConfig},
		{"parallel with post-norms", &both, arch.BuildOptions{Tokens: 1, MaxLen: 8}, model.ErrConfig},
		{"zero tokens", &good, arch.BuildOptions{Tokens: 0, MaxLen: 8}, arch.ErrOptions},
		{"tokens above cache", &good, arch.BuildOptions{Tokens: 9, MaxLen: 8}, arch.ErrOptions},
		{"zero cache", &good, arch.BuildOptions{Tokens: 1, MaxLen: 0}, arch.ErrOptions},
		{"argmax of all logits", &good, arch.BuildOptions{Tokens: 2, MaxLen: 8, AllLogits: true, Argmax: true}, arch.ErrOptions},
		{"more tokens than the rings take", &good, arch.BuildOptions{Tokens: 4, MaxLen: 8, RingTokens: 2}, arch.ErrOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := arch.Build(tc.cfg, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("Build: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestBuildShapes: for every knob, the graph validates, its logits have the
// documented shape, and the ops the knob implies are present.
func TestBuildShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(c *model.Config)
		kinds map[fusion.Kind]int // op counts that must match exactly
	}{
		{"llama", func(c *model.Config) {}, map[fusion.Kind]int{fusion.Attention: 2, fusion.GLU: 2, fusion.Norm: 5, fusion.SoftCap: 0}},
		{"plain ffn", func(c *model.Config) { c.GatedFFN = false; c.Act = model.ActGELUTanh }, map[fusion.Kind]int{fusion.GLU: 0, fusion.Activation: 2}},
		{"parallel", func(c *model.Config) { c.Parallel = true; c.Norm = model.NormLayer }, map[fusion.Kind]int{fusion.Norm: 3, fusion.Add: 4}},
		{"post norms and caps", func(c *model.Config) { c.PostNorms = true; c.AttnSoftCap = 50; c.FinalSoftCap = 30 }, map[fusion.Kind]int{fusion.Norm: 9, fusion.SoftCap: 1}},
		{"no rope", func(c *model.Config) { c.RopeDims = 0 }, map[fusion.Kind]int{fusion.Rope: 0}},
		{"partial rope", func(c *model.Config) { c.RopeDims = 2 }, map[fusion.Kind]int{fusion.Rope: 4}},
	} {
		for _, all := range []bool{false, true} {
			cfg := baseConfig()
			tc.tweak(&cfg)
			g, err := arch.Build(&cfg, arch.BuildOptions{Tokens: 5, MaxLen: 16, AllLogits: all})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := g.Validate(nil); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			rows := 1
			if all {
				rows = 5
			}
			if b := g.Bufs[g.Logits]; b.Rows != rows || b.Cols != cfg.VocabSize {
				t.Errorf("%s: logits %dx%d, want %dx%d", tc.name, b.Rows, b.Cols, rows, cfg.VocabSize)
			}
			counts := map[fusion.Kind]int{}
			for _, op := range g.Ops {
				counts[op.Kind()]++
			}
			for k, n := range tc.kinds {
				if counts[k] != n {
					t.Errorf("%s: %d %s ops, want %d", tc.name, counts[k], k, n)
				}
			}
		}
	}
}

// TestBuildArgmax: with Argmax the graph ends in one Argmax of the logits
// row (after the final soft cap), and its Logits is the 1x1 id.
func TestBuildArgmax(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  float32
		prev fusion.Kind // the op that produces the argmax input
	}{
		{"plain", 0, fusion.MatMul},
		{"soft cap", 30, fusion.SoftCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.FinalSoftCap = tc.cap
			g, err := arch.Build(&cfg, arch.BuildOptions{Tokens: 1, MaxLen: 16, Argmax: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Validate(nil); err != nil {
				t.Fatal(err)
			}
			if b := g.Bufs[g.Logits]; b.Rows != 1 || b.Cols != 1 {
				t.Errorf("logits %dx%d, want 1x1", b.Rows, b.Cols)
			}
			n := len(g.Ops)
			last, ok := g.Ops[n-1].(*fusion.ArgmaxOp)
			prev := g.Ops[n-2]
			if !ok || last.Out != g.Logits || prev.Kind() != tc.prev || last.In != prev.Outputs()[0] {
				t.Fatalf("graph ends in %+v <- %s, want argmax <- %s", g.Ops[n-1], prev.Kind(), tc.prev)
			}
			if b := g.Bufs[last.In]; b.Rows != 1 || b.Cols != cfg.VocabSize {
				t.Errorf("argmax input %dx%d, want 1x%d", b.Rows, b.Cols, cfg.VocabSize)
			}
		})
	}
}

// TestLayerRopes: each layer's RopeOps carry its rotation: LongRoPE's short
// factors for a context within the original one and the long ones past
// it, the attention factor, a sliding layer's own base without factors,
// and no RoPE at all on a NoPE layer; q and k are normed per head first.
func TestLayerRopes(t *testing.T) {
	long, short := []float32{1, 2}, []float32{1, 1.5}
	c := baseConfig()
	c.Layers = 4
	c.RopeFactors, c.RopeFactorsShort, c.RopeOrigCtx, c.RopeAttnFactor = long, short, 8, 1.25
	c.SlidingWindow, c.SlidingLayers, c.SlidingLayerList, c.RopeBaseLocal = 4, "list", []int{1}, 100
	c.NoRopeLayers, c.QKNorm = []int{2}, true
	type rope struct {
		base    float32
		factors []float32
		scale   float32
	}
	for _, tc := range []struct {
		maxLen int
		want   map[int]rope // per layer; absent: no RoPE
	}{
		{8, map[int]rope{0: {1e4, short, 1.25}, 1: {100, nil, 0}, 3: {1e4, short, 1.25}}},
		{9, map[int]rope{0: {1e4, long, 1.25}, 1: {100, nil, 0}, 3: {1e4, long, 1.25}}},
	} {
		g, err := arch.Build(&c, arch.BuildOptions{Tokens: 1, MaxLen: tc.maxLen})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int][]fusion.RopeParams{}
		norms := map[int]int{}
		layer := -1
		for _, op := range g.Ops {
			switch o := op.(type) {
			case *fusion.StoreKVOp:
				layer = o.Layer
			case *fusion.RopeOp:
				got[layer+1] = append(got[layer+1], o.RopeParams)
			case *fusion.NormOp:
				if o.HeadDim == c.HeadDim {
					norms[layer+1]++
				}
			}
		}
		for l := range c.Layers {
			if norms[l] != 2 {
				t.Errorf("max len %d, layer %d: %d per-head norms, want 2", tc.maxLen, l, norms[l])
			}
			w, ok := tc.want[l]
			if !ok {
				if len(got[l]) != 0 {
					t.Errorf("max len %d, NoPE layer %d has ropes %+v", tc.maxLen, l, got[l])
				}
				continue
			}
			if len(got[l]) != 2 {
				t.Fatalf("max len %d, layer %d: %d ropes, want 2 (q and k)", tc.maxLen, l, len(got[l]))
			}
			for _, r := range got[l] {
				if r.Base != w.base || !slices.Equal(r.Factors, w.factors) || r.Scale != w.scale {
					t.Errorf("max len %d, layer %d: rope %+v, want base %g factors %v scale %g", tc.maxLen, l, r, w.base, w.factors, w.scale)
				}
			}
		}
	}
}
