package model

import (
	"fmt"
	"strings"
)

// Tensor names follow MediaPipe's GPU weight naming. Linear weights end in
// ".w" ([out, in]), their biases in ".b"; norms carry ".scale" and, for
// LayerNorm, ".bias". A quantized tensor's scales are "<name>_quantized_scale".
const (
	TokenEmbedding = "params.lm.token_embedding.w" // [vocab, dim]
	FinalNorm      = "params.lm.final_ln.scale"
	FinalNormBias  = "params.lm.final_ln.bias"
	LMHead         = "params.lm.softmax.logits_ffn.w" // [vocab, dim]; absent when tied
	LMHeadBiasName = "params.lm.softmax.logits_ffn.b"
	// Gemma 4's per-layer inputs (Config.PerLayerDim = P, L layers):
	PerLayerEmbedding = "params.lm.per_layer.token_embedding.w" // [vocab, L*P]
	PerLayerModelProj = "params.lm.per_layer.model_proj.w"      // [L*P, dim]
	PerLayerProjNorm  = "params.lm.per_layer.proj_norm.scale"   // [P]
	// An embedding model's dense projections after pooling
	// (Config.DenseDim = D): EmbeddingGemma's dense_2 and dense_3.
	DenseIn  = "params.embed.dense_in.w"  // [D, dim]
	DenseOut = "params.embed.dense_out.w" // [dim, D]
	// BERT's learned positions and embedding norm
	// (Config.LearnedPositions, EmbedNorm).
	PositionEmbedding = "params.lm.position_embedding.w" // [max_seq_len, dim]
	EmbedNorm         = "params.lm.embedding_ln.scale"
	EmbedNormBias     = "params.lm.embedding_ln.bias"
)

// Per-layer tensor suffixes, appended to Layer(i).
const (
	AttnNorm     = "pre_layer_norm.scale"
	AttnNormBias = "pre_layer_norm.bias"
	WQ           = "self_attention.q.w" // [heads*head_dim, dim]
	WK           = "self_attention.k.w" // [kv_heads*head_dim, dim]
	WV           = "self_attention.v.w" // [kv_heads*head_dim, dim]
	WO           = "self_attention.post.w"
	BQ           = "self_attention.q.b"
	BK           = "self_attention.k.b"
	BV           = "self_attention.v.b"
	BO           = "self_attention.post.b"
	QNorm        = "self_attention.q_norm.scale" // [head_dim], Qwen 3 / Gemma 3
	KNorm        = "self_attention.k_norm.scale" // [head_dim]
	PostAttnNorm = "post_attention_norm.scale"   // Gemma 2
	FFNNorm      = "ff_layer.pre_layer_norm.scale"
	FFNNormBias  = "ff_layer.pre_layer_norm.bias"
	PostFFNNorm  = "ff_layer.post_layer_norm.scale" // Gemma 2
	WGate        = "ff_layer.ffn_layer1_gate.w"     // [hidden, dim]
	WUp          = "ff_layer.ffn_layer1.w"          // [hidden, dim]
	WDown        = "ff_layer.ffn_layer2.w"          // [dim, hidden]
	BUp          = "ff_layer.ffn_layer1.b"
	BDown        = "ff_layer.ffn_layer2.b"
	// Mixture of experts (Config.Experts): the router and the experts'
	// gate, up and down projections, one 3-D tensor each, expert-major.
	Router      = "ff_layer.moe.router.w" // [experts, dim]
	ExpertsGate = "ff_layer.moe.gate.w"   // [experts, expert_hidden, dim]
	ExpertsUp   = "ff_layer.moe.up.w"     // [experts, expert_hidden, dim]
	ExpertsDown = "ff_layer.moe.down.w"   // [experts, dim, expert_hidden]
	// Their biases (Config.RouterBias, Config.ExpertBias), and the
	// attention sinks (Config.AttnSinks).
	RouterBias      = "ff_layer.moe.router.b" // [experts]
	ExpertsGateBias = "ff_layer.moe.gate.b"   // [experts, expert_hidden]
	ExpertsUpBias   = "ff_layer.moe.up.b"     // [experts, expert_hidden]
	ExpertsDownBias = "ff_layer.moe.down.b"   // [experts, dim]
	AttnSinks       = "self_attention.sinks"  // [heads]
	// Gemma 4: the gate and projection of the per-layer input, its norm,
	// and the layer's output scale (Config.PerLayerDim, LayerOutputScale).
	PerLayerGate     = "per_layer.gate.w"          // [P, dim]
	PerLayerProj     = "per_layer.proj.w"          // [dim, P]
	PerLayerPostNorm = "per_layer.post_norm.scale" // [dim]
	LayerScale       = "layer_output_scale"        // [1]
	// A gated short convolution layer's (Config.ConvLayers) tensors in
	// place of the attention ones.
	ConvInProj  = "short_conv.in_proj.w"  // [3*dim, dim]: B, C, x rows
	ConvKernel  = "short_conv.conv.w"     // [dim, conv_width]
	ConvOutProj = "short_conv.out_proj.w" // [dim, dim]
	// A Mamba-2 layer's (Config.SSM) tensors in place of the attention
	// ones: I = SSM.Inner, G = SSM.Groups, N = SSM.State, H = SSM.Heads,
	// C = I + 2*G*N the convolution's channels.
	SSMIn       = "mamba2.in_proj.w"  // [2*I + 2*G*N + H, dim]: z, x, B, C, dt rows
	SSMConv     = "mamba2.conv.w"     // [C, SSM.Conv]
	SSMConvBias = "mamba2.conv.b"     // [C]
	SSMDtBias   = "mamba2.dt_bias"    // [H]
	SSMA        = "mamba2.a"          // [H]: A = -exp(A_log)
	SSMD        = "mamba2.d"          // [H]
	SSMNorm     = "mamba2.norm.scale" // [I]: G groups of I/G
	SSMOut      = "mamba2.out_proj.w" // [dim, I]
)

// Layer returns the full name of a per-layer tensor.
func Layer(i int, suffix string) string {
	return fmt.Sprintf("params.lm.transformer.x_layers_%d.%s", i, suffix)
}

// IsExperts reports whether name is a layer's stacked experts tensor
// (ExpertsGate, ExpertsUp or ExpertsDown).
func IsExperts(name string) bool {
	for _, suffix := range []string{ExpertsGate, ExpertsUp, ExpertsDown} {
		if strings.HasSuffix(name, "."+suffix) {
			return true
		}
	}
	return false
}

// ScaleName is the name of the scales tensor of a quantized tensor.
func ScaleName(name string) string { return name + "_quantized_scale" }
