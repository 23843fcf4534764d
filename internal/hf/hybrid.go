package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/x448/float16"
)

// hybridKeys are the config.json keys of 2026's hybrids: Qwen3.5's text
// model (Qwen3_5TextConfig), LFM2 (Lfm2Config) and Granite 4.0 H
// (GraniteMoeHybridConfig). llama.cpp's converter reads the same ones
// (conversion/qwen.py, lfm2.py, granite.py, mamba.py).
type hybridKeys struct {
	// Qwen3.5's Gated DeltaNet layers.
	LinearConvKernelDim   *int  `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      *int  `json:"linear_key_head_dim"`
	LinearValueHeadDim    *int  `json:"linear_value_head_dim"`
	LinearNumKeyHeads     *int  `json:"linear_num_key_heads"`
	LinearNumValueHeads   *int  `json:"linear_num_value_heads"`
	FullAttentionInterval *int  `json:"full_attention_interval"`
	AttnOutputGate        *bool `json:"attn_output_gate"`

	// LFM2's short convolutions and FFN sizing.
	ConvLCache            *int     `json:"conv_L_cache"`
	ConvBias              *bool    `json:"conv_bias"`
	NormEps               *float64 `json:"norm_eps"`
	BlockFFDim            *int     `json:"block_ff_dim"`
	BlockAutoAdjustFFDim  *bool    `json:"block_auto_adjust_ff_dim"`
	BlockFFNDimMultiplier *float64 `json:"block_ffn_dim_multiplier"`
	BlockMultipleOf       *int     `json:"block_multiple_of"`
	FullAttnIdxs          []int    `json:"full_attn_idxs"`
	TieEmbedding          *bool    `json:"tie_embedding"`
	Theta                 *float64 `json:"theta"` // LFM2's original name of rope_theta

	// Granite 4.0 H's Mamba-2 layers and multipliers.
	SharedIntermediateSize *int            `json:"shared_intermediate_size"`
	MambaNHeads            *int            `json:"mamba_n_heads"`
	MambaDHead             json.RawMessage `json:"mamba_d_head"` // a number or "auto"
	MambaDState            *int            `json:"mamba_d_state"`
	MambaNGroups           *int            `json:"mamba_n_groups"`
	MambaDConv             *int            `json:"mamba_d_conv"`
	MambaExpand            *float64        `json:"mamba_expand"`
	MambaConvBias          *bool           `json:"mamba_conv_bias"`
	MambaProjBias          *bool           `json:"mamba_proj_bias"`
	EmbeddingMultiplier    *float64        `json:"embedding_multiplier"`
	ResidualMultiplier     *float64        `json:"residual_multiplier"`
	AttentionMultiplier    *float64        `json:"attention_multiplier"`
	LogitsScaling          *float64        `json:"logits_scaling"`
	PositionEmbeddingType  string          `json:"position_embedding_type"`
	NumLocalExperts        *int            `json:"num_local_experts"`
}

// qwen35Rope is Qwen3.5's rope_parameters (or, in older configs,
// rope_scaling): one entry for every layer, with the multimodal sections.
type qwen35Rope struct {
	RopeType            string   `json:"rope_type"`
	Type                string   `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	MRopeSection        []int    `json:"mrope_section"`
}

