// Package model holds what every model file, importer and runtime agrees on:
// the architecture configuration, the tensor naming scheme and the checkpoint
// a converter turns into a model file.
//
// Import it to build a checkpoint in memory (gpurun.OpenCheckpoint) or
// read a loaded model's configuration.
package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Architectures known to the runtime.
const (
	ArchLlama    = "llama"
	ArchGemma    = "gemma"
	ArchGemma2   = "gemma2"
	ArchPhi2     = "phi2"
	ArchFalcon   = "falcon"
	ArchStableLM = "stablelm"
	ArchQwen2    = "qwen2"
	ArchQwen3    = "qwen3"
	ArchGemma3   = "gemma3"
	ArchPhi3     = "phi3"
	ArchSmolLM3  = "smollm3"
	ArchQwen3MoE = "qwen3moe"
	ArchGPTOSS   = "gpt-oss"
	ArchGemma4   = "gemma4"
	ArchLFM2     = "lfm2"
	// ArchGraniteHybrid is Granite 4.0 H: Mamba-2 layers beside NoPE
	// attention, with Granite's multipliers (granite_hybrid.go).
	ArchGraniteHybrid = "granitehybrid"
	// ArchGemmaEmbedding is EmbeddingGemma: Gemma 3's blocks with
	// bidirectional attention, mean pooling and two dense projections.
	ArchGemmaEmbedding = "gemma-embedding"
	// ArchBERT is BERT (BGE, MiniLM): learned positions, post-LN blocks,
	// bidirectional attention, an embedding model.
	ArchBERT = "bert"
)

// Poolings of an embedding model (Config.Pooling), llama.cpp's
// pooling_type: over the final-norm hidden states of every fed token.
const (
	PoolNone = ""     // not an embedding model: logits
	PoolMean = "mean" // the mean of every row
	PoolCLS  = "cls"  // the first row
	PoolLast = "last" // the last row
)

// Norm kinds.
const (
	NormRMS   = "rms"   // x / sqrt(mean(x^2) + eps) * w
	NormLayer = "layer" // (x - mean) / sqrt(var + eps) * w + b
)

// RoPE pairings. Interleaved rotates pairs (2i, 2i+1) (Meta / llama2.c / GGUF
// llama "NORM"); Halves rotates pairs (i, i+n/2) of the rotary dims (HF / NEOX).
const (
	RopeInterleaved = "interleaved"
	RopeHalves      = "halves"
)

// Activations of the feed-forward block.
const (
	ActSiLU     = "silu"
	ActGELUTanh = "gelu_tanh" // tanh approximation, as llama.cpp and Gemma use
	ActGELU     = "gelu"      // erf form
	ActReLU     = "relu"
	// ActSwiGLUOAI is gpt-oss's gated activation of its experts (llama.cpp's
	// swiglu_oai): g = min(gate, 7), u = clamp(up, -7, 7),
	// g·sigmoid(1.702·g)·(u + 1). Gated mixtures of experts only.
	ActSwiGLUOAI = "swiglu_oai"
)

// Expert gatings (Config.ExpertGating).
const (
	// GatingSoftmax: softmax over every expert's logit, then the
	// ExpertsUsed most probable, weighted by their probabilities (Qwen 3
	// MoE; renormalized with NormTopK).
	GatingSoftmax = ""
	// GatingTopKSoftmax: the ExpertsUsed largest logits, weighted by the
	// softmax of those alone (gpt-oss; llama.cpp's softmax_weight).
	GatingTopKSoftmax = "topk_softmax"
)

// Activation precision policies.
const (
	PolicyAuto = "auto" // f16 where the device supports it
	PolicyF32  = "f32"
	PolicyF16  = "f16"
)

