package gguf

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/tensors/model"
)

// archSpec holds what an architecture fixes regardless of its hyperparameters,
// following llama.cpp's graph builders (see ../shared/models/arch/README.md).
type archSpec struct {
	norm      string
	rope      string
	act       string
	gated     bool
	parallel  bool // one shared norm feeds attention and FFN
	postNorms bool // Gemma 2 sandwich norms
	// embedScale multiplies embeddings by sqrt(dim) (Gemma).
	embedScale bool
	// qkNorm: per-head RMS norms of q and k (attn_q_norm, attn_k_norm).
	qkNorm bool
	// activations is the precision policy: the LayerNorm GELU models drift
	// in f16, Gemma's wide activations fit f16, Llama lets the device decide.
	activations string
}

var archSpecs = map[string]archSpec{
	model.ArchLlama:    {norm: model.NormRMS, rope: model.RopeInterleaved, act: model.ActSiLU, gated: true, activations: model.PolicyAuto},
	model.ArchGemma:    {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActGELUTanh, gated: true, embedScale: true, activations: model.PolicyF16},
	model.ArchGemma2:   {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActGELUTanh, gated: true, postNorms: true, embedScale: true, activations: model.PolicyF16},
	model.ArchPhi2:     {norm: model.NormLayer, rope: model.RopeHalves, act: model.ActGELUTanh, parallel: true, activations: model.PolicyF32},
	model.ArchFalcon:   {norm: model.NormLayer, rope: model.RopeHalves, act: model.ActGELUTanh, parallel: true, activations: model.PolicyF32},
	model.ArchStableLM: {norm: model.NormLayer, rope: model.RopeHalves, act: model.ActSiLU, gated: true, activations: model.PolicyF16},
	// Qwen 2/3 and Gemma 3 are known for activations past f16's range.
	model.ArchQwen2:  {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, activations: model.PolicyF32},
	model.ArchQwen3:  {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, qkNorm: true, activations: model.PolicyF32},
	model.ArchGemma3: {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActGELUTanh, gated: true, postNorms: true, embedScale: true, qkNorm: true, activations: model.PolicyF32},
	// EmbeddingGemma (src/models/gemma-embedding.cpp): Gemma 3's blocks,
	// attention bidirectional (embeddings below).
	model.ArchGemmaEmbedding: {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActGELUTanh, gated: true, postNorms: true, embedScale: true, qkNorm: true, activations: model.PolicyF32},
	// BERT (src/models/bert.cpp): post-LN blocks, LayerNorm, GELU (tanh
	// form, as ggml_gelu), plain FFN, biases, learned positions, no RoPE.
	model.ArchBERT:     {norm: model.NormLayer, rope: model.RopeHalves, act: model.ActGELUTanh, activations: model.PolicyF32},
	model.ArchPhi3:     {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, activations: model.PolicyAuto},
	model.ArchQwen3MoE: {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, qkNorm: true, activations: model.PolicyF32},
	model.ArchSmolLM3:  {norm: model.NormRMS, rope: model.RopeInterleaved, act: model.ActSiLU, gated: true, activations: model.PolicyAuto},
	model.ArchGPTOSS:   {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSwiGLUOAI, gated: true, activations: model.PolicyF32},
	model.ArchGemma4:   {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActGELUTanh, gated: true, postNorms: true, embedScale: true, qkNorm: true, activations: model.PolicyF32},
	// LFM2 (src/models/lfm2.cpp): gated short convolutions beside GQA
	// attention with q/k norms and NEOX RoPE; the conv layers are the
	// zeros of the per-layer head_count_kv.
	model.ArchLFM2: {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, qkNorm: true, activations: model.PolicyF32},
	// Qwen3.5 (src/models/qwen35.cpp): Gated DeltaNet layers beside gated
	// attention with q/k norms and partial IMROPE (qwen35.go).
	model.ArchQwen35:    {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, qkNorm: true, activations: model.PolicyF32},
	model.ArchQwen35MoE: {norm: model.NormRMS, rope: model.RopeHalves, act: model.ActSiLU, gated: true, qkNorm: true, activations: model.PolicyF32},
	// Granite 4.0 H (src/models/granite-hybrid.cpp): Mamba-2 layers beside
	// attention that is NoPE unless rope.scaling.finetuned (then NORM,
	// llama.cpp's rope type of the granite family), Granite's multipliers
	// (granite_hybrid.go).
	model.ArchGraniteHybrid: {norm: model.NormRMS, rope: model.RopeInterleaved, act: model.ActSiLU, gated: true, activations: model.PolicyF32},
}

