package synthetic

import (
	"math"
	"slices"

	"github.com/gpurun/gpurun/tensors/model"
)

// Spec is a named architecture at the dimensions of a published model.
type Spec struct {
	Name   string // what ByName accepts, e.g. "tinyllama-1.1b"
	Source string // the published model whose config.json the dimensions come from
	Config model.Config
}

// Specs returns the built-in architectures, in a fixed order. Each call
// returns fresh copies, so callers may edit them.
//
// Every dimension was checked against the source model's Hugging Face
// config.json (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim or partial rotary
// factor, vocab_size, eps, rope_theta, tie_word_embeddings). The parameter
// counts the tests check are the ones the model cards publish.
func Specs() []Spec {
	return []Spec{
		tinyLlama(),
		gemma2B(),
		phi2(),
		falcon1B(),
		stableLM3B(),
		llama110M(),
		llama32_1B(),
		qwen25_05B(),
		qwen3_06B(),
		gemma3_1B(),
		phi4Mini(),
		smolLM3_3B(),
		qwen3_30B_A3B(),
		qwen3MoESmall(),
		qwen3DenseSmall(),
		gemma4E2B(),
		qwen35_08B(),
		graniteH1B(),
		lfm21B(),
	}
}

// Names lists the names ByName accepts, in the order of Specs.
func Names() []string {
	specs := Specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// ByName returns the configuration of the named spec.
func ByName(name string) (model.Config, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s.Config, true
		}
	}
	return model.Config{}, false
}

// tinyLlama: TinyLlama/TinyLlama-1.1B-Chat-v1.0 (LlamaForCausalLM):
// hidden 2048, intermediate 5632, 22 layers, 32 heads, 4 kv heads,
// vocab 32000, rms_norm_eps 1e-5, rope_theta 10000, untied, 2048 positions,
// bos 1, eos 2. 1,100,048,384 parameters.
func tinyLlama() Spec {
	return Spec{Name: "tinyllama-1.1b", Source: "TinyLlama/TinyLlama-1.1B-Chat-v1.0", Config: model.Config{
		Arch: model.ArchLlama, VocabSize: 32000, Dim: 2048, HiddenDim: 5632, Layers: 22,
		Heads: 32, KVHeads: 4, HeadDim: 64, MaxSeqLen: 2048,
		Norm: model.NormRMS, NormEps: 1e-5,
		// GGUF / Meta order: Q and K rows already permuted for adjacent pairs.
		RopeStyle: model.RopeInterleaved, RopeDims: 64, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true,
		BOS: 1, EOS: 2, AddBOS: true,
	}}
}

// gemma2B: google/gemma-2b (GemmaForCausalLM): hidden 2048, intermediate
// 16384, 18 layers, 8 heads, 1 kv head, head_dim 256, vocab 256000,
// rms_norm_eps 1e-6, rope_theta 10000, tied, gelu_pytorch_tanh GeGLU,
// embeddings scaled by sqrt(hidden), 8192 positions, bos 2, eos 1.
// 2,506,172,416 parameters.
func gemma2B() Spec {
	return Spec{Name: "gemma-2b", Source: "google/gemma-2b", Config: model.Config{
		Arch: model.ArchGemma, VocabSize: 256000, Dim: 2048, HiddenDim: 16384, Layers: 18,
		Heads: 8, KVHeads: 1, HeadDim: 256, MaxSeqLen: 8192,
		// Norm weights are stored as 1+w (the GGUF convention), so the
		// runtime's plain RMSNorm applies.
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 256, RopeBase: 10000,
		Act: model.ActGELUTanh, GatedFFN: true,
		Tied:       true,
		EmbedScale: float32(math.Sqrt(2048)),
		BOS:        2, EOS: 1, AddBOS: true,
	}}
}