// Config describes a decoder-only transformer completely enough to build its
// forward pass. It is stored as JSON in the model file's metadata.
type Config struct {
	Arch      string `json:"arch"`
	VocabSize int    `json:"vocab_size"`
	Dim       int    `json:"dim"`        // model (embedding) width
	HiddenDim int    `json:"hidden_dim"` // feed-forward width
	Layers    int    `json:"layers"`
	Heads     int    `json:"heads"`
	KVHeads   int    `json:"kv_heads"`
	HeadDim   int    `json:"head_dim"`
	MaxSeqLen int    `json:"max_seq_len"` // context length the model was trained for

	Norm    string  `json:"norm"`
	NormEps float32 `json:"norm_eps"`

	RopeStyle string  `json:"rope_style"`
	RopeDims  int     `json:"rope_dims"` // rotated dims per head (partial rotary < HeadDim)
	RopeBase  float32 `json:"rope_base"`

	Act       string `json:"act"`
	GatedFFN  bool   `json:"gated_ffn"`  // down(act(gate x) * up x) rather than down(act(up x))
	Parallel  bool   `json:"parallel"`   // x + attn(n(x)) + ffn(n(x)) with one shared norm
	PostNorms bool   `json:"post_norms"` // Gemma 2: norm the attention and FFN outputs before the residual add

	QKVBias    bool `json:"qkv_bias,omitempty"`
	OutBias    bool `json:"out_bias,omitempty"` // attention output projection bias
	FFNBias    bool `json:"ffn_bias,omitempty"`
	LMHeadBias bool `json:"lm_head_bias,omitempty"`
	Tied       bool `json:"tied_embedding"` // the LM head is the token embedding

	EmbedScale    float32 `json:"embed_scale,omitempty"`    // multiply embeddings (0: none)
	AttnScale     float32 `json:"attn_scale,omitempty"`     // score scale (0: 1/sqrt(HeadDim))
	AttnSoftCap   float32 `json:"attn_softcap,omitempty"`   // c*tanh(s/c) on scaled scores (0: none)
	FinalSoftCap  float32 `json:"final_softcap,omitempty"`  // c*tanh(l/c) on logits (0: none)
	SlidingWindow int     `json:"sliding_window,omitempty"` // keys with q-p < window are visible (0: none)
	// SlidingLayers says which layers slide: "even" (0, 2, 4...), "all",
	// or "list" (the layers of SlidingLayerList).
	SlidingLayers    string `json:"sliding_layers,omitempty"`
	SlidingLayerList []int  `json:"sliding_layer_list,omitempty"`

	// QKNorm: each head of q and of k is RMS-normed (eps NormEps) by the
	// per-layer QNorm / KNorm weights of HeadDim values, before RoPE
	// (Qwen 3, Gemma 3).
	QKNorm bool `json:"qk_norm,omitempty"`
	// RopeFactors divide the angle of each rotated pair, θ_i =
	// pos·RopeBase^(-2i/RopeDims) / RopeFactors[i] (RopeDims/2 values; nil:
	// none): Llama 3's rope_freqs, linear scaling (all = factor), LongRoPE's
	// long factors.
	RopeFactors []float32 `json:"rope_factors,omitempty"`
	// RopeFactorsShort are LongRoPE's short factors, used in place of
	// RopeFactors when the context the runtime allocates is at most
	// RopeOrigCtx (the trained context of the short factors).
	RopeFactorsShort []float32 `json:"rope_factors_short,omitempty"`
	RopeOrigCtx      int       `json:"rope_orig_ctx,omitempty"`
	// RopeAttnFactor multiplies cos and sin of the rotated dims (0: 1):
	// LongRoPE's attention factor.
	RopeAttnFactor float32 `json:"rope_attn_factor,omitempty"`
	// RopeBaseLocal, when set, is the RoPE base of the sliding-window
	// layers, which then take no factors and no attention factor (Gemma 3).
	RopeBaseLocal float32 `json:"rope_base_local,omitempty"`
	// NoRopeLayers lists the layers without RoPE (SmolLM3's NoPE layers).
	NoRopeLayers []int `json:"no_rope_layers,omitempty"`

	// Experts > 0 makes every layer's FFN a mixture of experts (Qwen 3
	// MoE): router logits Router·x over Experts experts, softmax, the
	// ExpertsUsed most probable experts (their probabilities renormalized
	// to sum 1 with NormTopK), each a gated FFN of ExpertHidden units
	// (act per Act) whose outputs are summed weighted by those
	// probabilities. HiddenDim is then unused (but still positive).
	Experts      int  `json:"experts,omitempty"`
	ExpertsUsed  int  `json:"experts_used,omitempty"`
	ExpertHidden int  `json:"expert_hidden,omitempty"`
	NormTopK     bool `json:"norm_top_k,omitempty"`
	// ExpertGating is how experts are chosen and weighted (Gating*).
	ExpertGating string `json:"expert_gating,omitempty"`
	// RouterBias: the router adds a bias per expert (RouterBias);
	// ExpertBias: each expert's gate, up and down products add their own
	// bias (ExpertsGateBias, ExpertsUpBias, ExpertsDownBias) (gpt-oss).
	RouterBias bool `json:"router_bias,omitempty"`
	ExpertBias bool `json:"expert_bias,omitempty"`
	// AttnSinks: each head of every layer has a learned logit (AttnSinks)
	// that joins its softmax over the attended keys with no value (gpt-oss).
	AttnSinks bool `json:"attn_sinks,omitempty"`

	// Gemma 4 (gemma4), see ../shared/models/arch3/README.md:
	//
	// HeadDimLocal, when set, is the head dim of the sliding-window layers
	// and RopeDimsLocal their rotated dims; HeadDim and RopeDims are then
	// the global layers'.
	HeadDimLocal  int `json:"head_dim_local,omitempty"`
	RopeDimsLocal int `json:"rope_dims_local,omitempty"`
	// LayerHidden, when set, is each layer's FFN width (HiddenDim is then
	// the widest).
	LayerHidden []int `json:"layer_hidden,omitempty"`
	// SharedKVLayers > 0: the last SharedKVLayers layers have no keys and
	// values of their own (no WK, WV, KNorm) and attend to the cache of
	// layer n-2 (sliding) or n-1 (global), n = Layers-SharedKVLayers, as
	// llama.cpp hard-codes it (src/llama-model.cpp); see KVLayer.
	SharedKVLayers int `json:"shared_kv_layers,omitempty"`
	// VNorm: each head of v is RMS-normed, without a weight, before it is
	// stored.
	VNorm bool `json:"v_norm,omitempty"`
	// PerLayerDim > 0 gives every layer a per-layer input of PerLayerDim
	// values, made once from the token (PerLayerEmbedding) and the scaled
	// embedding (PerLayerModelProj, PerLayerProjNorm), and added after the
	// FFN through a gate (PerLayerGate, PerLayerProj, PerLayerPostNorm).
	PerLayerDim int `json:"per_layer_dim,omitempty"`
	// LayerOutputScale: every layer's output is multiplied by its scalar
	// LayerScale tensor.
	LayerOutputScale bool `json:"layer_output_scale,omitempty"`
	// ConvLayers lists the layers whose mixer is a gated short
	// convolution (LFM2) in place of attention: [B | C | x] = ConvInProj·h,
	// the causal depthwise convolution of B⊙x over ConvWidth positions
	// (ConvKernel), gated by C, then ConvOutProj. Such a layer has no
	// attention tensors and keeps a recurrent state of its last
	// ConvWidth-1 convolution inputs instead of keys and values.
	ConvLayers []int `json:"conv_layers,omitempty"`
	ConvWidth  int   `json:"conv_width,omitempty"`
	// DeltaLayers lists the layers whose mixer is a Gated DeltaNet
	// (Qwen3.5; see fusion.GatedDeltaNetOp): q, k, v = DeltaQKV·h through
	// a causal convolution of DeltaConvWidth taps and SiLU, DeltaKeyHeads
	// key heads and DeltaValueHeads value heads of DeltaHeadDim, the
	// delta rule with its decay and beta gates, then a per-head RMS norm
	// gated by SiLU(DeltaZ·h) and DeltaOut. Such a layer has no attention
	// tensors and keeps its convolution window and a state matrix per
	// value head instead of keys and values.
	DeltaLayers     []int `json:"delta_layers,omitempty"`
	DeltaConvWidth  int   `json:"delta_conv_width,omitempty"`
	DeltaKeyHeads   int   `json:"delta_key_heads,omitempty"`
	DeltaValueHeads int   `json:"delta_value_heads,omitempty"`
	DeltaHeadDim    int   `json:"delta_head_dim,omitempty"`
	// AttnOutputGate: every attention layer's output is gated per value,
	// att ⊙ sigmoid(WQGate·h), before its output projection (Qwen3.5).
	AttnOutputGate bool `json:"attn_output_gate,omitempty"`
	// SharedExpertHidden > 0 (with Experts) adds a shared expert to every
	// mixture: a gated FFN of SharedExpertHidden units (SharedGate,
	// SharedUp, SharedDown) whose output, times sigmoid(SharedRouter·x),
	// is added to the routed experts' (Qwen3.5 MoE).
	SharedExpertHidden int `json:"shared_expert_hidden,omitempty"`
	// Granite 4.0 H's Mamba-2 layers and multipliers (see SSM and
	// granite_hybrid.go).
	SSM SSM `json:"ssm,omitzero"`
	// ResidualScale, when set, multiplies every mixer output and every
	// FFN output before its residual add (Granite's residual_multiplier).
	ResidualScale float32 `json:"residual_scale,omitempty"`
	// LogitScale, when set, divides the logits (Granite's logits_scaling).
	LogitScale float32 `json:"logit_scale,omitempty"`

	Activations string `json:"activations,omitempty"` // PolicyAuto, PolicyF32, PolicyF16

	// Embedding models (../shared/models/embed/README.md):
	//
	// Pooling (Pool*) makes the model an embedding model: its output is
	// the pooled final-norm hidden states, not logits.
	Pooling string `json:"pooling,omitempty"`
	// NonCausal: every token attends to every token of its step (and a
	// sliding window is symmetric, |i-j| <= window/2), as llama.cpp's
	// encoder runs gemma-embedding and BERT.
	NonCausal bool `json:"non_causal,omitempty"`
	// DenseDim > 0: after pooling, out = DenseOut·(DenseIn·pooled), with
	// DenseIn [DenseDim, Dim] and DenseOut [Dim, DenseDim], no bias and no
	// activation (EmbeddingGemma's dense_2 and dense_3).
	DenseDim int `json:"dense_dim,omitempty"`
	// AddEOS: the tokenizer appends EOS to an embedding input (llama.cpp's
	// add_eos_token; Qwen3-Embedding's <|endoftext|>).
	AddEOS bool `json:"add_eos,omitempty"`
	// BERT: LearnedPositions adds row Pos+t of PositionEmbedding (one row
	// per position up to MaxSeqLen, the token type 0 row folded in) to
	// token t's embedding; EmbedNorm norms the sum (EmbedNorm,
	// EmbedNormBias) before the first layer; PostLN makes each block
	// x = norm(x + attn(x)), x = norm2(x + ffn(x)) (AttnNorm and FFNNorm
	// after the adds), with no final norm.
	LearnedPositions bool `json:"learned_positions,omitempty"`
	EmbedNorm        bool `json:"embed_norm,omitempty"`
	PostLN           bool `json:"post_ln,omitempty"`

	BOS          int    `json:"bos"` // -1: none
	EOS          int    `json:"eos"` // -1: none
	StopTokens   []int  `json:"stop_tokens,omitempty"`
	AddBOS       bool   `json:"add_bos"`
	PromptPrefix string `json:"prompt_prefix,omitempty"`
	PromptSuffix string `json:"prompt_suffix,omitempty"`
}