// meta reads typed hyperparameters, failing on values of the wrong type.
type meta struct {
	f    *File
	arch string
	err  error
}

func (m *meta) fail(key string, v Value, want string) {
	if m.err == nil {
		m.err = fmt.Errorf("%w: metadata %s = %s is not %s", ErrFormat, key, v, want)
	}
}

// int returns key (prefixed with "<arch>." when it starts with '.') as a
// non-negative int bounded by 2^31, or def when absent.
func (m *meta) int(key string, def int, required bool) int {
	key = m.key(key)
	v, ok := m.f.Get(key)
	if !ok {
		if required && m.err == nil {
			m.err = fmt.Errorf("%w: missing metadata %s", ErrFormat, key)
		}
		return def
	}
	i, ok := v.Int()
	if !ok || i < 0 || i > math.MaxInt32 {
		m.fail(key, v, "a non-negative integer")
		return def
	}
	return int(i)
}

func (m *meta) float(key string, def float32) float32 {
	key = m.key(key)
	v, ok := m.f.Get(key)
	if !ok {
		return def
	}
	x, ok := v.Float()
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		m.fail(key, v, "a finite float")
		return def
	}
	return float32(x)
}

func (m *meta) bool(key string, def bool) bool {
	key = m.key(key)
	v, ok := m.f.Get(key)
	if !ok {
		return def
	}
	b, ok := v.Bool()
	if !ok {
		m.fail(key, v, "a bool")
	}
	return b
}

func (m *meta) key(k string) string {
	if k[0] == '.' {
		return m.arch + k
	}
	return k
}

