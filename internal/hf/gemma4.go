package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/gpurun/gpurun/tensors/model"
)

// gemma4Keys are the config.json keys of Gemma 4's text model
// (Gemma4TextConfig; llama.cpp's converter reads the same ones,
// conversion/gemma.py's Gemma4Model).
type gemma4Keys struct {
	HiddenSizePerLayerInput *int            `json:"hidden_size_per_layer_input"`
	NumKVSharedLayers       *int            `json:"num_kv_shared_layers"`
	GlobalHeadDim           *int            `json:"global_head_dim"`
	UseDoubleWideMLP        *bool           `json:"use_double_wide_mlp"`
	NumGlobalKeyValueHeads  *int            `json:"num_global_key_value_heads"`
	RopeParameters          json.RawMessage `json:"rope_parameters"`
	TextConfig              json.RawMessage `json:"text_config"`
	EnableMoEBlock          *bool           `json:"enable_moe_block"`
	AttentionKEqV           *bool           `json:"attention_k_eq_v"`
}

// gemma4Rope is one layer type's entry of rope_parameters.
type gemma4Rope struct {
	RopeType            string   `json:"rope_type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// gemma4TextPrefix is where a multimodal Gemma 4 checkpoint
// (Gemma4ForConditionalGeneration, model_type "gemma4" with a text_config)
// keeps its text model's tensors; the towers' tensors are not imported.
const gemma4TextPrefix = "model.language_model."

// gemma4Towers are the prefixes of a multimodal checkpoint's vision and
// audio tensors, which the text model does not read.
var gemma4Towers = []string{"model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio."}

// gemma4Text reads a multimodal config's text_config in place of the
// top-level keys (model_type "gemma4" -> "gemma4_text"): the text model is
// what is imported. multimodal reports whether it did.
func gemma4Text(raw []byte, hc *hfConfig) (multimodal bool, err error) {
	if hc.ModelType != "gemma4" {
		return false, nil
	}
	var top struct {
		TextConfig        json.RawMessage `json:"text_config"`
		TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	}
	if err := json.Unmarshal(raw, &top); err != nil || len(top.TextConfig) == 0 || string(top.TextConfig) == "null" {
		return false, fmt.Errorf("%w: gemma4 config without a text_config", ErrFormat)
	}
	var text hfConfig
	if err := json.Unmarshal(top.TextConfig, &text); err != nil {
		return false, fmt.Errorf("%w: gemma4 text_config: %w", ErrFormat, err)
	}
	text.ModelType = "gemma4_text"
	if text.TieWordEmbeddings == nil {
		text.TieWordEmbeddings = top.TieWordEmbeddings
	}
	*hc = text
	return true, nil
}

// gemma4TensorName maps a multimodal checkpoint's tensor name to the text
// model's ("model.language_model.X" -> "model.X"); skip is set for the
// towers' tensors.
func gemma4TensorName(name string) (string, bool) {
	for _, p := range gemma4Towers {
		if strings.HasPrefix(name, p) {
			return "", true
		}
	}
	if rest, ok := strings.CutPrefix(name, gemma4TextPrefix); ok {
		return "model." + rest, false
	}
	return name, false
}

// gemma4 reads Gemma 4's text model (src/models/gemma4.cpp,
// arch3/README.md): sliding layers (layer_types) of head_dim beside
// global ones of global_head_dim, each kind with its rope base from
// rope_parameters and the global layers' "proportional" RoPE (its
// partial_rotary_factor of the pairs turn, the exponent over the whole
// head: factors of 1, then 1e30, as the converter writes rope_freqs); the
// last num_kv_shared_layers layers reading other layers' caches; per-layer
// inputs of hidden_size_per_layer_input; FFNs doubled on the shared layers
// with use_double_wide_mlp; q/k norms and a V norm without weight,
// sandwich norms, a scalar per layer, attention scale 1, the final soft
// cap. Norm weights are stored as they are (no 1+w). A mixture of experts,
// keys equal to values, and kv head counts differing by layer kind are
// refused.
func (h *hfConfig) gemma4(c *model.Config) error {
	g := h.gemma4Keys
	c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
	c.Act, c.GatedFFN, c.Activations = model.ActGELUTanh, true, model.PolicyF32
	if act := h.HiddenActivation; act != "" && act != "gelu_pytorch_tanh" {
		return fmt.Errorf("%w: gemma4 hidden_activation %q", ErrUnsupported, act)
	}
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.PostNorms, c.QKNorm, c.VNorm, c.LayerOutputScale = true, true, true, true
	c.AttnScale = 1
	c.FinalSoftCap = orFloat(h.FinalLogitSoftcapping, 0)
	switch {
	case g.EnableMoEBlock != nil && *g.EnableMoEBlock, orInt(h.NumExperts, 0) > 0:
		return fmt.Errorf("%w: gemma4 mixture of experts", ErrUnsupported)
	case g.AttentionKEqV != nil && *g.AttentionKEqV:
		return fmt.Errorf("%w: gemma4 attention_k_eq_v", ErrUnsupported)
	case g.NumGlobalKeyValueHeads != nil && *g.NumGlobalKeyValueHeads != c.KVHeads:
		return fmt.Errorf("%w: gemma4 num_global_key_value_heads %d beside num_key_value_heads %d", ErrUnsupported, *g.NumGlobalKeyValueHeads, c.KVHeads)
	case h.HeadDim == nil || g.GlobalHeadDim == nil || *h.HeadDim <= 0 || *g.GlobalHeadDim <= 0:
		return fmt.Errorf("%w: gemma4 head_dim and global_head_dim required", ErrFormat)
	}
	c.HeadDimLocal, c.HeadDim = *h.HeadDim, *g.GlobalHeadDim
	c.SlidingWindow = orInt(h.SlidingWindow, 0)
	if c.SlidingWindow <= 0 || len(h.LayerTypes) != c.Layers {
		return fmt.Errorf("%w: gemma4 sliding_window %d and %d layer_types for %d layers", ErrFormat, c.SlidingWindow, len(h.LayerTypes), c.Layers)
	}
	c.SlidingLayers = "list"
	for l, typ := range h.LayerTypes {
		switch typ {
		case "sliding_attention":
			c.SlidingLayerList = append(c.SlidingLayerList, l)
		case "full_attention":
		default:
			return fmt.Errorf("%w: layer_types entry %q", ErrUnsupported, typ)
		}
	}
	var rope map[string]gemma4Rope
	if len(g.RopeParameters) > 0 && string(g.RopeParameters) != "null" {
		if err := json.Unmarshal(g.RopeParameters, &rope); err != nil {
			return fmt.Errorf("%w: gemma4 rope_parameters %s: %w", ErrFormat, g.RopeParameters, err)
		}
	}
	full, swa := rope["full_attention"], rope["sliding_attention"]
	c.RopeBase, c.RopeBaseLocal = orFloat(full.RopeTheta, 1e6), orFloat(swa.RopeTheta, 10000)
	c.RopeDims = c.HeadDim
	c.RopeDimsLocal = int(float64(c.HeadDimLocal) * float64(orFloat(swa.PartialRotaryFactor, 1)))
	if c.RopeDimsLocal%2 != 0 || c.RopeDimsLocal <= 0 || c.RopeDimsLocal > c.HeadDimLocal || swa.RopeType != "" && swa.RopeType != "default" {
		return fmt.Errorf("%w: gemma4 sliding rope_parameters %+v", ErrUnsupported, swa)
	}
	switch full.RopeType {
	case "", "default":
	case "proportional":
		f := float64(orFloat(full.PartialRotaryFactor, 1))
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: gemma4 partial_rotary_factor %g", ErrFormat, f)
		}
		turning := int(float64(c.HeadDim) * f / 2)
		c.RopeFactors = make([]float32, c.HeadDim/2)
		for i := range c.RopeFactors {
			c.RopeFactors[i] = 1
			if i >= turning {
				c.RopeFactors[i] = 1e30
			}
		}
	default:
		return fmt.Errorf("%w: gemma4 full_attention rope_type %q", ErrUnsupported, full.RopeType)
	}
	c.SharedKVLayers = orInt(g.NumKVSharedLayers, 0)
	c.PerLayerDim = orInt(g.HiddenSizePerLayerInput, 0)
	if c.SharedKVLayers < 0 || c.SharedKVLayers >= c.Layers {
		return fmt.Errorf("%w: gemma4 num_kv_shared_layers %d of %d layers", ErrFormat, c.SharedKVLayers, c.Layers)
	}
	if g.UseDoubleWideMLP != nil && *g.UseDoubleWideMLP && c.SharedKVLayers > 0 {
		c.LayerHidden = make([]int, c.Layers)
		for l := range c.Layers {
			c.LayerHidden[l] = h.IntermediateSize
			if l >= c.Layers-c.SharedKVLayers {
				c.LayerHidden[l] = 2 * h.IntermediateSize
			}
		}
		c.HiddenDim = 2 * h.IntermediateSize
	}
	return nil
}

// gemma4Globals are Gemma 4's whole-model tensors besides the embedding,
// final norm and head: the per-layer inputs' table, projection and norm.
var gemma4Globals = map[string]target{
	"model.embed_tokens_per_layer.weight":     {name: model.PerLayerEmbedding},
	"model.per_layer_model_projection.weight": {name: model.PerLayerModelProj},
	"model.per_layer_projection_norm.weight":  {name: model.PerLayerProjNorm},
}

// gemma4Layer are Gemma 4's per-layer tensors besides the projections and
// the FFN: the four sandwich norms, q/k norms (the V norm has no weight),
// the per-layer input's gate, projection and norm, and the layer's scalar.
var gemma4Layer = map[string]target{
	"self_attn.q_norm.weight":           {name: model.QNorm},
	"self_attn.k_norm.weight":           {name: model.KNorm},
	"post_attention_layernorm.weight":   {name: model.PostAttnNorm},
	"pre_feedforward_layernorm.weight":  {name: model.FFNNorm},
	"post_feedforward_layernorm.weight": {name: model.PostFFNNorm},
	"per_layer_input_gate.weight":       {name: model.PerLayerGate},
	"per_layer_projection.weight":       {name: model.PerLayerProj},
	"post_per_layer_input_norm.weight":  {name: model.PerLayerPostNorm},
	"layer_scalar":                      {name: model.LayerScale},
}
