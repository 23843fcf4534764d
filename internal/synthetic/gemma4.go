package synthetic

import (
	"math"

	"github.com/gpurun/gpurun/tensors/model"
)

// gemma4E2B: the text decoder of google/gemma-4-E2B (Gemma4ForConditionalGeneration,
// llama.cpp arch gemma4) at the dimensions its model card and llama.cpp's
// loader give: hidden 1536, 35 layers, 8 heads, 1 kv head; sliding layers
// (four of every five, the fifth global: layers 4, 9, ..., 34) of head dim
// 256 over a 512-position window with RoPE base 1e4 on the whole head;
// global layers of head dim 512 with proportional RoPE (base 1e6, the
// first quarter of the pairs turning, the exponent over the whole head:
// factors 1 then 1e30, as the converter writes rope_freqs); the last 20
// layers have no keys and values of their own and read layer 13's
// (sliding) or 14's (global) cache; per-layer inputs of 256 per layer from
// a [262144, 35*256] table; GeGLU of 6144, doubled to 12288 on the 20
// shared layers (use_double_wide_mlp); q/k norms and a V norm without
// weight, sandwich norms, a scalar per layer, attention scale 1, final
// logits soft-capped at 30; tied, 131072 positions, bos 2, eos 1.
//
// Assumptions where no config.json was at hand: the FFN width (6144) and
// its doubling, the 4:1 layer pattern ending on a global layer, the 30.0
// soft cap and the 131072-position context are taken from the published
// descriptions of Gemma 4 (model card: 5.1B parameters with the vision
// and audio towers, 2.3B effective) and Gemma 3n; the text decoder here
// sums to 4.63B. A bench shape: the work per token is what these
// dimensions give.
func gemma4E2B() Spec {
	const layers, shared, window = 35, 20, 512
	var sliding []int
	hidden := make([]int, layers)
	for l := range layers {
		if (l+1)%5 != 0 {
			sliding = append(sliding, l)
		}
		hidden[l] = 6144
		if l >= layers-shared {
			hidden[l] = 2 * 6144
		}
	}
	// Proportional RoPE on the 512-dim global heads: 64 of 256 pairs turn.
	factors := make([]float32, 256)
	for i := range factors {
		factors[i] = 1
		if i >= 64 {
			factors[i] = 1e30
		}
	}
	return Spec{Name: "gemma-4-e2b", Source: "google/gemma-4-E2B (text decoder)", Config: model.Config{
		Arch: model.ArchGemma4, VocabSize: 262144, Dim: 1536, HiddenDim: 2 * 6144, LayerHidden: hidden, Layers: layers,
		Heads: 8, KVHeads: 1, HeadDim: 512, HeadDimLocal: 256, MaxSeqLen: 131072,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 512, RopeDimsLocal: 256, RopeBase: 1e6, RopeBaseLocal: 10000, RopeFactors: factors,
		Act: model.ActGELUTanh, GatedFFN: true, PostNorms: true, QKNorm: true, VNorm: true, Tied: true,
		EmbedScale: float32(math.Sqrt(1536)), AttnScale: 1, FinalSoftCap: 30,
		SlidingWindow: window, SlidingLayers: "list", SlidingLayerList: sliding,
		SharedKVLayers: shared, PerLayerDim: 256, LayerOutputScale: true,
		Activations: model.PolicyF32,
		BOS:         2, EOS: 1, AddBOS: true,
	}}
}