// config maps the metadata of architecture arch onto model.Config. Tensor
// dependent fields (vocab size, tied, biases) are filled by Load.
func (f *File) config(arch string) (model.Config, error) {
	spec, ok := archSpecs[arch]
	if !ok {
		return model.Config{}, fmt.Errorf("%w: architecture %q", ErrUnsupported, arch)
	}
	m := &meta{f: f, arch: arch}
	var layerHidden []int
	if arch == model.ArchGemma4 {
		var err error
		if layerHidden, err = f.perLayerInts(m.key(".feed_forward_length")); err != nil {
			return model.Config{}, err
		}
	}
	c := model.Config{
		Arch:        arch,
		Dim:         m.int(".embedding_length", 0, true),
		HiddenDim:   maxOr(layerHidden, func() int { return m.int(".feed_forward_length", 0, arch != model.ArchQwen35MoE) }),
		Layers:      m.int(".block_count", 0, true),
		Heads:       m.int(".attention.head_count", 0, true),
		MaxSeqLen:   m.int(".context_length", 0, true),
		Norm:        spec.norm,
		RopeStyle:   spec.rope,
		RopeBase:    m.float(".rope.freq_base", 10000),
		Act:         spec.act,
		GatedFFN:    spec.gated,
		Parallel:    spec.parallel,
		PostNorms:   spec.postNorms,
		QKNorm:      spec.qkNorm,
		Activations: spec.activations,
	}
	if m.err != nil {
		return c, m.err
	}
	if c.Heads == 0 || c.Dim%c.Heads != 0 {
		return c, fmt.Errorf("%w: embedding_length %d not divisible by head_count %d", ErrFormat, c.Dim, c.Heads)
	}
	switch arch {
	case model.ArchLFM2:
		if err := f.lfm2Layers(m, &c); err != nil {
			return c, err
		}
	case model.ArchGraniteHybrid:
		if err := f.graniteHybridLayers(m, &c); err != nil {
			return c, err
		}
	default:
		c.KVHeads = m.int(".attention.head_count_kv", c.Heads, false)
	}
	c.HeadDim = m.int(".attention.key_length", c.Dim/c.Heads, false)
	if vl := m.int(".attention.value_length", c.HeadDim, false); vl != c.HeadDim && m.err == nil {
		return c, fmt.Errorf("%w: value_length %d differs from key_length %d", ErrUnsupported, vl, c.HeadDim)
	}
	c.RopeDims = m.int(".rope.dimension_count", c.HeadDim, false)
	if spec.norm == model.NormRMS {
		c.NormEps = m.float(".attention.layer_norm_rms_epsilon", 1e-5)
	} else {
		c.NormEps = m.float(".attention.layer_norm_epsilon", 1e-5)
	}
	if arch == model.ArchFalcon {
		// llama.cpp's converter writes the fused QKV as all Q heads, then K,
		// then V ("jploski"); other layouts would split wrongly.
		if v, ok := f.Get("falcon.tensor_data_layout"); ok {
			if s, _ := v.Str(); s != "jploski" {
				return c, fmt.Errorf("%w: falcon.tensor_data_layout %s", ErrUnsupported, v)
			}
		}
	}
	if arch == model.ArchStableLM {
		c.Parallel = m.bool(".use_parallel_residual", false)
	}
	if spec.embedScale {
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	}
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if arch == model.ArchGemma2 {
		// llama.cpp scales Gemma 2 27B (46 layers) queries by
		// 1/sqrt(n_embd/n_head), its query_pre_attn_scalar, not 1/sqrt(head_dim).
		if c.Layers == 46 {
			c.AttnScale = float32(1 / math.Sqrt(float64(c.Dim/c.Heads)))
		}
		c.AttnSoftCap = m.float(".attn_logit_softcapping", 0)
		c.FinalSoftCap = m.float(".final_logit_softcapping", 0)
		c.SlidingWindow = m.int(".attention.sliding_window", 0, false)
		if c.SlidingWindow > 0 {
			c.SlidingLayers = "even"
		}
	}
	switch arch {
	case model.ArchGemma3, model.ArchGemmaEmbedding:
		// llama.cpp (src/models/gemma3.cpp, llama-model.cpp): layers with
		// il % 6 < 5 slide, with their own rope base; queries scaled by
		// 1/sqrt(head_dim), except the 27B's 1/sqrt(n_embd/n_head).
		if c.Layers == 62 {
			c.AttnScale = float32(1 / math.Sqrt(float64(c.Dim/c.Heads)))
		}
		c.SlidingWindow = m.int(".attention.sliding_window", 0, true)
		c.RopeBaseLocal = m.float(".rope.freq_base_swa", 10000)
		c.SlidingLayers = "list"
		for l := range c.Layers {
			if l%6 < 5 {
				c.SlidingLayerList = append(c.SlidingLayerList, l)
			}
		}
	case model.ArchBERT:
		c.RopeDims, c.PostLN, c.EmbedNorm, c.LearnedPositions = 0, true, true, true
	case model.ArchGemma4:
		if err := f.gemma4(m, &c, layerHidden); err != nil {
			return c, err
		}
	case model.ArchQwen35:
		if err := f.qwen35(m, &c); err != nil {
			return c, err
		}
	case model.ArchQwen35MoE:
		if err := f.qwen35moe(m, &c); err != nil {
			return c, err
		}
	case model.ArchGraniteHybrid:
		if err := f.graniteHybrid(m, &c); err != nil {
			return c, err
		}
	case model.ArchPhi3:
		// LongRoPE: the factor tensors come with the tensors; the
		// attention factor scales cos and sin (llama-context.cpp:206).
		c.RopeOrigCtx = m.int(".rope.scaling.original_context_length", 0, false)
		c.RopeAttnFactor = m.float(".rope.scaling.attn_factor", 0)
		// attention.sliding_window is ignored: llama.cpp forces phi3's
		// SWA off (src/models/phi3.cpp:14-25).
	case model.ArchQwen3MoE:
		// src/models/qwen3moe.cpp: softmax gating over expert_count
		// experts, expert_used_count of them renormalized (norm_w), each
		// of expert_feed_forward_length units; feed_forward_length is
		// unused.
		c.Experts = m.int(".expert_count", 0, true)
		c.ExpertsUsed = m.int(".expert_used_count", 0, true)
		c.ExpertHidden = m.int(".expert_feed_forward_length", 0, true)
		c.NormTopK = true
		if m.err == nil && (c.Experts == 0 || c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts) {
			return c, fmt.Errorf("%w: metadata %s = %d with %s = %d", ErrFormat, m.key(".expert_used_count"), c.ExpertsUsed, m.key(".expert_count"), c.Experts)
		}
		if n := m.int(".expert_shared_count", 0, false); n != 0 && m.err == nil {
			return c, fmt.Errorf("%w: metadata %s = %d (shared experts)", ErrUnsupported, m.key(".expert_shared_count"), n)
		}
	case model.ArchGPTOSS:
		// src/models/openai-moe.cpp: layers with il % 2 == 0 slide (its
		// default pattern of 2), both kinds with one rope base; experts
		// chosen by their largest router logits (router bias included)
		// and weighted by the softmax of those (softmax_weight), each with
		// biases and swiglu_oai; attention sinks and biases on q, k, v and
		// o (the tensors say which).
		c.Experts = m.int(".expert_count", 0, true)
		c.ExpertsUsed = m.int(".expert_used_count", 0, true)
		c.ExpertHidden = m.int(".expert_feed_forward_length", 0, true)
		c.ExpertGating = model.GatingTopKSoftmax
		if m.err == nil && (c.Experts == 0 || c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts) {
			return c, fmt.Errorf("%w: metadata %s = %d with %s = %d", ErrFormat, m.key(".expert_used_count"), c.ExpertsUsed, m.key(".expert_count"), c.Experts)
		}
		c.SlidingWindow = m.int(".attention.sliding_window", 0, true)
		if c.SlidingWindow > 0 {
			c.SlidingLayers = "even"
		}
		if v, ok := f.Get(m.key(".rope.freq_base_swa")); ok {
			if x, _ := v.Float(); float32(x) != c.RopeBase {
				return c, fmt.Errorf("%w: metadata %s = %s differs from rope.freq_base", ErrUnsupported, m.key(".rope.freq_base_swa"), v)
			}
		}
	case model.ArchSmolLM3:
		// src/models/smollm3.cpp:5, 69: every fourth layer has no RoPE.
		for l := range c.Layers {
			if (l+1)%4 == 0 {
				c.NoRopeLayers = append(c.NoRopeLayers, l)
			}
		}
	}
	if err := f.ropeScaling(m, &c); err != nil {
		return c, err
	}
	if v, ok := f.Get(m.key(".attention.sliding_window_pattern")); ok && m.err == nil && arch != model.ArchGemma4 {
		// Only Gemma 3's default pattern of 6 and gpt-oss's of 2 (their
		// absent keys) are known.
		if n, _ := v.Int(); !((arch == model.ArchGemma3 || arch == model.ArchGemmaEmbedding) && n == 6 || arch == model.ArchGPTOSS && n == 2) {
			return c, fmt.Errorf("%w: metadata %s = %s", ErrUnsupported, m.key(".attention.sliding_window_pattern"), v)
		}
	}
	if err := f.embedding(m, &c); err != nil {
		return c, err
	}
	return c, m.err
}