// phi2: microsoft/phi-2 (PhiForCausalLM): hidden 2560, intermediate 10240,
// 32 layers, 32 heads (MHA), head_dim 80, partial_rotary_factor 0.4 (32
// rotated dims), vocab 51200, layer_norm_eps 1e-5, rope_theta 10000,
// gelu_new (tanh), parallel attention and MLP on one LayerNorm, biases on
// q/k/v/dense/fc1/fc2, untied lm_head with bias, 2048 positions,
// bos = eos = 50256. 2,779,683,840 parameters.
func phi2() Spec {
	return Spec{Name: "phi-2", Source: "microsoft/phi-2", Config: model.Config{
		Arch: model.ArchPhi2, VocabSize: 51200, Dim: 2560, HiddenDim: 10240, Layers: 32,
		Heads: 32, KVHeads: 32, HeadDim: 80, MaxSeqLen: 2048,
		Norm: model.NormLayer, NormEps: 1e-5,
		RopeStyle: model.RopeHalves, RopeDims: 32, RopeBase: 10000,
		Act: model.ActGELUTanh, Parallel: true,
		QKVBias: true, OutBias: true, FFNBias: true, LMHeadBias: true,
		BOS: 50256, EOS: 50256,
	}}
}

// falcon1B: dimensions of tiiuae/falcon-rw-1b (hidden 2048, 24 layers, 32
// heads of 64, MLP 4*2048 = 8192, vocab 50304, layer_norm_epsilon 1e-5,
// tied embeddings, 2048 positions; 1,311,625,216 parameters with its
// biases). Falcon-RW-1B itself uses ALiBi, multi-head attention, linear
// biases and sequential blocks, which the runtime's falcon architecture
// does not describe. This spec therefore keeps RW-1B's dimensions and takes
// the block of tiiuae/falcon-7b (the architecture llama.cpp and gpurun call
// "falcon"): rotary embeddings (NEOX halves, theta 10000), multi-query
// attention with one kv head, attention and MLP in parallel on one shared
// LayerNorm, exact (erf) GELU, no linear biases. It is a Falcon-class 1B
// shape, not a published checkpoint.
func falcon1B() Spec {
	return Spec{Name: "falcon-1b", Source: "tiiuae/falcon-rw-1b dimensions, tiiuae/falcon-7b block", Config: model.Config{
		Arch: model.ArchFalcon, VocabSize: 50304, Dim: 2048, HiddenDim: 8192, Layers: 24,
		Heads: 32, KVHeads: 1, HeadDim: 64, MaxSeqLen: 2048,
		Norm: model.NormLayer, NormEps: 1e-5,
		RopeStyle: model.RopeHalves, RopeDims: 64, RopeBase: 10000,
		Act: model.ActGELU, Parallel: true,
		Tied: true,
		// GPT-2 BPE (falcon-rw-1b's tokenizer): <|endoftext|> is 50256.
		BOS: 50256, EOS: 50256,
	}}
}

// stableLM3B: stabilityai/stablelm-3b-4e1t (StableLmForCausalLM): hidden
// 2560, intermediate 6912, 32 layers, 32 heads, 32 kv heads, head_dim 80,
// partial_rotary_factor 0.25 (20 rotated dims), vocab 50304,
// layer_norm_eps 1e-5, rope_theta 10000, SwiGLU, sequential blocks with two
// LayerNorms, no linear biases (use_qkv_bias false), untied, 4096
// positions, bos = eos = 0. 2,795,443,200 parameters.
func stableLM3B() Spec {
	return Spec{Name: "stablelm-3b", Source: "stabilityai/stablelm-3b-4e1t", Config: model.Config{
		Arch: model.ArchStableLM, VocabSize: 50304, Dim: 2560, HiddenDim: 6912, Layers: 32,
		Heads: 32, KVHeads: 32, HeadDim: 80, MaxSeqLen: 4096,
		Norm: model.NormLayer, NormEps: 1e-5,
		RopeStyle: model.RopeHalves, RopeDims: 20, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true,
		BOS: 0, EOS: 0,
	}}
}

// llama110M: the 110M Llama shape of llama2.c's stories110M
// (karpathy/tinyllamas), the shape ../shared/tools builds its llama.cpp
// anchor checkpoints at: dim 768, hidden 2048, 12 layers, 12 heads (MHA),
// vocab 32000, 1024 positions, classifier tied to the embedding, RMSNorm
// eps 1e-5, rope theta 10000 on adjacent pairs. 109,529,856 parameters
// (the model card says 110M).
func llama110M() Spec {
	return Spec{Name: "llama-110m", Source: "karpathy/tinyllamas stories110M (llama2.c)", Config: model.Config{
		Arch: model.ArchLlama, VocabSize: 32000, Dim: 768, HiddenDim: 2048, Layers: 12,
		Heads: 12, KVHeads: 12, HeadDim: 64, MaxSeqLen: 1024,
		Norm: model.NormRMS, NormEps: 1e-5,
		RopeStyle: model.RopeInterleaved, RopeDims: 64, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true, Tied: true,
		BOS: 1, EOS: 2, AddBOS: true,
	}}
}