// qwen35Text reads a multimodal Qwen3.5 config's text_config in place of
// the top-level keys (model_type "qwen3_5" -> "qwen3_5_text",
// Qwen3_5ForConditionalGeneration; "qwen3_5_moe" -> "qwen3_5_moe_text");
// the text model is what is imported.
func qwen35Text(raw []byte, hc *hfConfig) error {
	textType := map[string]string{"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}[hc.ModelType]
	if textType == "" {
		return nil
	}
	var top struct {
		TextConfig        json.RawMessage `json:"text_config"`
		TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	}
	if err := json.Unmarshal(raw, &top); err != nil || len(top.TextConfig) == 0 || string(top.TextConfig) == "null" {
		return fmt.Errorf("%w: %s config without a text_config", ErrFormat, hc.ModelType)
	}
	var text hfConfig
	if err := json.Unmarshal(top.TextConfig, &text); err != nil {
		return fmt.Errorf("%w: %s text_config: %w", ErrFormat, hc.ModelType, err)
	}
	text.ModelType = textType
	if text.TieWordEmbeddings == nil {
		text.TieWordEmbeddings = top.TieWordEmbeddings
	}
	*hc = text
	return nil
}

// qwen35TensorName maps a Qwen3.5 tensor name to the text model's: the
// multimodal checkpoint's "model.language_model.X" is "model.X"; the
// vision tower's tensors and the multi-token-prediction head's ("mtp.",
// a draft the text model does not read) are skipped.
func qwen35TensorName(name string) (string, bool) {
	for _, p := range []string{"model.visual.", "mtp.", "model.mtp."} {
		if strings.HasPrefix(name, p) {
			return "", true
		}
	}
	if rest, ok := strings.CutPrefix(name, "model.language_model."); ok {
		return "model." + rest, false
	}
	return name, false
}

// layerKinds reads layer_types into the layers of kind recurrent; every
// entry must be recurrent or attention.
func (h *hfConfig) layerKinds(c *model.Config, recurrent, attention string) ([]int, error) {
	if len(h.LayerTypes) != c.Layers {
		return nil, fmt.Errorf("%w: layer_types has %d entries for %d layers", ErrFormat, len(h.LayerTypes), c.Layers)
	}
	var out []int
	for l, typ := range h.LayerTypes {
		switch typ {
		case recurrent:
			out = append(out, l)
		case attention:
		default:
			return nil, fmt.Errorf("%w: %s layer_types entry %q", ErrUnsupported, h.ModelType, typ)
		}
	}
	return out, nil
}

// qwen35 reads Qwen3.5's text model (Qwen3_5TextConfig; llama.cpp's
// Qwen3_5TextModel converter and src/models/qwen35.cpp): Gated DeltaNet
// layers (layer_types "linear_attention", or all but every
// full_attention_interval-th) of linear_conv_kernel_dim taps,
// linear_num_key_heads key heads and linear_num_value_heads value heads
// of one head size, beside gated full attention with q/k norms whose
// first partial_rotary_factor of each head rotates. For text every
// multimodal RoPE stream is the position, so mrope_section changes
// nothing: NEOX rotation of those dims. Norms other than the DeltaNet's
// store w for a 1+w multiplier (plusOne, as the converter does).
func (h *hfConfig) qwen35(c *model.Config) error {
	// Qwen3_5TextConfig's defaults where config.json is silent.
	if h.HeadDim == nil {
		c.HeadDim = 256
	}
	if h.NumKeyValueHeads == nil {
		c.KVHeads = 2
	}
	c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
	c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyF32
	if h.HiddenAct != "" && h.HiddenAct != "silu" {
		return fmt.Errorf("%w: qwen3_5 hidden_act %q", ErrUnsupported, h.HiddenAct)
	}
	if h.AttentionBias != nil && *h.AttentionBias {
		return fmt.Errorf("%w: qwen3_5 attention_bias true", ErrUnsupported)
	}
	if h.AttnOutputGate != nil && !*h.AttnOutputGate {
		return fmt.Errorf("%w: qwen3_5 attn_output_gate false", ErrUnsupported)
	}
	c.QKNorm, c.AttnOutputGate = true, true
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	// rope_parameters, or in older configs the top-level rope_theta and
	// partial_rotary_factor with rope_scaling's sections.
	rope := qwen35Rope{RopeTheta: h.RopeTheta, PartialRotaryFactor: h.PartialRotaryFactor}
	for _, src := range []json.RawMessage{h.RopeScaling, h.RopeParameters} {
		if len(src) > 0 && string(src) != "null" {
			if err := json.Unmarshal(src, &rope); err != nil {
				return fmt.Errorf("%w: qwen3_5 rope parameters %s: %w", ErrFormat, src, err)
			}
		}
	}
	if rope.RopeType == "" {
		rope.RopeType = rope.Type
	}
	switch rope.RopeType {
	case "", "default", "mrope":
	default:
		return fmt.Errorf("%w: qwen3_5 rope_type %q", ErrUnsupported, rope.RopeType)
	}
	c.RopeBase = orFloat(rope.RopeTheta, 10000)
	f := float64(orFloat(rope.PartialRotaryFactor, 0.25)) // the converter's default
	c.RopeDims = int(float64(c.HeadDim) * f)
	if !(f > 0 && f <= 1) || c.RopeDims%2 != 0 || c.RopeDims == 0 {
		return fmt.Errorf("%w: qwen3_5 partial_rotary_factor %g of head_dim %d", ErrFormat, f, c.HeadDim)
	}
	for _, s := range rope.MRopeSection {
		if s < 0 {
			return fmt.Errorf("%w: qwen3_5 mrope_section %v", ErrFormat, rope.MRopeSection)
		}
	}
	if h.LayerTypes != nil {
		layers, err := h.layerKinds(c, "linear_attention", "full_attention")
		if err != nil {
			return err
		}
		c.DeltaLayers = layers
	} else {
		n := orInt(h.FullAttentionInterval, 4)
		if n <= 0 {
			return fmt.Errorf("%w: full_attention_interval %d", ErrFormat, n)
		}
		for l := range c.Layers {
			if (l+1)%n != 0 {
				c.DeltaLayers = append(c.DeltaLayers, l)
			}
		}
	}
	c.DeltaConvWidth = orInt(h.LinearConvKernelDim, 4)
	c.DeltaKeyHeads = orInt(h.LinearNumKeyHeads, 16)
	c.DeltaValueHeads = orInt(h.LinearNumValueHeads, 32)
	c.DeltaHeadDim = orInt(h.LinearKeyHeadDim, 128)
	if vd := orInt(h.LinearValueHeadDim, 128); vd != c.DeltaHeadDim {
		// llama.cpp requires it too (one ssm.state_size).
		return fmt.Errorf("%w: linear_value_head_dim %d differs from linear_key_head_dim %d", ErrUnsupported, vd, c.DeltaHeadDim)
	}
	if k, v := c.DeltaKeyHeads, c.DeltaValueHeads; k <= 0 || v <= 0 || v%k != 0 || c.DeltaHeadDim <= 0 {
		return fmt.Errorf("%w: linear_num_key_heads %d, linear_num_value_heads %d, head dim %d", ErrFormat, k, v, c.DeltaHeadDim)
	}
	if len(c.DeltaLayers) == 0 {
		c.DeltaConvWidth, c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim = 0, 0, 0, 0
	}
	if c.Arch == model.ArchQwen35MoE {
		return h.qwen35Experts(c)
	}
	return nil
}

// qwen35Experts reads Qwen3.5 MoE's FFNs (Qwen3_5MoeTextConfig; llama.cpp's
// qwen35moe): every layer num_experts experts of moe_intermediate_size,
// num_experts_per_tok used, their weights renormalized unless
// norm_topk_prob is false, beside a shared expert of
// shared_expert_intermediate_size scaled by a sigmoid gate.
func (h *hfConfig) qwen35Experts(c *model.Config) error {
	for _, k := range []struct {
		key string
		p   *int
	}{{"num_experts", h.NumExperts}, {"num_experts_per_tok", h.NumExpertsPerTok}, {"moe_intermediate_size", h.MoEIntermediateSize}} {
		if k.p == nil || *k.p <= 0 {
			return fmt.Errorf("%w: %s %s missing or not positive", ErrFormat, h.ModelType, k.key)
		}
	}
	c.Experts, c.ExpertsUsed, c.ExpertHidden = *h.NumExperts, *h.NumExpertsPerTok, *h.MoEIntermediateSize
	if c.ExpertsUsed > c.Experts {
		return fmt.Errorf("%w: num_experts_per_tok %d of num_experts %d", ErrFormat, c.ExpertsUsed, c.Experts)
	}
	c.NormTopK = h.NormTopKProb == nil || *h.NormTopKProb
	c.SharedExpertHidden = orInt(h.SharedExpertSize, 0)
	if s := orInt(h.DecoderSparseStep, 1); s != 1 || len(h.MLPOnlyLayers) > 0 {
		return fmt.Errorf("%w: decoder_sparse_step %d, mlp_only_layers %v (only every layer sparse)", ErrUnsupported, s, h.MLPOnlyLayers)
	}
	if c.HiddenDim == 0 {
		c.HiddenDim = c.ExpertHidden // as the GGUF import, which has no feed_forward_length
	}
	return nil
}

// lfm2 reads LFM2 (Lfm2Config; src/models/lfm2.cpp): gated short
// convolutions of conv_L_cache taps (layer_types "conv", or every layer
// not in full_attn_idxs; without either, none) beside GQA attention with q/k norms and NEOX RoPE
// over the whole head (rope_theta, or theta in older configs, or
// rope_parameters); norm_eps; and the FFN width Lfm2MLP computes from
// intermediate_size (block_ff_dim, preferred, in older configs): with
// block_auto_adjust_ff_dim, two thirds of it times block_ffn_dim_multiplier,
// rounded up to block_multiple_of (Lfm2Config's defaults: true, 1.0, 256).
func (h *hfConfig) lfm2(c *model.Config) error {
	c.Norm, c.NormEps = model.NormRMS, orFloat(h.NormEps, 1e-5)
	c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyF32
	c.QKNorm = true
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	theta := h.RopeTheta
	if theta == nil {
		theta = h.Theta
	}
	c.RopeBase = orFloat(theta, 1e6)
	if len(h.RopeParameters) > 0 && string(h.RopeParameters) != "null" {
		// One entry, or one per layer type (the attention layers' read).
		var rp qwen35Rope
		var byType struct {
			FullAttention *qwen35Rope `json:"full_attention"`
		}
		err := json.Unmarshal(h.RopeParameters, &rp)
		if err == nil {
			err = json.Unmarshal(h.RopeParameters, &byType)
		}
		if byType.FullAttention != nil {
			rp = *byType.FullAttention
		}
		if err != nil || rp.RopeType != "" && rp.RopeType != "default" {
			return fmt.Errorf("%w: lfm2 rope_parameters %s", ErrUnsupported, h.RopeParameters)
		}
		c.RopeBase = orFloat(rp.RopeTheta, float64(c.RopeBase))
	}
	if h.ConvBias != nil && *h.ConvBias {
		return fmt.Errorf("%w: lfm2 conv_bias true", ErrUnsupported)
	}
	if h.LayerTypes != nil {
		layers, err := h.layerKinds(c, "conv", "full_attention")
		if err != nil {
			return err
		}
		c.ConvLayers = layers
	} else if h.FullAttnIdxs != nil {
		// (Without either, Lfm2Config makes every layer attention.)
		for l := range c.Layers {
			if !slices.Contains(h.FullAttnIdxs, l) {
				c.ConvLayers = append(c.ConvLayers, l)
			}
		}
	}
	if len(c.ConvLayers) > 0 {
		c.ConvWidth = orInt(h.ConvLCache, 3)
	}
	ff := h.IntermediateSize
	if h.BlockFFDim != nil {
		ff = *h.BlockFFDim // Lfm2Config prefers the original key
	}
	if h.BlockAutoAdjustFFDim == nil || *h.BlockAutoAdjustFFDim {
		ff = 2 * ff / 3
		if h.BlockFFNDimMultiplier != nil {
			ff = int(*h.BlockFFNDimMultiplier * float64(ff))
		}
		m := orInt(h.BlockMultipleOf, 256)
		if m <= 0 {
			return fmt.Errorf("%w: lfm2 block_multiple_of %d", ErrFormat, m)
		}
		ff = m * ((ff + m - 1) / m)
	}
	c.HiddenDim = ff
	if h.TieEmbedding != nil {
		h.TieWordEmbeddings = h.TieEmbedding // Lfm2Config prefers the original key
	}
	return nil
}

// graniteHybrid reads Granite 4.0 H (GraniteMoeHybridConfig;
// src/models/granite-hybrid.cpp): Mamba-2 layers (layer_types "mamba") of
// mamba_n_heads heads of mamba_d_head, d_inner = mamba_expand x
// hidden_size, mamba_n_groups groups of B and C of mamba_d_state,
// mamba_d_conv taps; attention layers of hidden_size/heads per head (the
// converter drops head_dim, as the model does) without RoPE when
// position_embedding_type is "nope"; the SwiGLU FFN of
// shared_intermediate_size; and Granite's multipliers (embedding,
// residual, attention as the kq scale, logits_scaling dividing the
// logits). q/k rows are un-permuted to Meta's pairing as the converter
// does (undo_permute). Routed experts, projection biases and a
// convolution without bias are refused.
func (h *hfConfig) graniteHybrid(c *model.Config) error {
	c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
	c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyF32
	if h.HiddenAct != "" && h.HiddenAct != "silu" {
		return fmt.Errorf("%w: granitemoehybrid hidden_act %q", ErrUnsupported, h.HiddenAct)
	}
	// GraniteMoeHybridConfig's default is 8 experts.
	if n := orInt(h.NumLocalExperts, 8); n != 0 {
		return fmt.Errorf("%w: granitemoehybrid num_local_experts %d (routed experts)", ErrUnsupported, n)
	}
	if h.MambaProjBias != nil && *h.MambaProjBias || h.AttentionBias != nil && *h.AttentionBias {
		return fmt.Errorf("%w: granitemoehybrid projection biases", ErrUnsupported)
	}
	if h.MambaConvBias != nil && !*h.MambaConvBias {
		return fmt.Errorf("%w: granitemoehybrid mamba_conv_bias false", ErrUnsupported)
	}
	c.HeadDim = c.Dim / c.Heads
	c.RopeStyle = model.RopeInterleaved // q/k un-permuted on import
	switch h.PositionEmbeddingType {
	case "", "nope": // transformers rotates only with "rope"
		c.RopeDims = 0
	case "rope":
		c.RopeDims = c.HeadDim
		if rs, err := h.scaling(); err != nil || rs != nil && rs.RopeType != "default" {
			return fmt.Errorf("%w: granitemoehybrid rope_scaling %s", ErrUnsupported, h.RopeScaling)
		}
	default:
		return fmt.Errorf("%w: granitemoehybrid position_embedding_type %q", ErrUnsupported, h.PositionEmbeddingType)
	}
	if c.HiddenDim = orInt(h.SharedIntermediateSize, 0); c.HiddenDim <= 0 {
		return fmt.Errorf("%w: granitemoehybrid shared_intermediate_size missing", ErrFormat)
	}
	layers, err := h.layerKinds(c, "mamba", "attention")
	if err != nil {
		return err
	}
	expand := float64(orFloat(h.MambaExpand, 2))
	s := model.SSM{Layers: layers, Inner: int(expand * float64(c.Dim)), Heads: orInt(h.MambaNHeads, 128),
		Groups: orInt(h.MambaNGroups, 1), State: orInt(h.MambaDState, 256), Conv: orInt(h.MambaDConv, 4)}
	d := -1
	switch raw := string(h.MambaDHead); raw {
	case "", "null", `"auto"`:
		if s.Heads > 0 {
			d = s.Inner / s.Heads
		}
	default:
		if err := json.Unmarshal(h.MambaDHead, &d); err != nil {
			return fmt.Errorf("%w: granitemoehybrid mamba_d_head %s", ErrFormat, raw)
		}
	}
	if s.Heads <= 0 || s.Groups <= 0 || s.Heads*d != s.Inner || s.Heads%s.Groups != 0 || s.State <= 0 || s.Conv < 2 {
		return fmt.Errorf("%w: granitemoehybrid mamba: d_inner %d (expand %g), %d heads of %d, %d groups, d_state %d, d_conv %d",
			ErrFormat, s.Inner, expand, s.Heads, d, s.Groups, s.State, s.Conv)
	}
	if len(layers) > 0 {
		c.SSM = s
	}
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	for _, m := range []struct {
		key string
		p   *float64
		dst *float32
	}{{"embedding_multiplier", h.EmbeddingMultiplier, &c.EmbedScale}, {"residual_multiplier", h.ResidualMultiplier, &c.ResidualScale},
		{"attention_multiplier", h.AttentionMultiplier, &c.AttnScale}, {"logits_scaling", h.LogitsScaling, &c.LogitScale}} {
		if m.p == nil || *m.p == 0 {
			continue // absent or 0: none, as the converter writes nothing
		}
		if !(*m.p > 0) || math.IsInf(*m.p, 0) {
			return fmt.Errorf("%w: granitemoehybrid %s %g", ErrFormat, m.key, *m.p)
		}
		*m.dst = float32(*m.p)
	}
	return nil
}

// hybridGlobals maps the whole-model tensors of the hybrids; nil for the
// other architectures.
func hybridGlobals(arch string) map[string]target {
	switch arch {
	case model.ArchQwen35, model.ArchQwen35MoE:
		return map[string]target{
			"model.embed_tokens.weight": {name: model.TokenEmbedding},
			"model.norm.weight":         {name: model.FinalNorm, xform: plusOne},
			"lm_head.weight":            {name: model.LMHead},
		}
	case model.ArchLFM2:
		return map[string]target{
			"model.embed_tokens.weight": {name: model.TokenEmbedding},
			// LFM2's final norm (applied after the last layer).
			"model.embedding_norm.weight": {name: model.FinalNorm},
			"lm_head.weight":              {name: model.LMHead},
		}
	case model.ArchGraniteHybrid:
		return map[string]target{
			"model.embed_tokens.weight": {name: model.TokenEmbedding},
			"model.norm.weight":         {name: model.FinalNorm},
			"lm_head.weight":            {name: model.LMHead},
		}
	}
	return nil
}

// hybridLayers maps the per-layer tensors of the hybrids; nil for the
// other architectures. Each layer kind has its own names, so one map
// serves both kinds; the config says which a layer must have.
func hybridLayers(arch string) map[string]target {
	switch arch {
	case model.ArchQwen35, model.ArchQwen35MoE:
		m := map[string]target{
			"input_layernorm.weight":          {name: model.AttnNorm, xform: plusOne},
			"post_attention_layernorm.weight": {name: model.FFNNorm, xform: plusOne},
			"self_attn.q_proj.weight":         {name: model.WQ, xform: queryGate},
			"self_attn.k_proj.weight":         {name: model.WK},
			"self_attn.v_proj.weight":         {name: model.WV},
			"self_attn.o_proj.weight":         {name: model.WO},
			"self_attn.q_norm.weight":         {name: model.QNorm, xform: plusOne},
			"self_attn.k_norm.weight":         {name: model.KNorm, xform: plusOne},
			"linear_attn.in_proj_qkv.weight":  {name: model.DeltaQKV, xform: deltaQKV},
			"linear_attn.in_proj_z.weight":    {name: model.DeltaZ, xform: deltaHeads},
			"linear_attn.in_proj_b.weight":    {name: model.DeltaBeta, xform: deltaHeads},
			"linear_attn.in_proj_a.weight":    {name: model.DeltaAlpha, xform: deltaHeads},
			"linear_attn.conv1d.weight":       {name: model.DeltaConv, xform: deltaConv},
			"linear_attn.dt_bias":             {name: model.DeltaDtBias, xform: deltaHeads},
			"linear_attn.A_log":               {name: model.DeltaA, xform: deltaA},
			"linear_attn.norm.weight":         {name: model.DeltaNorm},
			"linear_attn.out_proj.weight":     {name: model.DeltaOut, xform: deltaOut},
		}
		if arch == model.ArchQwen35 {
			m["mlp.gate_proj.weight"] = target{name: model.WGate}
			m["mlp.up_proj.weight"] = target{name: model.WUp}
			m["mlp.down_proj.weight"] = target{name: model.WDown}
			return m
		}
		// Qwen3.5 MoE: the router, the experts (per expert as
		// mlp.experts.K.*_proj.weight, expertTarget, or fused
		// [experts, 2*hidden, dim] gate_up and [experts, dim, hidden]
		// down as transformers 5 saves them), the shared expert and its
		// gate.
		for _, suffix := range []string{"", ".weight"} {
			m["mlp.experts.gate_up_proj"+suffix] = target{name: model.ExpertsGate, xform: expertsGateUp}
			m["mlp.experts.down_proj"+suffix] = target{name: model.ExpertsDown, xform: experts3D}
		}
		m["mlp.gate.weight"] = target{name: model.Router}
		m["mlp.shared_expert.gate_proj.weight"] = target{name: model.SharedGate}
		m["mlp.shared_expert.up_proj.weight"] = target{name: model.SharedUp}
		m["mlp.shared_expert.down_proj.weight"] = target{name: model.SharedDown}
		m["mlp.shared_expert_gate.weight"] = target{name: model.SharedRouter}
		return m
	case model.ArchLFM2:
		return map[string]target{
			"operator_norm.weight":         {name: model.AttnNorm},
			"ffn_norm.weight":              {name: model.FFNNorm},
			"self_attn.q_proj.weight":      {name: model.WQ},
			"self_attn.k_proj.weight":      {name: model.WK},
			"self_attn.v_proj.weight":      {name: model.WV},
			"self_attn.out_proj.weight":    {name: model.WO},
			"self_attn.q_layernorm.weight": {name: model.QNorm},
			"self_attn.k_layernorm.weight": {name: model.KNorm},
			"conv.in_proj.weight":          {name: model.ConvInProj},
			"conv.conv.weight":             {name: model.ConvKernel, xform: squeezeConv},
			"conv.out_proj.weight":         {name: model.ConvOutProj},
			"feed_forward.w1.weight":       {name: model.WGate},
			"feed_forward.w3.weight":       {name: model.WUp},
			"feed_forward.w2.weight":       {name: model.WDown},
		}
	case model.ArchGraniteHybrid:
		return map[string]target{
			"input_layernorm.weight":          {name: model.AttnNorm},
			"post_attention_layernorm.weight": {name: model.FFNNorm},
			"self_attn.q_proj.weight":         {name: model.WQ, xform: unpermute, heads: true},
			"self_attn.k_proj.weight":         {name: model.WK, xform: unpermute},
			"self_attn.v_proj.weight":         {name: model.WV},
			"self_attn.o_proj.weight":         {name: model.WO},
			"mamba.in_proj.weight":            {name: model.SSMIn},
			"mamba.conv1d.weight":             {name: model.SSMConv, xform: squeezeConv},
			"mamba.conv1d.bias":               {name: model.SSMConvBias},
			"mamba.dt_bias":                   {name: model.SSMDtBias},
			"mamba.A_log":                     {name: model.SSMA, xform: negExp},
			"mamba.D":                         {name: model.SSMD},
			"mamba.norm.weight":               {name: model.SSMNorm},
			"mamba.out_proj.weight":           {name: model.SSMOut},
			"shared_mlp.input_linear.weight":  {name: model.WGate, xform: splitGateUp},
			"shared_mlp.output_linear.weight": {name: model.WDown},
		}
	}
	return nil
}

// squeeze drops the unit middle axis of a depthwise Conv1d weight
// [channels, 1, taps], as the converters do.
func squeeze(t *tensors.Tensor) error {
	if len(t.Shape) == 3 && t.Shape[1] == 1 {
		t.Shape = []int{t.Shape[0], t.Shape[2]}
		return nil
	}
	if len(t.Shape) == 2 {
		return nil // already squeezed
	}
	return fmt.Errorf("%w: convolution %s has shape %v, not [channels, 1, taps]", ErrFormat, t.Name, t.Shape)
}

// hybridTransform applies the hybrids' transforms to t (already
// squeezed); parts are the tensors to keep, under their names.
func (im *importer) hybridTransform(tg target, t *tensors.Tensor, layer int) ([]*tensors.Tensor, error) {
	c := &im.ck.Config
	k, v, d := c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim
	switch tg.xform {
	case deltaQKV, deltaConv, deltaHeads, deltaA, deltaOut:
		if !c.DeltaLayer(layer) {
			return nil, fmt.Errorf("%w: %s in layer %d, a full-attention layer", ErrFormat, t.Name, layer)
		}
	case queryGate:
		if c.DeltaLayer(layer) {
			return nil, fmt.Errorf("%w: %s in layer %d, a linear-attention layer", ErrFormat, t.Name, layer)
		}
	}
	var err error
	switch tg.xform {
	case queryGate:
		q, gate, err := splitQueryGate(t, c.HeadDim)
		if err != nil {
			return nil, err
		}
		q.Name, gate.Name = model.Layer(layer, model.WQ), model.Layer(layer, model.WQGate)
		return []*tensors.Tensor{q, gate}, nil
	case deltaQKV, deltaConv:
		t, err = tileValueHeads(t, 2*k*d, k, v, d, false)
	case deltaHeads:
		if t.Shape[0]%v != 0 {
			return nil, fmt.Errorf("%w: %s has %d rows for %d value heads", ErrFormat, t.Name, t.Shape[0], v)
		}
		t, err = tileValueHeads(t, 0, k, v, t.Shape[0]/v, false)
	case deltaOut:
		t, err = tileValueHeads(t, 0, k, v, d, true)
	case deltaA:
		if t, err = negExpTensor(t); err == nil {
			t, err = tileValueHeads(t, 0, k, v, 1, false)
		}
	case negExp:
		t, err = negExpTensor(t)
	case experts3D:
		if len(t.Shape) != 3 || t.Shape[0] != c.Experts {
			return nil, fmt.Errorf("%w: %s has shape %v, not [%d experts, rows, cols]", ErrFormat, t.Name, t.Shape, c.Experts)
		}
	case expertsGateUp:
		return splitGateUp3D(t, c.Experts, layer)
	}
	if err != nil {
		return nil, err
	}
	return []*tensors.Tensor{t}, nil
}

// splitQueryGate splits Qwen3.5's q_proj, whose rows alternate per head
// between the query's head_dim rows and the output gate's
// ([q_0 | g_0 | q_1 | g_1 ...], Qwen3NextAttention's view(..., 2*head_dim)
// chunked in two), into the query and gate rows.
func splitQueryGate(t *tensors.Tensor, hd int) (q, gate *tensors.Tensor, err error) {
	if hd <= 0 || len(t.Shape) != 2 || t.Shape[0]%(2*hd) != 0 {
		return nil, nil, fmt.Errorf("%w: %s %v does not split into query and gate rows of %d per head", ErrFormat, t.Name, t.Shape, hd)
	}
	rb := rowBytes(t)
	half := t.Shape[0] / 2
	q = &tensors.Tensor{DType: t.DType, Shape: []int{half, t.Shape[1]}, Data: make([]byte, 0, half*rb)}
	gate = &tensors.Tensor{DType: t.DType, Shape: []int{half, t.Shape[1]}, Data: make([]byte, 0, half*rb)}
	run := hd * rb
	for h := 0; h < t.Shape[0]/(2*hd); h++ {
		q.Data = append(q.Data, t.Data[2*h*run:(2*h+1)*run]...)
		gate.Data = append(gate.Data, t.Data[(2*h+1)*run:(2*h+2)*run]...)
	}
	return q, gate, nil
}

// tileValueHeads reorders Qwen3.5's value heads from HF's grouped order
// (value head j reads key head j / (v/k)) to the tiled order llama.cpp's
// converter writes and the runtime reads (head j reads key head j mod k):
// tiled head i*k + g is grouped head g*(v/k) + i. The heads are runs of
// blk rows starting at row from (cols: runs of blk columns in every row).
func tileValueHeads(t *tensors.Tensor, from, k, v, blk int, cols bool) (*tensors.Tensor, error) {
	if k <= 0 || v%k != 0 || blk <= 0 {
		return nil, fmt.Errorf("%w: %s: %d value heads over %d key heads", ErrFormat, t.Name, v, k)
	}
	r := v / k
	if cols {
		if len(t.Shape) != 2 || t.Shape[1] != v*blk || t.DType.Block() {
			return nil, fmt.Errorf("%w: %s has shape %v, not %d value heads of %d columns", ErrFormat, t.Name, t.Shape, v, blk)
		}
		eb := t.DType.ByteSize(1)
		run, rb := blk*eb, t.DType.ByteSize(t.Shape[1])
		out := make([]byte, len(t.Data))
		for row := range t.Shape[0] {
			src, dst := t.Data[row*rb:(row+1)*rb], out[row*rb:(row+1)*rb]
			for i := range r {
				for g := range k {
					copy(dst[(i*k+g)*run:(i*k+g+1)*run], src[(g*r+i)*run:(g*r+i+1)*run])
				}
			}
		}
		return &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: out}, nil
	}
	if t.Shape[0] != from+v*blk {
		return nil, fmt.Errorf("%w: %s has %d rows, not %d + %d value heads of %d", ErrFormat, t.Name, t.Shape[0], from, v, blk)
	}
	rb := rowBytes(t)
	run := blk * rb
	out := slices.Clone(t.Data)
	base := from * rb
	for i := range r {
		for g := range k {
			copy(out[base+(i*k+g)*run:base+(i*k+g+1)*run], t.Data[base+(g*r+i)*run:base+(g*r+i+1)*run])
		}
	}
	return &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: out}, nil
}