// poolings are llama.cpp's pooling_type values this runtime pools by.
var poolings = map[int]string{0: model.PoolNone, 1: model.PoolMean, 2: model.PoolCLS, 3: model.PoolLast}

// embedding reads what makes a file an embedding model
// (../shared/models/embed/README.md): <arch>.pooling_type, whether
// attention is causal (<arch>.attention.causal, default true;
// gemma-embedding is bidirectional whatever the key says, as llama.cpp
// runs it through its encoder), and gemma-embedding's dense projections.
func (f *File) embedding(m *meta, c *model.Config) error {
	if v, ok := f.Get(m.key(".pooling_type")); ok {
		n, _ := v.Int()
		p, known := poolings[int(n)]
		if !known {
			return fmt.Errorf("%w: metadata %s = %s (0 none, 1 mean, 2 cls, 3 last)", ErrUnsupported, m.key(".pooling_type"), v)
		}
		c.Pooling = p
	}
	c.NonCausal = !m.bool(".attention.causal", true)
	if c.Arch == model.ArchGemmaEmbedding {
		c.NonCausal = true
		if c.Pooling == model.PoolNone {
			c.Pooling = model.PoolMean
		}
		if _, ok := f.Get(m.key(".dense_2_feat_out")); ok {
			c.DenseDim = m.int(".dense_2_feat_out", 0, true)
			for _, k := range []string{".dense_2_feat_in", ".dense_3_feat_out"} {
				if n := m.int(k, c.Dim, false); n != c.Dim && m.err == nil {
					return fmt.Errorf("%w: metadata %s = %d, want the embedding length %d", ErrFormat, m.key(k), n, c.Dim)
				}
			}
			if n := m.int(".dense_3_feat_in", c.DenseDim, false); n != c.DenseDim && m.err == nil {
				return fmt.Errorf("%w: metadata %s = %d, want dense_2_feat_out %d", ErrFormat, m.key(".dense_3_feat_in"), n, c.DenseDim)
			}
		}
	}
	return m.err
}