// ErrConfig reports an inconsistent configuration.
var ErrConfig = errors.New("model: invalid config")

// Scale is the attention score scale.
func (c *Config) Scale() float32 {
	if c.AttnScale != 0 {
		return c.AttnScale
	}
	return float32(1 / math.Sqrt(float64(c.HeadDim)))
}

// ConvLayer reports whether layer l's mixer is a gated short convolution
// (ConvLayers) rather than attention.
func (c *Config) ConvLayer(l int) bool { return slices.Contains(c.ConvLayers, l) }

// Recurrent reports whether some layer keeps a recurrent state rather
// than keys and values (a hybrid model: its state can only go forward).
func (c *Config) Recurrent() bool {
	return len(c.ConvLayers) > 0 || len(c.DeltaLayers) > 0 || len(c.SSM.Layers) > 0
}

// LayerWindow is the sliding window of layer l, 0 for global attention.
func (c *Config) LayerWindow(l int) int {
	switch c.SlidingLayers {
	case "all":
		return c.SlidingWindow
	case "even":
		if l%2 == 0 {
			return c.SlidingWindow
		}
	case "list":
		if slices.Contains(c.SlidingLayerList, l) {
			return c.SlidingWindow
		}
	}
	return 0
}

// LayerHeadDim is the head dim of layer l (HeadDimLocal on a sliding
// layer when set).
func (c *Config) LayerHeadDim(l int) int {
	if c.HeadDimLocal > 0 && c.LayerWindow(l) > 0 {
		return c.HeadDimLocal
	}
	return c.HeadDim
}