// negExpTensor returns -exp(x) as F32: the converters store A = -exp(A_log)
// for the runtime's decay.
func negExpTensor(t *tensors.Tensor) (*tensors.Tensor, error) {
	n := t.NumElements()
	out := make([]byte, 4*n)
	for i := range n {
		var x float64
		switch t.DType {
		case tensors.F32:
			x = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
		case tensors.F16:
			x = float64(float16.Frombits(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32())
		case tensors.BF16:
			x = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16))
		default:
			return nil, fmt.Errorf("%w: %s has dtype %s", ErrUnsupported, t.Name, t.DType)
		}
		a := float32(-math.Exp(x))
		if math.IsInf(float64(a), 0) || a == 0 {
			return nil, fmt.Errorf("%w: %s: A_log %g gives A = %g", ErrFormat, t.Name, x, a)
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(a))
	}
	return &tensors.Tensor{Name: t.Name, DType: tensors.F32, Shape: t.Shape, Data: out}, nil
}

// splitGateUp3D splits fused expert weights [experts, 2*hidden, dim]
// (each expert's gate rows, then its up rows; the converter's split) into
// the stacked ExpertsGate and ExpertsUp.
func splitGateUp3D(t *tensors.Tensor, experts, layer int) ([]*tensors.Tensor, error) {
	if len(t.Shape) != 3 || t.Shape[0] != experts || t.Shape[1]%2 != 0 || t.DType.Block() {
		return nil, fmt.Errorf("%w: %s has shape %v, not [%d experts, 2*hidden, dim]", ErrFormat, t.Name, t.Shape, experts)
	}
	h, cols := t.Shape[1]/2, t.Shape[2]
	half := h * t.DType.ByteSize(cols)
	gate := &tensors.Tensor{Name: model.Layer(layer, model.ExpertsGate), DType: t.DType, Shape: []int{experts, h, cols}, Data: make([]byte, 0, experts*half)}
	up := &tensors.Tensor{Name: model.Layer(layer, model.ExpertsUp), DType: t.DType, Shape: []int{experts, h, cols}, Data: make([]byte, 0, experts*half)}
	for e := range experts {
		slab := t.Data[2*e*half : 2*(e+1)*half]
		gate.Data = append(gate.Data, slab[:half]...)
		up.Data = append(up.Data, slab[half:]...)
	}
	return []*tensors.Tensor{gate, up}, nil
}
