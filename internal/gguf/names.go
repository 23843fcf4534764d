package gguf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpurun/gpurun/tensors/model"
)

// Per-block GGUF tensor names (after "blk.N.") and ours.
var layerNames = map[string]string{
	"attn_norm.weight":           model.AttnNorm,
	"attn_norm.bias":             model.AttnNormBias,
	"attn_q.weight":              model.WQ,
	"attn_k.weight":              model.WK,
	"attn_v.weight":              model.WV,
	"attn_q.bias":                model.BQ,
	"attn_k.bias":                model.BK,
	"attn_v.bias":                model.BV,
	"attn_output.weight":         model.WO,
	"attn_output.bias":           model.BO,
	"attn_q_norm.weight":         model.QNorm,
	"attn_k_norm.weight":         model.KNorm,
	"post_attention_norm.weight": model.PostAttnNorm,
	"ffn_norm.weight":            model.FFNNorm,
	"ffn_norm.bias":              model.FFNNormBias,
	"post_ffw_norm.weight":       model.PostFFNNorm,
	"ffn_gate.weight":            model.WGate,
	"ffn_up.weight":              model.WUp,
	"ffn_down.weight":            model.WDown,
	"ffn_up.bias":                model.BUp,
	"ffn_down.bias":              model.BDown,
	"ffn_gate_inp.weight":        model.Router,
	"ffn_gate_exps.weight":       model.ExpertsGate,
	"ffn_up_exps.weight":         model.ExpertsUp,
	"ffn_down_exps.weight":       model.ExpertsDown,
	"ffn_gate_inp.bias":          model.RouterBias,
	"ffn_gate_exps.bias":         model.ExpertsGateBias,
	"ffn_up_exps.bias":           model.ExpertsUpBias,
	"ffn_down_exps.bias":         model.ExpertsDownBias,
	"attn_sinks.weight":          model.AttnSinks,
	"inp_gate.weight":            model.PerLayerGate,
	"proj.weight":                model.PerLayerProj,
	"post_norm.weight":           model.PerLayerPostNorm,
	"layer_output_scale.weight":  model.LayerScale,
	"shortconv.in_proj.weight":   model.ConvInProj,
	"shortconv.conv.weight":      model.ConvKernel,
	"shortconv.out_proj.weight":  model.ConvOutProj,
	// BERT's post-LN norms: after attention, after the FFN.
	"attn_output_norm.weight":  model.AttnNorm,
	"attn_output_norm.bias":    model.AttnNormBias,
	"layer_output_norm.weight": model.FFNNorm,
	"layer_output_norm.bias":   model.FFNNormBias,
	// Mamba-2 (granitehybrid); ssm_a, ssm_d and ssm_norm are flattened
	// to vectors on import (flatSSM).
	"ssm_in.weight":     model.SSMIn,
	"ssm_conv1d.weight": model.SSMConv,
	"ssm_conv1d.bias":   model.SSMConvBias,
	"ssm_dt.bias":       model.SSMDtBias,
	"ssm_a":             model.SSMA,
	"ssm_d":             model.SSMD,
	"ssm_norm.weight":   model.SSMNorm,
	"ssm_out.weight":    model.SSMOut,
}

// flatSSM names the Mamba-2 tensors stored with a unit or group axis
// (ssm_a and ssm_d as [1, heads], ssm_norm as [inner/groups, groups] in
// ggml order) that are one vector each: imported flat.
var flatSSM = map[string]bool{model.SSMA: true, model.SSMD: true, model.SSMNorm: true}

var globalNames = map[string]string{
	"token_embd.weight":  model.TokenEmbedding,
	"output_norm.weight": model.FinalNorm,
	"output_norm.bias":   model.FinalNormBias,
	"output.weight":      model.LMHead,
	"output.bias":        model.LMHeadBiasName,
	// Gemma 4's per-layer inputs.
	"per_layer_token_embd.weight": model.PerLayerEmbedding,
	"per_layer_model_proj.weight": model.PerLayerModelProj,
	"per_layer_proj_norm.weight":  model.PerLayerProjNorm,
	// EmbeddingGemma's projections after pooling.
	"dense_2.weight": model.DenseIn,
	"dense_3.weight": model.DenseOut,
}

// BERT's global tensors: the position rows (which the token type 0 row is
// folded into) and the embeddings' norm.
const (
	bertPositions  = "position_embd.weight"
	bertTokenTypes = "token_types.weight"
	bertEmbedNorm  = "token_embd_norm.weight"
	bertEmbedBias  = "token_embd_norm.bias"
)

// lfm2FinalNorm is LFM2's final norm, named token_embd_norm in GGUF
// (llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2); it has no output_norm.
const lfm2FinalNorm = "token_embd_norm.weight"

// Fused QKV projections, split into Q, K and V rows on import.
const (
	fusedQKV     = "attn_qkv.weight"
	fusedQKVBias = "attn_qkv.bias"
	// fusedUp is Phi 3's [gate | up] rows in one ffn_up (src/models/phi3.cpp:52).
	fusedUp = "ffn_up.weight"
)

// Global tensors that are RoPE hyperparameters rather than weights: they go
// into the configuration (Llama 3's rope_freqs, Phi 3's LongRoPE factors).
const (
	ropeFreqs        = "rope_freqs.weight"
	ropeFactorsLong  = "rope_factors_long.weight"
	ropeFactorsShort = "rope_factors_short.weight"
)

// splitName parses "blk.N.suffix" into (N, suffix); layer is -1 for a
// global tensor.
func splitName(name string, layers int) (layer int, suffix string, err error) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1, name, nil
	}
	num, suffix, ok := strings.Cut(rest, ".")
	l, convErr := strconv.Atoi(num)
	if !ok || convErr != nil || l < 0 || l >= layers || strconv.Itoa(l) != num {
		return 0, "", fmt.Errorf("%w: tensor %q: bad block number for %d layers", ErrFormat, name, layers)
	}
	return l, suffix, nil
}
