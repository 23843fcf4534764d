package hf

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/tensors/model"
)

// hfConfig is the subset of config.json the supported model types use.
// Pointers distinguish absent keys from zero values.
type hfConfig struct {
	ModelType             string          `json:"model_type"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	VocabSize             int             `json:"vocab_size"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	LayerNormEps          *float64        `json:"layer_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	HiddenAct             string          `json:"hidden_act"`
	HiddenActivation      string          `json:"hidden_activation"`

	// Qwen 2/3, Mistral, Gemma 3, Phi 3, SmolLM3.
	AttentionBias                 *bool    `json:"attention_bias"`
	UseSlidingWindow              *bool    `json:"use_sliding_window"`
	SlidingWindowPattern          *int     `json:"sliding_window_pattern"`
	LayerTypes                    []string `json:"layer_types"`
	RopeLocalBaseFreq             *float64 `json:"rope_local_base_freq"`
	OriginalMaxPositionEmbeddings *int     `json:"original_max_position_embeddings"`
	NoRopeLayers                  []int    `json:"no_rope_layers"`
	NoRopeLayerInterval           *int     `json:"no_rope_layer_interval"`

	// Qwen 3 MoE.
	NumExperts          *int  `json:"num_experts"`
	NumExpertsPerTok    *int  `json:"num_experts_per_tok"`
	MoEIntermediateSize *int  `json:"moe_intermediate_size"`
	NormTopKProb        *bool `json:"norm_topk_prob"`
	DecoderSparseStep   *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers       []int `json:"mlp_only_layers"`
	SharedExpertSize    *int  `json:"shared_expert_intermediate_size"`

	// Gemma 2.
	QueryPreAttnScalar    *float64 `json:"query_pre_attn_scalar"`
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping"`
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping"`
	SlidingWindow         *int     `json:"sliding_window"`

	// Falcon (older configs use the short names).
	NHead                  int      `json:"n_head"`
	NLayer                 int      `json:"n_layer"`
	NumKVHeads             *int     `json:"num_kv_heads"`
	MultiQuery             *bool    `json:"multi_query"`
	ParallelAttn           *bool    `json:"parallel_attn"`
	NewDecoderArchitecture bool     `json:"new_decoder_architecture"`
	Alibi                  bool     `json:"alibi"`
	LayerNormEpsilon       *float64 `json:"layer_norm_epsilon"`
	FFNHiddenSize          int      `json:"ffn_hidden_size"`

	// StableLM.
	UseParallelResidual bool `json:"use_parallel_residual"`
	QKLayernorm         bool `json:"qk_layernorm"`

	// Gemma 4 (gemma4.go).
	gemma4Keys
	// Qwen3.5, LFM2, Granite 4.0 H (hybrid.go).
	hybridKeys
}

// Model types and the architectures they import as.
var modelTypes = map[string]string{
	"llama":  model.ArchLlama,
	"gemma":  model.ArchGemma,
	"gemma2": model.ArchGemma2,
	"phi":    model.ArchPhi2,
	"falcon": model.ArchFalcon,
	// Falcon-7B's original remote-code config.
	"RefinedWebModel": model.ArchFalcon,
	"stablelm":        model.ArchStableLM,
	// Mistral is Llama with a sliding window on every layer.
	"mistral":     model.ArchLlama,
	"qwen2":       model.ArchQwen2,
	"qwen3":       model.ArchQwen3,
	"qwen3_moe":   model.ArchQwen3MoE,
	"gemma3_text": model.ArchGemma3,
	"phi3":        model.ArchPhi3,
	"smollm3":     model.ArchSmolLM3,
	// Gemma 4's text model; a multimodal config ("gemma4") imports its
	// text_config as this (gemma4Text).
	"gemma4_text": model.ArchGemma4,
	// The hybrids (hybrid.go); a multimodal Qwen3.5 config ("qwen3_5")
	// imports its text_config as qwen3_5_text (qwen35Text).
	"qwen3_5_text":     model.ArchQwen35,
	"qwen3_5_moe_text": model.ArchQwen35MoE,
	"lfm2":             model.ArchLFM2,
	"granitemoehybrid": model.ArchGraniteHybrid,
}

