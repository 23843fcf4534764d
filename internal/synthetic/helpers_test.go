package synthetic

import (
	"math"

	"github.com/gpurun/gpurun/tensors/model"
)

// shrink keeps every architecture knob of c (norm kind, biases, tying,
// gating, parallel blocks, attention grouping, partial rotary fraction,
// embedding scaling) at dimensions small enough to run in a unit test.
func shrink(c model.Config) model.Config {
	s := c
	s.Layers = 2
	s.VocabSize = 512
	s.Dim = 64
	s.HeadDim = 16
	switch {
	case c.KVHeads == c.Heads:
		s.Heads, s.KVHeads = 4, 4
	case c.KVHeads == 1:
		s.Heads, s.KVHeads = 4, 1
	default:
		s.Heads, s.KVHeads = 4, 2
	}
	// The FFN keeps its width ratio, rounded up to whole int4 blocks.
	s.HiddenDim = (c.HiddenDim*s.Dim/c.Dim + Int4Block - 1) / Int4Block * Int4Block
	if c.Experts > 0 {
		s.ExpertHidden = (c.ExpertHidden*s.Dim/c.Dim + Int4Block - 1) / Int4Block * Int4Block
		s.Experts, s.ExpertsUsed = min(c.Experts, 8), min(c.ExpertsUsed, 3)
	}
	s.RopeDims = int(math.Round(float64(c.RopeDims)*float64(s.HeadDim)/float64(c.HeadDim)/2)) * 2
	if c.EmbedScale != 0 {
		s.EmbedScale = float32(math.Sqrt(float64(s.Dim)))
	}
	if c.AttnScale != 0 {
		s.AttnScale = float32(1 / math.Sqrt(float64(s.HeadDim)))
	}
	// Factor tables keep their first entries; layer lists keep their
	// layers below the new depth, or the last layer when none is.
	cut := func(fs []float32) []float32 {
		if fs == nil {
			return nil
		}
		return fs[:s.RopeDims/2]
	}
	s.RopeFactors, s.RopeFactorsShort = cut(c.RopeFactors), cut(c.RopeFactorsShort)
	if s.RopeOrigCtx > 0 {
		s.RopeOrigCtx = 32
	}
	layers := func(ls []int) []int {
		if ls == nil {
			return nil
		}
		var out []int
		for _, l := range ls {
			if l < s.Layers {
				out = append(out, l)
			}
		}
		if out == nil {
			out = []int{s.Layers - 1}
		}
		return out
	}
	s.SlidingLayerList, s.NoRopeLayers = layers(c.SlidingLayerList), layers(c.NoRopeLayers)
	if c.DeltaLayers != nil {
		// One Gated DeltaNet layer and one attention layer, the heads'
		// ratio kept.
		s.DeltaLayers = []int{0}
		s.DeltaKeyHeads, s.DeltaValueHeads, s.DeltaHeadDim = 2, 2*c.DeltaValueHeads/c.DeltaKeyHeads, 16
	}
	if c.ConvLayers != nil {
		// A short convolution layer, then an attention one.
		s.ConvLayers = []int{0}
	}
	if len(c.SSM.Layers) > 0 {
		// A Mamba-2 layer, then an attention one, at arch3's sizes.
		s.SSM = model.SSM{Layers: []int{0}, Inner: 2 * s.Dim, Heads: 8, Groups: 1, State: 16, Conv: 4}
	}
	if s.SlidingWindow > 0 {
		s.SlidingWindow = 8
	}
	s.BOS, s.EOS, s.StopTokens = 1, 2, nil
	if c.SharedKVLayers > 0 {
		s = shrinkGemma4(c, s)
	}
	return s
}

// shrinkGemma4 shrinks Gemma 4's own knobs: ten layers, the last five
// sharing the caches of layers 3 (sliding) and 4 (global) as E2B's last
// twenty share 13's and 14's; head dims 16 (sliding) and 32 (global),
// the global ones with proportional RoPE (a quarter of the pairs turn);
// FFN widths by layer in E2B's proportions (the shared layers' doubled);
// per-layer inputs of 16; the attention scale kept (1).
func shrinkGemma4(c, s model.Config) model.Config {
	s.Layers, s.SharedKVLayers = 10, 5
	s.SlidingLayerList = nil
	for l := range s.Layers {
		if c.LayerWindow(l) > 0 {
			s.SlidingLayerList = append(s.SlidingLayerList, l)
		}
	}
	s.HeadDim, s.HeadDimLocal = 32, 16
	s.RopeDims, s.RopeDimsLocal = 32, 16
	s.RopeFactors = make([]float32, 16)
	for i := range s.RopeFactors {
		s.RopeFactors[i] = 1
		if i >= 4 {
			s.RopeFactors[i] = 1e30
		}
	}
	s.AttnScale = c.AttnScale
	s.PerLayerDim = 16
	if c.LayerHidden != nil {
		s.LayerHidden = make([]int, s.Layers)
		s.HiddenDim = 0
		for l := range s.Layers {
			src := l // the first layers own their caches, the last share
			if l >= s.Layers-s.SharedKVLayers {
				src = c.Layers - (s.Layers - l)
			}
			s.LayerHidden[l] = (c.LayerHidden[src]*s.Dim/c.Dim + Int4Block - 1) / Int4Block * Int4Block
			s.HiddenDim = max(s.HiddenDim, s.LayerHidden[l])
		}
	}
	return s
}

// oddShapes is a llama-style config whose widths do not split into int4
// blocks (48) or even into pairs (hidden 45), to exercise the per-row int4
// and int8 fallbacks.
func oddShapes() model.Config {
	c, _ := ByName("tinyllama-1.1b")
	c.Layers, c.VocabSize, c.Dim, c.HiddenDim = 2, 300, 48, 45
	c.Heads, c.KVHeads, c.HeadDim, c.RopeDims = 4, 2, 12, 12
	c.BOS, c.EOS = 1, 2
	return c
}

// testConfigs are the shrunk specs plus oddShapes, by name.
func testConfigs() []struct {
	name string
	cfg  model.Config
} {
	var out []struct {
		name string
		cfg  model.Config
	}
	for _, s := range Specs() {
		out = append(out, struct {
			name string
			cfg  model.Config
		}{s.Name, shrink(s.Config)})
	}
	return append(out, struct {
		name string
		cfg  model.Config
	}{"odd-shapes", oddShapes()})
}

var quantModes = []string{QuantInt4, QuantInt8, QuantF16, QuantF32}
