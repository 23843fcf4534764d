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
	if h.RopeScaling != nil && string(h.RopeScaling) != "null" {
		return model.Config{}, fmt.Errorf("%w: rope_scaling %s", ErrUnsupported, h.RopeScaling)
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
	case model.ArchLlama:
		c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
		// q/k rows are un-permuted on import to Meta's interleaved pairing,
		// so every Llama source (llama2.c, GGUF, HF) has one layout.
		c.RopeStyle = model.RopeInterleaved
		c.Act, c.GatedFFN, c.Activations = model.ActSiLU, true, model.PolicyAuto
		if h.HiddenAct != "" && h.HiddenAct != "silu" {
			return c, fmt.Errorf("%w: llama hidden_act %q", ErrUnsupported, h.HiddenAct)
		}
	case model.ArchGemma, model.ArchGemma2:
		c.Norm, c.NormEps = model.NormRMS, orFloat(h.RMSNormEps, 1e-6)
		c.Act, c.GatedFFN, c.Activations = model.ActGELUTanh, true, model.PolicyF16
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		if arch == model.ArchGemma2 {
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
	c.AddBOS = c.BOS >= 0 && (arch == model.ArchLlama || arch == model.ArchGemma || arch == model.ArchGemma2)
	return c, nil
}