// ropeScaling is config.json's rope_scaling.
type ropeScaling struct {
	RopeType                      string    `json:"rope_type"`
	Type                          string    `json:"type"` // older name of rope_type
	Factor                        *float64  `json:"factor"`
	LowFreqFactor                 *float64  `json:"low_freq_factor"`
	HighFreqFactor                *float64  `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings *int      `json:"original_max_position_embeddings"`
	ShortFactor                   []float64 `json:"short_factor"`
	LongFactor                    []float64 `json:"long_factor"`
	AttentionFactor               *float64  `json:"attention_factor"`
}

func orFloat(p *float64, def float64) float32 {
	if p == nil {
		return float32(def)
	}
	return float32(*p)
}

func orInt(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// tokenID reads bos/eos_token_id, which may be null, an int or a list (the
// first entry is the id; the rest are extra stop tokens).
func tokenID(raw json.RawMessage) (int, []int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil, nil
	}
	var id int
	if err := json.Unmarshal(raw, &id); err == nil {
		return id, nil, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil || len(ids) == 0 {
		return 0, nil, fmt.Errorf("%w: token id %s", ErrFormat, raw)
	}
	return ids[0], ids[1:], nil
}

// config maps config.json onto model.Config. Tensor-dependent fields
// (vocabulary size, tied embedding, bias flags) are set by verify.Complete.
func (h *hfConfig) config() (model.Config, error) {
	arch, ok := modelTypes[h.ModelType]
	if !ok {
		return model.Config{}, fmt.Errorf("%w: model_type %q", ErrUnsupported, h.ModelType)
	}
	switch arch {
	case model.ArchLlama, model.ArchQwen2, model.ArchQwen3, model.ArchQwen3MoE, model.ArchSmolLM3, model.ArchPhi3, model.ArchGemma3,
		model.ArchQwen35, model.ArchQwen35MoE, model.ArchGraniteHybrid: // their own checks
	default:
		if rs, err := h.scaling(); err != nil || rs != nil {
			return model.Config{}, fmt.Errorf("%w: %s rope_scaling %s", ErrUnsupported, h.ModelType, h.RopeScaling)
		}
	}
	c := model.Config{
		Arch:      arch,
		Dim:       h.HiddenSize,
		HiddenDim: h.IntermediateSize,
		Layers:    h.NumHiddenLayers,
		Heads:     h.NumAttentionHeads,
		MaxSeqLen: h.MaxPositionEmbeddings,
		RopeStyle: model.RopeHalves, // HF rotary embeddings rotate halves
		RopeBase:  orFloat(h.RopeTheta, 10000),
	}
	if arch == model.ArchFalcon {
		if c.Heads == 0 {
			c.Heads = h.NHead
		}
		if c.Layers == 0 {
			c.Layers = h.NLayer
		}
		if c.MaxSeqLen == 0 {
			c.MaxSeqLen = 2048 // FalconConfig's default
		}
		c.HiddenDim = h.FFNHiddenSize
		if c.HiddenDim == 0 {
			c.HiddenDim = 4 * c.Dim
		}
	}
	if c.Dim <= 0 || c.Heads <= 0 || c.Dim%c.Heads != 0 {
		return c, fmt.Errorf("%w: hidden_size %d with %d heads", ErrFormat, c.Dim, c.Heads)
	}
	c.HeadDim = orInt(h.HeadDim, c.Dim/c.Heads)
	c.KVHeads = orInt(h.NumKeyValueHeads, c.Heads)
	c.RopeDims = c.HeadDim
	if h.PartialRotaryFactor != nil {
		c.RopeDims = int(float64(c.HeadDim) * *h.PartialRotaryFactor)
	}
	switch arch {
	case model.ArchLlama, model.ArchQwen2, model.ArchQwen3, model.ArchQwen3MoE, model.ArchSmolLM3, model.ArchPhi3:
		c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
		c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyAuto
		if h.HiddenAct != "" && h.HiddenAct != "silu" {
			return c, fmt.Errorf("%w: %s hidden_act %q", ErrUnsupported, h.ModelType, h.HiddenAct)
		}
		if err := h.modern(&c); err != nil {
			return c, err
		}
		if arch == model.ArchLlama || arch == model.ArchSmolLM3 {
			// q/k rows are un-permuted on import to Meta's interleaved
			// pairing, so every Llama-family source (llama2.c, GGUF, HF)
			// has one layout (llama.cpp's converter permutes both).
			c.RopeStyle = model.RopeInterleaved
		}
	case model.ArchGemma4:
		if err := h.gemma4(&c); err != nil {
			return c, err
		}
	case model.ArchQwen35, model.ArchQwen35MoE:
		if err := h.qwen35(&c); err != nil {
			return c, err
		}
	case model.ArchLFM2:
		if err := h.lfm2(&c); err != nil {
			return c, err
		}
	case model.ArchGraniteHybrid:
		if err := h.graniteHybrid(&c); err != nil {
			return c, err
		}
	case model.ArchGemma, model.ArchGemma2, model.ArchGemma3:
		c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
		c.Act, c.GatedFFN, c.Activations = model.ActGELUTanh, true, model.PolicyF16
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		if arch == model.ArchGemma3 {
			if err := h.gemma3(&c); err != nil {
				return c, err
			}
		} else if arch == model.ArchGemma2 {
			c.PostNorms = true
			c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
			if h.QueryPreAttnScalar != nil && *h.QueryPreAttnScalar > 0 {
				c.AttnScale = float32(1 / math.Sqrt(*h.QueryPreAttnScalar))
			}
			c.AttnSoftCap = orFloat(h.AttnLogitSoftcapping, 0)
			c.FinalSoftCap = orFloat(h.FinalLogitSoftcapping, 0)
			if c.SlidingWindow = orInt(h.SlidingWindow, 0); c.SlidingWindow > 0 {
				c.SlidingLayers = "even"
			}
		}
	case model.ArchPhi2:
		c.Norm, c.NormEps = model.NormLayer, orFloat(h.LayerNormEps, 1e-5)
		c.Act, c.Parallel, c.Activations = model.ActGELUTanh, true, model.PolicyF32 // "gelu_new"
	case model.ArchFalcon:
		if h.Alibi || h.NewDecoderArchitecture {
			return c, fmt.Errorf("%w: falcon with alibi or new_decoder_architecture", ErrUnsupported)
		}
		c.Norm, c.NormEps = model.NormLayer, orFloat(h.LayerNormEpsilon, 1e-5)
		c.Act, c.Activations = model.ActGELU, model.PolicyF32 // nn.GELU(), the erf form
		c.Parallel = h.ParallelAttn == nil || *h.ParallelAttn
		c.KVHeads = orInt(h.NumKVHeads, c.Heads)
		if h.MultiQuery == nil || *h.MultiQuery {
			c.KVHeads = 1
		}
	case model.ArchStableLM:
		if h.QKLayernorm {
			return c, fmt.Errorf("%w: stablelm qk_layernorm", ErrUnsupported)
		}
		c.Norm, c.NormEps = model.NormLayer, orFloat(h.LayerNormEps, 1e-5)
		c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyF16
		c.Parallel = h.UseParallelResidual
	}
	var extra []int
	var err error
	if c.BOS, _, err = tokenID(h.BOSTokenID); err != nil {
		return c, err
	}
	if c.EOS, extra, err = tokenID(h.EOSTokenID); err != nil {
		return c, err
	}
	c.StopTokens = extra
	// SentencePiece-tokenized families prepend BOS; GPT-NeoX/CodeGen-style
	// tokenizers (phi, falcon, stablelm) do not.
	c.AddBOS = c.BOS >= 0 && (arch == model.ArchLlama || arch == model.ArchGemma || arch == model.ArchGemma2 || arch == model.ArchGemma3 || arch == model.ArchGemma4)
	return c, nil
}

// scaling decodes rope_scaling; nil when absent or null.
func (h *hfConfig) scaling() (*ropeScaling, error) {
	if len(h.RopeScaling) == 0 || string(h.RopeScaling) == "null" {
		return nil, nil
	}
	var rs ropeScaling
	if err := json.Unmarshal(h.RopeScaling, &rs); err != nil {
		return nil, fmt.Errorf("%w: rope_scaling %s: %w", ErrFormat, h.RopeScaling, err)
	}
	if rs.RopeType == "" {
		rs.RopeType = rs.Type
	}
	return &rs, nil
}

// modern reads what the Llama-shaped families of 2024-25 add: biases or q/k
// norms (from the tensors), sliding windows, NoPE layers, and the RoPE
// scaling of rope_scaling (llama3, linear, longrope; "default" is none).
// Anything else is refused, naming the key and its value.
func (h *hfConfig) modern(c *model.Config) error {
	switch c.Arch {
	case model.ArchQwen2, model.ArchQwen3, model.ArchQwen3MoE:
		c.Activations = model.PolicyF32 // activations past f16's range
		if h.UseSlidingWindow != nil && *h.UseSlidingWindow {
			return fmt.Errorf("%w: use_sliding_window true", ErrUnsupported)
		}
		c.QKNorm = c.Arch != model.ArchQwen2
		if c.Arch == model.ArchQwen3MoE {
			if err := h.experts(c); err != nil {
				return err
			}
		}
	case model.ArchLlama:
		// Mistral's sliding_window (null in later versions) on every layer.
		if c.SlidingWindow = orInt(h.SlidingWindow, 0); c.SlidingWindow > 0 {
			c.SlidingLayers = "all"
		}
	case model.ArchSmolLM3:
		if h.UseSlidingWindow != nil && *h.UseSlidingWindow {
			return fmt.Errorf("%w: use_sliding_window true", ErrUnsupported)
		}
		if h.NoRopeLayers != nil {
			if len(h.NoRopeLayers) != c.Layers {
				return fmt.Errorf("%w: no_rope_layers has %d entries for %d layers", ErrFormat, len(h.NoRopeLayers), c.Layers)
			}
			for l, use := range h.NoRopeLayers {
				if use == 0 {
					c.NoRopeLayers = append(c.NoRopeLayers, l)
				}
			}
		} else {
			n := orInt(h.NoRopeLayerInterval, 4)
			if n <= 0 {
				return fmt.Errorf("%w: no_rope_layer_interval %d", ErrFormat, n)
			}
			for l := range c.Layers {
				if (l+1)%n == 0 {
					c.NoRopeLayers = append(c.NoRopeLayers, l)
				}
			}
		}
	case model.ArchPhi3:
		// Phi 3's sliding_window is ignored, as llama.cpp does
		// (src/models/phi3.cpp:14-25): Phi-4-mini's exceeds its context.
	}
	rs, err := h.scaling()
	if err != nil || rs == nil {
		return err
	}
	switch rs.RopeType {
	case "default":
		return nil
	case "linear":
		return linearFactors(c, rs)
	case "llama3":
		if c.Arch != model.ArchLlama {
			break
		}
		return llama3Factors(c, rs)
	case "longrope", "su":
		if c.Arch != model.ArchPhi3 {
			break
		}
		return h.longRope(c, rs)
	}
	return fmt.Errorf("%w: rope_scaling %s", ErrUnsupported, h.RopeScaling)
}

// linearFactors: every angle divided by factor.
func linearFactors(c *model.Config, rs *ropeScaling) error {
	if rs.Factor == nil || !(*rs.Factor > 0) {
		return fmt.Errorf("%w: linear rope_scaling without a positive factor", ErrFormat)
	}
	c.RopeFactors = make([]float32, c.RopeDims/2)
	for i := range c.RopeFactors {
		c.RopeFactors[i] = float32(*rs.Factor)
	}
	return nil
}

// llama3Factors computes Llama 3.1's per-frequency divisors as llama.cpp's
// converter writes them into rope_freqs (conversion/llama.py:282-307):
// wavelengths shorter than original/high_freq_factor keep their frequency,
// longer than original/low_freq_factor are divided by factor, and those
// between blend the two smoothly.
func llama3Factors(c *model.Config, rs *ropeScaling) error {
	if rs.Factor == nil || rs.LowFreqFactor == nil || rs.HighFreqFactor == nil || rs.OriginalMaxPositionEmbeddings == nil {
		return fmt.Errorf("%w: llama3 rope_scaling %s lacks factor, low_freq_factor, high_freq_factor or original_max_position_embeddings", ErrFormat, rs.RopeType)
	}
	factor, low, high := *rs.Factor, *rs.LowFreqFactor, *rs.HighFreqFactor
	orig := float64(*rs.OriginalMaxPositionEmbeddings)
	if !(factor > 0) || !(low > 0) || !(high > low) || !(orig > 0) {
		return fmt.Errorf("%w: llama3 rope_scaling factor %g, low %g, high %g, original %g", ErrFormat, factor, low, high, orig)
	}
	c.RopeFactors = model.Llama3RopeFactors(c.RopeBase, c.RopeDims, factor, low, high, orig)
	return nil
}

// longRope reads Phi 3's LongRoPE: the long and short factor lists (one
// per rotated pair), the original context (rope_scaling's or the config's
// original_max_position_embeddings) and the attention factor: given, or
// sqrt(1 + ln(s)/ln(original)) with s = max_position_embeddings/original
// (1 when s <= 1), as transformers computes it.
func (h *hfConfig) longRope(c *model.Config, rs *ropeScaling) error {
	orig := h.OriginalMaxPositionEmbeddings
	if rs.OriginalMaxPositionEmbeddings != nil {
		orig = rs.OriginalMaxPositionEmbeddings
	}
	if orig == nil || *orig <= 1 {
		return fmt.Errorf("%w: longrope rope_scaling without original_max_position_embeddings", ErrFormat)
	}
	if len(rs.LongFactor) != c.RopeDims/2 || len(rs.ShortFactor) != c.RopeDims/2 {
		return fmt.Errorf("%w: longrope with %d long and %d short factors for %d rotated dims", ErrFormat, len(rs.LongFactor), len(rs.ShortFactor), c.RopeDims)
	}
	to32 := func(xs []float64) []float32 {
		out := make([]float32, len(xs))
		for i, x := range xs {
			out[i] = float32(x)
		}
		return out
	}
	c.RopeFactors, c.RopeFactorsShort, c.RopeOrigCtx = to32(rs.LongFactor), to32(rs.ShortFactor), *orig
	switch s := float64(c.MaxSeqLen) / float64(*orig); {
	case rs.AttentionFactor != nil:
		c.RopeAttnFactor = float32(*rs.AttentionFactor)
	case s > 1:
		c.RopeAttnFactor = float32(math.Sqrt(1 + math.Log(s)/math.Log(float64(*orig))))
	}
	return nil
}

// gemma3 reads Gemma 3's sliding layers (layer_types, or every
// sliding_window_pattern-th layer global, 6 by default), their own rope
// base (rope_local_base_freq), the query scale, the optional soft caps and
// the linear rope_scaling of its global layers.
func (h *hfConfig) gemma3(c *model.Config) error {
	c.PostNorms, c.QKNorm = true, true
	c.Activations = model.PolicyF32 // activations past f16's range
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if h.QueryPreAttnScalar != nil && *h.QueryPreAttnScalar > 0 {
		c.AttnScale = float32(1 / math.Sqrt(*h.QueryPreAttnScalar))
	}
	c.AttnSoftCap = orFloat(h.AttnLogitSoftcapping, 0)
	c.FinalSoftCap = orFloat(h.FinalLogitSoftcapping, 0)
	c.RopeBaseLocal = orFloat(h.RopeLocalBaseFreq, 10000)
	c.SlidingWindow = orInt(h.SlidingWindow, 0)
	if c.SlidingWindow <= 0 {
		return fmt.Errorf("%w: gemma3 sliding_window %d", ErrFormat, c.SlidingWindow)
	}
	c.SlidingLayers = "list"
	if h.LayerTypes != nil {
		if len(h.LayerTypes) != c.Layers {
			return fmt.Errorf("%w: layer_types has %d entries for %d layers", ErrFormat, len(h.LayerTypes), c.Layers)
		}
		for l, typ := range h.LayerTypes {
			switch typ {
			case "sliding_attention":
				c.SlidingLayerList = append(c.SlidingLayerList, l)
			case "full_attention":
			default:
				return fmt.Errorf("%w: layer_types entry %q", ErrUnsupported, typ)
			}
		}
	} else {
		n := orInt(h.SlidingWindowPattern, 6)
		if n <= 0 {
			return fmt.Errorf("%w: sliding_window_pattern %d", ErrFormat, n)
		}
		for l := range c.Layers {
			if (l+1)%n != 0 {
				c.SlidingLayerList = append(c.SlidingLayerList, l)
			}
		}
	}
	rs, err := h.scaling()
	if err != nil || rs == nil {
		return err
	}
	switch rs.RopeType {
	case "default":
		return nil
	case "linear":
		return linearFactors(c, rs) // LayerRope leaves the local layers unscaled
	}
	return fmt.Errorf("%w: rope_scaling %s", ErrUnsupported, h.RopeScaling)
}

// experts reads Qwen 3 MoE's expert keys: every layer sparse
// (decoder_sparse_step 1, no mlp_only_layers), no shared expert. Other
// values are refused, naming the key and the value.
func (h *hfConfig) experts(c *model.Config) error {
	for _, k := range []struct {
		key string
		p   *int
	}{{"num_experts", h.NumExperts}, {"num_experts_per_tok", h.NumExpertsPerTok}, {"moe_intermediate_size", h.MoEIntermediateSize}} {
		if k.p == nil || *k.p <= 0 {
			return fmt.Errorf("%w: qwen3_moe %s missing or not positive", ErrFormat, k.key)
		}
	}
	c.Experts, c.ExpertsUsed, c.ExpertHidden = *h.NumExperts, *h.NumExpertsPerTok, *h.MoEIntermediateSize
	if c.ExpertsUsed > c.Experts {
		return fmt.Errorf("%w: num_experts_per_tok %d of num_experts %d", ErrFormat, c.ExpertsUsed, c.Experts)
	}
	// Qwen3MoeConfig's default is false; every released Qwen 3 MoE sets true.
	c.NormTopK = h.NormTopKProb != nil && *h.NormTopKProb
	if s := orInt(h.DecoderSparseStep, 1); s != 1 {
		return fmt.Errorf("%w: decoder_sparse_step %d (only every layer sparse, 1)", ErrUnsupported, s)
	}
	if len(h.MLPOnlyLayers) > 0 {
		return fmt.Errorf("%w: mlp_only_layers %v (dense layers among experts)", ErrUnsupported, h.MLPOnlyLayers)
	}
	if n := orInt(h.SharedExpertSize, 0); n != 0 {
		return fmt.Errorf("%w: shared_expert_intermediate_size %d (shared experts)", ErrUnsupported, n)
	}
	return nil
}
