package synthetic

import "github.com/gpurun/gpurun/tensors/model"

// qwen35_08B: Qwen/Qwen3.5-0.8B's text model (Qwen3_5ForCausalLM):
// hidden 1024, intermediate 3584, 24 layers, every fourth gated full
// attention (8 heads, 2 kv heads, head_dim 256, a quarter of it rotated:
// 64 dims, rope_theta 1e7, attn_output_gate) and the others Gated
// DeltaNet (linear_conv_kernel_dim 4, 16 key heads and 16 value heads of
// 128), rms_norm_eps 1e-6, vocab 248320, tied, 262144 positions, eos
// 248046 (no BOS). The linear-attention sizes are those of the Qwen3.5
// configs at hidden 1024 (the family keeps them from 0.8B to 2B); the
// vision tower and the MTP head are not part of it. 752,393,344
// parameters, summed (the card's 0.8B counts the vision tower).
func qwen35_08B() Spec {
	var delta []int
	for l := range 24 {
		if (l+1)%4 != 0 {
			delta = append(delta, l)
		}
	}
	return Spec{Name: "qwen3.5-0.8b", Source: "Qwen/Qwen3.5-0.8B (text model)", Config: model.Config{
		Arch: model.ArchQwen35, VocabSize: 248320, Dim: 1024, HiddenDim: 3584, Layers: 24,
		Heads: 8, KVHeads: 2, HeadDim: 256, MaxSeqLen: 262144,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 64, RopeBase: 1e7,
		Act: model.ActSiLU, GatedFFN: true, QKNorm: true, Tied: true,
		AttnOutputGate: true,
		DeltaLayers:    delta, DeltaConvWidth: 4, DeltaKeyHeads: 16, DeltaValueHeads: 16, DeltaHeadDim: 128,
		Activations: model.PolicyF32,
		BOS:         -1, EOS: 248046,
	}}
}