// llama32_1B: meta-llama/Llama-3.2-1B (LlamaForCausalLM): hidden 2048,
// intermediate 8192, 16 layers, 32 heads, 8 kv heads, head_dim 64, vocab
// 128256, rms_norm_eps 1e-5, rope_theta 500000 with rope_scaling llama3
// (factor 32, low_freq_factor 1, high_freq_factor 4, original 8192), tied,
// 131072 positions, bos 128000, eos 128001. 1,235,814,400 parameters.
func llama32_1B() Spec {
	return Spec{Name: "llama-3.2-1b", Source: "meta-llama/Llama-3.2-1B", Config: model.Config{
		Arch: model.ArchLlama, VocabSize: 128256, Dim: 2048, HiddenDim: 8192, Layers: 16,
		Heads: 32, KVHeads: 8, HeadDim: 64, MaxSeqLen: 131072,
		Norm: model.NormRMS, NormEps: 1e-5,
		RopeStyle: model.RopeInterleaved, RopeDims: 64, RopeBase: 500000,
		RopeFactors: model.Llama3RopeFactors(500000, 64, 32, 1, 4, 8192),
		Act:         model.ActSiLU, GatedFFN: true, Tied: true,
		BOS: 128000, EOS: 128001, AddBOS: true,
	}}
}

// qwen25_05B: Qwen/Qwen2.5-0.5B (Qwen2ForCausalLM): hidden 896,
// intermediate 4864, 24 layers, 14 heads, 2 kv heads, head_dim 64, vocab
// 151936, rms_norm_eps 1e-6, rope_theta 1e6, q/k/v biases, tied, 32768
// positions, eos 151643 (no BOS). 494,028,448 parameters summed from these
// dimensions (the card says 0.49B, 0.36B without the embedding).
func qwen25_05B() Spec {
	return Spec{Name: "qwen2.5-0.5b", Source: "Qwen/Qwen2.5-0.5B", Config: model.Config{
		Arch: model.ArchQwen2, VocabSize: 151936, Dim: 896, HiddenDim: 4864, Layers: 24,
		Heads: 14, KVHeads: 2, HeadDim: 64, MaxSeqLen: 32768,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 64, RopeBase: 1e6,
		Act: model.ActSiLU, GatedFFN: true, QKVBias: true, Tied: true,
		Activations: model.PolicyF32,
		BOS:         -1, EOS: 151643,
	}}
}

// qwen3_06B: Qwen/Qwen3-0.6B (Qwen3ForCausalLM): hidden 1024,
// intermediate 3072, 28 layers, 16 heads, 8 kv heads, head_dim 128 (q is
// 2048 wide), q/k RMS norms per head, vocab 151936, rms_norm_eps 1e-6,
// rope_theta 1e6, tied, 40960 positions, eos 151645 (no BOS).
// 596,049,920 parameters.
func qwen3_06B() Spec {
	return Spec{Name: "qwen3-0.6b", Source: "Qwen/Qwen3-0.6B", Config: model.Config{
		Arch: model.ArchQwen3, VocabSize: 151936, Dim: 1024, HiddenDim: 3072, Layers: 28,
		Heads: 16, KVHeads: 8, HeadDim: 128, MaxSeqLen: 40960,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 128, RopeBase: 1e6,
		Act: model.ActSiLU, GatedFFN: true, QKNorm: true, Tied: true,
		Activations: model.PolicyF32,
		BOS:         -1, EOS: 151645,
	}}
}