// LayerRopeDims is the rotated dims of layer l's heads.
func (c *Config) LayerRopeDims(l int) int {
	if c.HeadDimLocal > 0 && c.LayerWindow(l) > 0 {
		return c.RopeDimsLocal
	}
	return c.RopeDims
}

// LayerHiddenDim is the FFN width of layer l.
func (c *Config) LayerHiddenDim(l int) int {
	if c.LayerHidden != nil {
		return c.LayerHidden[l]
	}
	return c.HiddenDim
}

// KVLayer is the layer whose KV cache layer l attends to: l itself, or
// for one of the last SharedKVLayers layers, the last layer before them
// of the same kind (n-2 for a sliding layer, n-1 for a global one, with n
// = Layers-SharedKVLayers; Validate checks their kinds).
func (c *Config) KVLayer(l int) int {
	n := c.Layers - c.SharedKVLayers
	if c.SharedKVLayers == 0 || l < n {
		return l
	}
	if c.LayerWindow(l) > 0 {
		return n - 2
	}
	return n - 1
}

// LayerRope is the rotation of layer l for a context of ctx positions:
// ok false for a NoPE layer; otherwise the base, the per-pair factors (nil:
// none) and the cos/sin scale (1: none).
func (c *Config) LayerRope(l, ctx int) (base float32, factors []float32, scale float32, ok bool) {
	if c.RopeDims == 0 || slices.Contains(c.NoRopeLayers, l) {
		return 0, nil, 0, false
	}
	if c.RopeBaseLocal > 0 && c.LayerWindow(l) > 0 {
		return c.RopeBaseLocal, nil, 1, true
	}
	factors = c.RopeFactors
	if c.RopeFactorsShort != nil && ctx <= c.RopeOrigCtx {
		factors = c.RopeFactorsShort
	}
	scale = c.RopeAttnFactor
	if scale == 0 {
		scale = 1
	}
	return c.RopeBase, factors, scale, true
}