// lfm2Layers reads LFM2's layer pattern: attention.head_count_kv is one
// value per layer, 0 for a gated short convolution layer (llama.cpp's
// lfm2.cpp reads the layer type from it), the attention layers' KV heads
// otherwise (one count for all of them); shortconv.l_cache is the
// convolution's width.
func (f *File) lfm2Layers(m *meta, c *model.Config) error {
	var err error
	if c.ConvLayers, err = f.recurrentLayers(m, c); err != nil {
		return err
	}
	c.ConvWidth = m.int(".shortconv.l_cache", 0, true)
	if m.err == nil && c.ConvWidth < 2 {
		return fmt.Errorf("%w: metadata %s = %d", ErrFormat, m.key(".shortconv.l_cache"), c.ConvWidth)
	}
	return m.err
}

// recurrentLayers reads a hybrid's layer pattern from
// attention.head_count_kv, one value per layer: 0 for a recurrent layer
// (returned), the attention layers' KV heads otherwise (one count for all
// of them, set in c).
func (f *File) recurrentLayers(m *meta, c *model.Config) ([]int, error) {
	key := m.key(".attention.head_count_kv")
	v, ok := f.Get(key)
	if !ok {
		return nil, fmt.Errorf("%w: missing metadata %s", ErrFormat, key)
	}
	counts, err := v.Int32s()
	if err != nil || len(counts) != c.Layers {
		return nil, fmt.Errorf("%w: metadata %s = %s: want one count per layer (%d)", ErrFormat, key, v, c.Layers)
	}
	var zeros []int
	for l, n := range counts {
		switch {
		case n == 0:
			zeros = append(zeros, l)
		case n < 0 || c.KVHeads != 0 && int(n) != c.KVHeads:
			return nil, fmt.Errorf("%w: metadata %s = %s: attention layers with different KV head counts", ErrUnsupported, key, v)
		default:
			c.KVHeads = int(n)
		}
	}
	if c.KVHeads == 0 {
		// No attention layer: the counts only size the unused KV spec.
		c.KVHeads = c.Heads
	}
	return zeros, nil
}

// ropeScaling reads rope.scaling.type: none, linear (every angle divided
// by rope.scaling.factor) or yarn; any other type is refused by name and
// value.
func (f *File) ropeScaling(m *meta, c *model.Config) error {
	key := m.key(".rope.scaling.type")
	v, ok := f.Get(key)
	if !ok || m.err != nil {
		return m.err
	}
	typ, _ := v.Str()
	switch typ {
	case "none":
		return nil
	case "linear", "yarn":
		factor := m.float(".rope.scaling.factor", 1)
		if m.err != nil {
			return m.err
		}
		if !(factor > 0) {
			return fmt.Errorf("%w: metadata %s = %g", ErrFormat, m.key(".rope.scaling.factor"), factor)
		}
		if factor == 1 {
			return nil
		}
		c.RopeFactors = make([]float32, c.RopeDims/2)
		if typ == "linear" {
			for i := range c.RopeFactors {
				c.RopeFactors[i] = factor
			}
			return nil
		}
		return f.yarn(m, c, factor)
	}
	return fmt.Errorf("%w: metadata %s = %s", ErrUnsupported, key, v)
}

// YaRN's defaults in llama.cpp (src/llama-hparams.h: yarn_beta_fast,
// yarn_beta_slow; llama-context.cpp: ext_factor 1 for yarn), which reads
// no other values from a GGUF but the DeepSeek models' log multiplier.
const (
	yarnBetaFast = 32
	yarnBetaSlow = 1
)