// gemma3_1B: google/gemma-3-1b-pt (Gemma3ForCausalLM): hidden 1152,
// intermediate 6912, 26 layers, 4 heads, 1 kv head, head_dim 256, vocab
// 262144, rms_norm_eps 1e-6, q/k norms, sandwich norms, GeGLU, embeddings
// scaled by sqrt(hidden), query_pre_attn_scalar 256; five of every six
// layers slide over 512 positions with rope_local_base_freq 10000, the
// others rope_theta 1e6; tied, 32768 positions, bos 2, eos 1.
// 999,885,952 parameters.
func gemma3_1B() Spec {
	var sliding []int
	for l := range 26 {
		if l%6 < 5 {
			sliding = append(sliding, l)
		}
	}
	return Spec{Name: "gemma-3-1b", Source: "google/gemma-3-1b-pt", Config: model.Config{
		Arch: model.ArchGemma3, VocabSize: 262144, Dim: 1152, HiddenDim: 6912, Layers: 26,
		Heads: 4, KVHeads: 1, HeadDim: 256, MaxSeqLen: 32768,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 256, RopeBase: 1e6, RopeBaseLocal: 10000,
		Act: model.ActGELUTanh, GatedFFN: true, PostNorms: true, QKNorm: true, Tied: true,
		EmbedScale: float32(math.Sqrt(1152)), AttnScale: 1.0 / 16,
		SlidingWindow: 512, SlidingLayers: "list", SlidingLayerList: sliding,
		Activations: model.PolicyF32,
		BOS:         2, EOS: 1, AddBOS: true,
	}}
}

// phi4Mini: microsoft/Phi-4-mini-instruct (Phi3ForCausalLM): hidden 3072,
// intermediate 8192, 32 layers, 24 heads, 8 kv heads, head_dim 128,
// partial_rotary_factor 0.75 (96 rotated dims), vocab 200064,
// rms_norm_eps 1e-5, rope_theta 10000, LongRoPE from 4096 to 131072
// positions (attention factor sqrt(1+ln 32/ln 4096)), tied, bos = eos =
// 199999. 3,836,021,760 parameters. The long and short factor lists are
// set to 1 here: a bench shape, whose work they do not change.
func phi4Mini() Spec {
	ones := make([]float32, 48)
	for i := range ones {
		ones[i] = 1
	}
	return Spec{Name: "phi-4-mini", Source: "microsoft/Phi-4-mini-instruct", Config: model.Config{
		Arch: model.ArchPhi3, VocabSize: 200064, Dim: 3072, HiddenDim: 8192, Layers: 32,
		Heads: 24, KVHeads: 8, HeadDim: 128, MaxSeqLen: 131072,
		Norm: model.NormRMS, NormEps: 1e-5,
		RopeStyle: model.RopeHalves, RopeDims: 96, RopeBase: 10000,
		RopeFactors: ones, RopeFactorsShort: ones, RopeOrigCtx: 4096,
		RopeAttnFactor: float32(math.Sqrt(1 + math.Log(32)/math.Log(4096))),
		Act:            model.ActSiLU, GatedFFN: true, Tied: true,
		Activations: model.PolicyF32,
		BOS:         199999, EOS: 199999,
	}}
}

// smolLM3_3B: HuggingFaceTB/SmolLM3-3B (SmolLM3ForCausalLM): hidden 2048,
// intermediate 11008, 36 layers, 16 heads, 4 kv heads, head_dim 128, vocab
// 128256, rms_norm_eps 1e-6, rope_theta 5e6, no RoPE on every fourth
// layer, tied, 65536 positions, eos 128012 (no BOS). 3,075,098,624
// parameters.
func smolLM3_3B() Spec {
	var nope []int
	for l := range 36 {
		if (l+1)%4 == 0 {
			nope = append(nope, l)
		}
	}
	return Spec{Name: "smollm3-3b", Source: "HuggingFaceTB/SmolLM3-3B", Config: model.Config{
		Arch: model.ArchSmolLM3, VocabSize: 128256, Dim: 2048, HiddenDim: 11008, Layers: 36,
		Heads: 16, KVHeads: 4, HeadDim: 128, MaxSeqLen: 65536,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 128, RopeBase: 5e6, NoRopeLayers: nope,
		Act: model.ActSiLU, GatedFFN: true, Tied: true,
		BOS: -1, EOS: 128012,
	}}
}