// Validate checks that the dimensions are positive, consistent and small
// enough that products of them cannot overflow.
func (c *Config) Validate() error {
	const limit = 1 << 24
	for _, d := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"dim", c.Dim}, {"hidden_dim", c.HiddenDim}, {"layers", c.Layers},
		{"heads", c.Heads}, {"kv_heads", c.KVHeads}, {"head_dim", c.HeadDim}} {
		if d.v <= 0 || d.v > limit {
			return fmt.Errorf("%w: %s = %d", ErrConfig, d.name, d.v)
		}
	}
	if c.Experts != 0 {
		if c.Experts < 0 || c.Experts > 1<<16 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts ||
			c.ExpertHidden <= 0 || c.ExpertHidden > limit || !c.GatedFFN {
			return fmt.Errorf("%w: %d experts, %d used, expert_hidden %d, gated %t", ErrConfig, c.Experts, c.ExpertsUsed, c.ExpertHidden, c.GatedFFN)
		}
		switch c.ExpertGating {
		case GatingSoftmax, GatingTopKSoftmax:
		default:
			return fmt.Errorf("%w: expert_gating %q", ErrConfig, c.ExpertGating)
		}
	} else if c.ExpertsUsed != 0 || c.ExpertHidden != 0 || c.NormTopK || c.ExpertGating != "" || c.RouterBias || c.ExpertBias {
		return fmt.Errorf("%w: experts_used %d, expert_hidden %d without experts", ErrConfig, c.ExpertsUsed, c.ExpertHidden)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("%w: heads %d not a multiple of kv_heads %d", ErrConfig, c.Heads, c.KVHeads)
	}
	if err := c.validateGemma4(); err != nil {
		return err
	}
	if err := c.validateDelta(); err != nil {
		return err
	}
	if c.RopeDims < 0 || c.RopeDims > c.HeadDim || c.RopeDims%2 != 0 {
		return fmt.Errorf("%w: rope_dims %d with head_dim %d", ErrConfig, c.RopeDims, c.HeadDim)
	}
	switch c.Norm {
	case NormRMS, NormLayer:
	default:
		return fmt.Errorf("%w: norm %q", ErrConfig, c.Norm)
	}
	switch c.RopeStyle {
	case RopeInterleaved, RopeHalves:
	default:
		return fmt.Errorf("%w: rope_style %q", ErrConfig, c.RopeStyle)
	}
	switch c.Act {
	case ActSwiGLUOAI:
		if c.Experts == 0 {
			return fmt.Errorf("%w: act %q outside a mixture of experts", ErrConfig, c.Act)
		}
	case ActSiLU, ActGELUTanh, ActGELU, ActReLU:
	default:
		return fmt.Errorf("%w: act %q", ErrConfig, c.Act)
	}
	switch c.Activations {
	case "", PolicyAuto, PolicyF32, PolicyF16:
	default:
		return fmt.Errorf("%w: activations %q", ErrConfig, c.Activations)
	}
	switch c.SlidingLayers {
	case "", "even", "all", "list":
	default:
		return fmt.Errorf("%w: sliding_layers %q", ErrConfig, c.SlidingLayers)
	}
	switch c.Pooling {
	case PoolNone, PoolMean, PoolCLS, PoolLast:
	default:
		return fmt.Errorf("%w: pooling %q", ErrConfig, c.Pooling)
	}
	if c.PostLN && (c.Parallel || c.PostNorms) {
		return fmt.Errorf("%w: post-LN blocks with parallel blocks or post-norms", ErrConfig)
	}
	if c.LearnedPositions && c.MaxSeqLen <= 0 {
		return fmt.Errorf("%w: learned positions without max_seq_len", ErrConfig)
	}
	if c.DenseDim < 0 || c.DenseDim > limit || c.DenseDim > 0 && c.Pooling == PoolNone {
		return fmt.Errorf("%w: dense_dim %d with pooling %q", ErrConfig, c.DenseDim, c.Pooling)
	}
	if len(c.ConvLayers) > 0 && (c.ConvWidth < 2 || c.ConvWidth > 1<<10) || len(c.ConvLayers) == 0 && c.ConvWidth != 0 {
		return fmt.Errorf("%w: conv_width %d with %d conv layers", ErrConfig, c.ConvWidth, len(c.ConvLayers))
	}
	if err := c.validateSSM(); err != nil {
		return err
	}
	if c.SlidingWindow < 0 {
		return fmt.Errorf("%w: sliding_window %d", ErrConfig, c.SlidingWindow)
	}
	for _, ls := range []struct {
		name string
		ls   []int
	}{{"sliding_layer_list", c.SlidingLayerList}, {"no_rope_layers", c.NoRopeLayers}, {"conv_layers", c.ConvLayers}} {
		for _, l := range ls.ls {
			if l < 0 || l >= c.Layers {
				return fmt.Errorf("%w: %s names layer %d of %d", ErrConfig, ls.name, l, c.Layers)
			}
		}
	}
	for _, fs := range []struct {
		name string
		fs   []float32
	}{{"rope_factors", c.RopeFactors}, {"rope_factors_short", c.RopeFactorsShort}} {
		if fs.fs == nil {
			continue
		}
		if len(fs.fs) != c.RopeDims/2 {
			return fmt.Errorf("%w: %d %s for rope_dims %d", ErrConfig, len(fs.fs), fs.name, c.RopeDims)
		}
		for _, f := range fs.fs {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("%w: %s value %g", ErrConfig, fs.name, f)
			}
		}
	}
	if c.RopeFactorsShort != nil && (c.RopeFactors == nil || c.RopeOrigCtx <= 0) {
		return fmt.Errorf("%w: rope_factors_short without rope_factors and rope_orig_ctx", ErrConfig)
	}
	for _, v := range []struct {
		name string
		v    float32
	}{{"rope_attn_factor", c.RopeAttnFactor}, {"rope_base_local", c.RopeBaseLocal}} {
		if !(v.v >= 0) || math.IsInf(float64(v.v), 0) {
			return fmt.Errorf("%w: %s %g", ErrConfig, v.name, v.v)
		}
	}
	if c.BOS >= c.VocabSize || c.EOS >= c.VocabSize {
		return fmt.Errorf("%w: bos %d / eos %d outside vocab %d", ErrConfig, c.BOS, c.EOS, c.VocabSize)
	}
	for _, s := range c.StopTokens {
		if s < 0 || s >= c.VocabSize {
			return fmt.Errorf("%w: stop token %d outside vocab %d", ErrConfig, s, c.VocabSize)
		}
	}
	return nil
}

