package synthetic

import (
	"slices"

	"github.com/gpurun/gpurun/tensors/model"
)

// lfm21B: LiquidAI/LFM2-1.2B (Lfm2ForCausalLM), from its config.json:
// hidden 2048, 16 layers of which 6 GQA attention (layer_types
// full_attention at 2, 5, 8, 10, 12, 14: 32 heads of 64, 8 kv heads, q/k
// norms, NEOX RoPE over the whole head, rope_theta 1e6) and 10 gated short
// convolutions (conv_L_cache 3, no bias); a SwiGLU FFN of 8192 (its
// intermediate_size 12288 after Lfm2MLP's block_auto_adjust_ff_dim: two
// thirds, times block_ffn_dim_multiplier 1.0, rounded up to
// block_multiple_of 256), norm_eps 1e-5, vocab 65536, tied, 128000
// positions, bos 1 (<|startoftext|>, prepended), eos 7 (<|im_end|>).
// 1,170,340,608 parameters summed from these dimensions (the card:
// 1.17B).
func lfm21B() Spec {
	attention := []int{2, 5, 8, 10, 12, 14}
	var conv []int
	for l := range 16 {
		if !slices.Contains(attention, l) {
			conv = append(conv, l)
		}
	}
	return Spec{Name: "lfm2-1.2b", Source: "LiquidAI/LFM2-1.2B", Config: model.Config{
		Arch: model.ArchLFM2, VocabSize: 65536, Dim: 2048, HiddenDim: 8192, Layers: 16,
		Heads: 32, KVHeads: 8, HeadDim: 64, MaxSeqLen: 128000,
		Norm: model.NormRMS, NormEps: 1e-5,
		RopeStyle: model.RopeHalves, RopeDims: 64, RopeBase: 1e6,
		Act: model.ActSiLU, GatedFFN: true, QKNorm: true, Tied: true,
		ConvLayers: conv, ConvWidth: 3,
		Activations: model.PolicyF32,
		BOS:         1, EOS: 7, AddBOS: true,
	}}
}