// yarn sets c's RoPE to YaRN with scaling factor s > 0 (s != 1), as
// llama.cpp computes it (model.YaRNRope with its default betas; for s > 1
// cos and sin are scaled by 1 + 0.1·ln(s): llama-context.cpp cancels its
// own get_mscale against ggml's, leaving ggml's), times
// rope.scaling.attn_factor.
func (f *File) yarn(m *meta, c *model.Config, s float32) error {
	if v, ok := f.Get(m.key(".rope.scaling.yarn_log_multiplier")); ok {
		if x, _ := v.Float(); x != 0 {
			return fmt.Errorf("%w: metadata %s = %s", ErrUnsupported, m.key(".rope.scaling.yarn_log_multiplier"), v)
		}
	}
	orig := m.int(".rope.scaling.original_context_length", c.MaxSeqLen, false)
	attn := m.float(".rope.scaling.attn_factor", 1)
	if m.err != nil {
		return m.err
	}
	if orig <= 0 || !(c.RopeBase > 1) {
		return fmt.Errorf("%w: yarn with original context %d and rope base %g", ErrFormat, orig, c.RopeBase)
	}
	factors, mscale := model.YaRNRope(c.RopeBase, c.RopeDims, float64(s), orig, yarnBetaFast, yarnBetaSlow)
	c.RopeFactors, c.RopeAttnFactor = factors, attn
	if s > 1 {
		c.RopeAttnFactor = attn * mscale
	}
	return nil
}

// maxOr is the largest of xs, or def() when xs is empty.
func maxOr(xs []int, def func() int) int {
	if len(xs) == 0 {
		return def()
	}
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// perLayerInts reads key as an array of non-negative integers (nil when
// the key is absent or a scalar).
func (f *File) perLayerInts(key string) ([]int, error) {
	v, ok := f.Get(key)
	if !ok || v.Type != TypeArray {
		return nil, nil
	}
	es, err := v.Elements()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	out := make([]int, len(es))
	for i, e := range es {
		n, ok := e.Int()
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, fmt.Errorf("%w: metadata %s[%d] = %s is not a non-negative integer", ErrFormat, key, i, e)
		}
		out[i] = int(n)
	}
	return out, nil
}

// gemma4 reads Gemma 4's conventions (src/models/gemma4.cpp, llama-model.cpp;
// ../shared/models/arch3/README.md): a per-layer sliding pattern, sliding
// layers with their own head dim, rotary dims and base, the KV of the last
// shared_kv_layers layers shared, per-layer inputs, per-layer FFN widths,
// an unweighted V norm, a kq scale of 1 and the final soft cap. The global
// layers' proportional RoPE comes as rope_freqs (ropeTable).
func (f *File) gemma4(m *meta, c *model.Config, layerHidden []int) error {
	key := m.key(".attention.sliding_window_pattern")
	v, ok := f.Get(key)
	if !ok {
		return fmt.Errorf("%w: missing metadata %s", ErrFormat, key)
	}
	es, err := v.Elements()
	if err != nil || len(es) != c.Layers {
		return fmt.Errorf("%w: metadata %s = %s is not one bool per layer", ErrFormat, key, v)
	}
	c.SlidingLayers = "list"
	for l, e := range es {
		b, ok := e.Bool()
		if !ok {
			return fmt.Errorf("%w: metadata %s = %s is not one bool per layer", ErrFormat, key, v)
		}
		if b {
			c.SlidingLayerList = append(c.SlidingLayerList, l)
		}
	}
	c.SlidingWindow = m.int(".attention.sliding_window", 0, true)
	c.HeadDimLocal = m.int(".attention.key_length_swa", c.HeadDim, false)
	if vl := m.int(".attention.value_length_swa", c.HeadDimLocal, false); vl != c.HeadDimLocal && m.err == nil {
		return fmt.Errorf("%w: value_length_swa %d differs from key_length_swa %d", ErrUnsupported, vl, c.HeadDimLocal)
	}
	c.RopeDimsLocal = m.int(".rope.dimension_count_swa", c.HeadDimLocal, false)
	c.RopeBaseLocal = m.float(".rope.freq_base_swa", 10000)
	c.SharedKVLayers = m.int(".attention.shared_kv_layers", 0, false)
	c.PerLayerDim = m.int(".embedding_length_per_layer_input", 0, true)
	c.FinalSoftCap = m.float(".final_logit_softcapping", 0)
	c.AttnScale = 1 // f_attention_scale (src/models/gemma4.cpp)
	c.VNorm = true
	c.LayerOutputScale = true
	if layerHidden != nil {
		if len(layerHidden) != c.Layers {
			return fmt.Errorf("%w: metadata %s has %d widths for %d layers", ErrFormat, m.key(".feed_forward_length"), len(layerHidden), c.Layers)
		}
		c.LayerHidden = layerHidden
	}
	if m.err != nil {
		return m.err
	}
	if c.PerLayerDim == 0 {
		return fmt.Errorf("%w: metadata %s = 0 (no per-layer inputs)", ErrUnsupported, m.key(".embedding_length_per_layer_input"))
	}
	return nil
}