// Llama3RopeFactors returns Llama 3.1's per-pair RoPE divisors (the
// rope_scaling of type llama3) for rotary dims dims at base base, as
// llama.cpp's converter computes rope_freqs (conversion/llama.py:282-307):
// a pair whose wavelength 2π/base^(-2i/dims) is shorter than
// orig/high keeps its frequency, one longer than orig/low is divided by
// factor, and those between blend the two smoothly.
func Llama3RopeFactors(base float32, dims int, factor, low, high, orig float64) []float32 {
	lowWave, highWave := orig/low, orig/high
	fs := make([]float32, dims/2)
	for i := range fs {
		wave := 2 * math.Pi / math.Pow(float64(base), -2*float64(i)/float64(dims))
		switch {
		case wave < highWave:
			fs[i] = 1
		case wave > lowWave:
			fs[i] = float32(factor)
		default:
			smooth := (orig/wave - low) / (high - low)
			fs[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return fs
}

// YaRNRope returns YaRN's RoPE scaling by factor (> 1) for a model trained
// on orig positions, as llama.cpp computes it (ggml's rope_yarn with
// ext_factor 1, ggml_rope_yarn_corr_dims): pair i's angle θ_i =
// pos·base^(-2i/dims) becomes θ_i·(r_i + (1 - r_i)/factor), where the ramp
// r_i is 1 up to the dimension whose wavelength fits betaFast times in the
// original context (rounded down), 0 from the one that fits betaSlow times
// (rounded up), linear between: factors[i] = 1/(r_i + (1 - r_i)/factor),
// the divisors of RopeFactors. mscale is YaRN's magnitude correction of
// cos and sin, 1 + 0.1·ln(factor) (RopeAttnFactor, times any attention
// factor of the model's own).
func YaRNRope(base float32, dims int, factor float64, orig int, betaFast, betaSlow float64) (factors []float32, mscale float32) {
	d := float64(dims)
	corr := func(beta float64) float64 {
		return d * math.Log(float64(orig)/(beta*2*math.Pi)) / (2 * math.Log(float64(base)))
	}
	lo := math.Max(0, math.Floor(corr(betaFast)))
	hi := math.Min(d-1, math.Ceil(corr(betaSlow)))
	factors = make([]float32, dims/2)
	for i := range factors {
		r := 1 - math.Min(1, math.Max(0, (float64(i)-lo)/math.Max(0.001, hi-lo)))
		factors[i] = float32(1 / ((1-r)/factor + r))
	}
	return factors, float32(1 + 0.1*math.Log(factor))
}

// validateGemma4 checks the fields of Gemma 4's conventions.
func (c *Config) validateGemma4() error {
	const limit = 1 << 24
	if c.HeadDimLocal < 0 || c.HeadDimLocal > limit || c.RopeDimsLocal < 0 || c.RopeDimsLocal > max(c.HeadDimLocal, 0) || c.RopeDimsLocal%2 != 0 ||
		c.HeadDimLocal == 0 && c.RopeDimsLocal != 0 {
		return fmt.Errorf("%w: head_dim_local %d, rope_dims_local %d", ErrConfig, c.HeadDimLocal, c.RopeDimsLocal)
	}
	if c.LayerHidden != nil {
		if len(c.LayerHidden) != c.Layers {
			return fmt.Errorf("%w: %d layer_hidden widths for %d layers", ErrConfig, len(c.LayerHidden), c.Layers)
		}
		for _, h := range c.LayerHidden {
			if h <= 0 || h > c.HiddenDim {
				return fmt.Errorf("%w: layer_hidden %d with hidden_dim %d", ErrConfig, h, c.HiddenDim)
			}
		}
	}
	if c.PerLayerDim < 0 || c.PerLayerDim > limit || c.PerLayerDim*c.Layers > limit {
		return fmt.Errorf("%w: per_layer_dim %d", ErrConfig, c.PerLayerDim)
	}
	if s := c.SharedKVLayers; s != 0 {
		n := c.Layers - s
		if s < 0 || n < 2 || c.LayerWindow(n-2) == 0 || c.LayerWindow(n-1) > 0 {
			return fmt.Errorf("%w: %d shared kv layers of %d: layer n-2 must slide and n-1 be global", ErrConfig, s, c.Layers)
		}
	}
	return nil
}