// qwen3_30B_A3B: Qwen/Qwen3-30B-A3B (Qwen3MoeForCausalLM): hidden 2048,
// 48 layers, 32 heads, 4 kv heads, head_dim 128, vocab 151936, every
// layer a mixture of 128 experts of moe_intermediate_size 768, 8 per
// token, norm_topk_prob, rms_norm_eps 1e-6, rope_theta 1e6, untied, 40960
// positions, eos 151645 (no BOS). intermediate_size 6144 is unused.
// 30,532,122,624 parameters, about 3.3B of them read per token.
func qwen3_30B_A3B() Spec {
	return Spec{Name: "qwen3-30b-a3b", Source: "Qwen/Qwen3-30B-A3B", Config: qwen3MoEConfig(48, 128, 8)}
}

// qwen3MoESmall: Qwen3-30B-A3B's layer shapes with 24 layers of 32
// experts (8 per token): 3.6B expert parameters, 2.0 GB at int4, so that
// a MoE model fits a small machine. Not a published model.
func qwen3MoESmall() Spec {
	return Spec{Name: "qwen3-moe-small", Source: "Qwen/Qwen3-30B-A3B scaled down (24 layers, 32 experts)", Config: qwen3MoEConfig(24, 32, 8)}
}

// qwen3DenseSmall: qwen3-moe-small with a dense SwiGLU of 6144 units (its
// 8 used experts of 768) in place of the experts, so that a decode step
// reads the same bytes as qwen3-moe-small's: the dense baseline of the
// mixture. Not a published model.
func qwen3DenseSmall() Spec {
	c := qwen3MoEConfig(24, 0, 0)
	c.Arch = model.ArchQwen3
	c.HiddenDim = 8 * 768
	return Spec{Name: "qwen3-dense-small", Source: "qwen3-moe-small's dense twin (FFN 8 x 768)", Config: c}
}

func qwen3MoEConfig(layers, experts, used int) model.Config {
	c := model.Config{
		Arch: model.ArchQwen3MoE, VocabSize: 151936, Dim: 2048, HiddenDim: 6144, Layers: layers,
		Heads: 32, KVHeads: 4, HeadDim: 128, MaxSeqLen: 40960,
		Norm: model.NormRMS, NormEps: 1e-6,
		RopeStyle: model.RopeHalves, RopeDims: 128, RopeBase: 1e6,
		Act: model.ActSiLU, GatedFFN: true, QKNorm: true,
		Activations: model.PolicyF32,
		BOS:         -1, EOS: 151645,
	}
	if experts > 0 {
		c.Experts, c.ExpertsUsed, c.ExpertHidden, c.NormTopK = experts, used, 768, true
	}
	return c
}

// graniteH1B: the shape of ibm-granite/granite-4.0-h-1b
// (GraniteMoeHybridForCausalLM, dense: no routed experts): hidden 1536, 40
// layers of which 4 attention (5, 15, 25, 35: layer_types) and 36 Mamba-2
// (48 heads of 64, d_inner 3072, d_state 128, 1 group, conv 4), 12 heads
// and 4 KV heads of 128 with no position embedding (NoPE), SwiGLU
// shared_intermediate_size 4096, vocab 100352, tied, RMSNorm eps 1e-5,
// 131072 positions. Its multipliers are those of granite-4.0-h-350m's
// config.json (embedding 12, residual 0.246, logits scaling 3), with the
// attention multiplier 1/head_dim as there (1/64 at head dim 64); they
// change no shape or cost. 1,461,538,368 parameters summed from these
// dimensions (the card says 1.5B).
func graniteH1B() Spec {
	attention := []int{5, 15, 25, 35}
	var ssm []int
	for l := range 40 {
		if !slices.Contains(attention, l) {
			ssm = append(ssm, l)
		}
	}
	return Spec{Name: "granite-4.0-h-1b", Source: "ibm-granite/granite-4.0-h-1b", Config: model.Config{
		Arch: model.ArchGraniteHybrid, VocabSize: 100352, Dim: 1536, HiddenDim: 4096, Layers: 40,
		Heads: 12, KVHeads: 4, HeadDim: 128, MaxSeqLen: 131072,
		Norm: model.NormRMS, NormEps: 1e-5,
		RopeStyle: model.RopeInterleaved, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true, Tied: true,
		SSM:        model.SSM{Layers: ssm, Inner: 3072, Heads: 48, Groups: 1, State: 128, Conv: 4},
		EmbedScale: 12, AttnScale: 1.0 / 128, ResidualScale: 0.246, LogitScale: 3,
		Activations: model.PolicyF32,
		BOS:         100257, EOS: 100257,
	}}
}
