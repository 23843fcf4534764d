package hf

import (
	"strconv"
	"strings"

	"github.com/gpurun/gpurun/tensors/model"
)

// transform is what the import does to a tensor beyond renaming it.
type transform int

const (
	asIs         transform = iota
	unpermute              // HF Llama q/k rows back to Meta's interleaved order
	plusOne                // Gemma RMSNorm weights: the file holds w, the runtime multiplies by 1+w
	splitQKV               // Falcon fused query_key_value, grouped per KV head
	splitRowsQKV           // Phi 3 qkv_proj: all Q rows, then K, then V
	splitGateUp            // Phi 3 gate_up_proj: gate rows, then up
	// The hybrids' (hybrid.go).
	squeezeConv // depthwise Conv1d [channels, 1, taps] -> [channels, taps]
	negExp      // A_log -> A = -exp(A_log)
	queryGate   // Qwen3.5 q_proj: per head, query rows then gate rows
	deltaQKV    // Qwen3.5 in_proj_qkv: value heads grouped -> tiled
	deltaConv   // Qwen3.5 conv1d: squeezed, value channels grouped -> tiled
	deltaHeads  // Qwen3.5 rows of one run per value head: grouped -> tiled
	deltaA      // Qwen3.5 A_log: negExp, then grouped -> tiled
	deltaOut    // Qwen3.5 out_proj: columns of value heads grouped -> tiled
	// Fused experts as transformers 5 saves them (Qwen3.5 MoE).
	experts3D     // [experts, rows, cols] as is
	expertsGateUp // [experts, 2*hidden, dim]: each expert's gate rows, then up
)

// target is the import of one HF tensor.
type target struct {
	name  string // our suffix (per layer) or full name (global)
	xform transform
	heads bool // for unpermute: true for q (heads), false for k (kv heads)
}

// globals maps whole HF names per architecture.
func globals(arch string) map[string]target {
	if m := hybridGlobals(arch); m != nil {
		return m
	}
	switch arch {
	case model.ArchFalcon:
		return map[string]target{
			"transformer.word_embeddings.weight": {name: model.TokenEmbedding},
			"transformer.ln_f.weight":            {name: model.FinalNorm},
			"transformer.ln_f.bias":              {name: model.FinalNormBias},
			"lm_head.weight":                     {name: model.LMHead},
		}
	case model.ArchPhi2:
		return map[string]target{
			"model.embed_tokens.weight":    {name: model.TokenEmbedding},
			"model.final_layernorm.weight": {name: model.FinalNorm},
			"model.final_layernorm.bias":   {name: model.FinalNormBias},
			"lm_head.weight":               {name: model.LMHead},
			"lm_head.bias":                 {name: model.LMHeadBiasName},
		}
	}
	norm := asIs
	if isGemma(arch) {
		norm = plusOne
	}
	m := map[string]target{
		"model.embed_tokens.weight": {name: model.TokenEmbedding},
		"model.norm.weight":         {name: model.FinalNorm, xform: norm},
		"model.norm.bias":           {name: model.FinalNormBias},
		"lm_head.weight":            {name: model.LMHead},
	}
	if arch == model.ArchGemma4 {
		for k, v := range gemma4Globals {
			m[k] = v
		}
	}
	return m
}

// layerTargets maps per-layer HF suffixes (after "model.layers.N.") per
// architecture.
func layerTargets(arch string) map[string]target {
	if m := hybridLayers(arch); m != nil {
		return m
	}
	switch arch {
	case model.ArchFalcon:
		return map[string]target{
			"input_layernorm.weight":                {name: model.AttnNorm},
			"input_layernorm.bias":                  {name: model.AttnNormBias},
			"post_attention_layernorm.weight":       {name: model.FFNNorm},
			"post_attention_layernorm.bias":         {name: model.FFNNormBias},
			"self_attention.query_key_value.weight": {name: model.WQ, xform: splitQKV},
			"self_attention.query_key_value.bias":   {name: model.BQ, xform: splitQKV},
			"self_attention.dense.weight":           {name: model.WO},
			"self_attention.dense.bias":             {name: model.BO},
			"mlp.dense_h_to_4h.weight":              {name: model.WUp},
			"mlp.dense_h_to_4h.bias":                {name: model.BUp},
			"mlp.dense_4h_to_h.weight":              {name: model.WDown},
			"mlp.dense_4h_to_h.bias":                {name: model.BDown},
		}
	case model.ArchPhi2:
		return map[string]target{
			"input_layernorm.weight":  {name: model.AttnNorm},
			"input_layernorm.bias":    {name: model.AttnNormBias},
			"self_attn.q_proj.weight": {name: model.WQ},
			"self_attn.k_proj.weight": {name: model.WK},
			"self_attn.v_proj.weight": {name: model.WV},
			"self_attn.q_proj.bias":   {name: model.BQ},
			"self_attn.k_proj.bias":   {name: model.BK},
			"self_attn.v_proj.bias":   {name: model.BV},
			"self_attn.dense.weight":  {name: model.WO},
			"self_attn.dense.bias":    {name: model.BO},
			"mlp.fc1.weight":          {name: model.WUp},
			"mlp.fc1.bias":            {name: model.BUp},
			"mlp.fc2.weight":          {name: model.WDown},
			"mlp.fc2.bias":            {name: model.BDown},
		}
	}
	qk := asIs
	if arch == model.ArchLlama || arch == model.ArchSmolLM3 {
		qk = unpermute
	}
	norm := asIs
	if isGemma(arch) {
		norm = plusOne
	}
	m := map[string]target{
		"input_layernorm.weight":  {name: model.AttnNorm, xform: norm},
		"input_layernorm.bias":    {name: model.AttnNormBias},
		"self_attn.q_proj.weight": {name: model.WQ, xform: qk, heads: true},
		"self_attn.k_proj.weight": {name: model.WK, xform: qk},
		"self_attn.v_proj.weight": {name: model.WV},
		"self_attn.o_proj.weight": {name: model.WO},
		"self_attn.q_proj.bias":   {name: model.BQ, xform: qk, heads: true},
		"self_attn.k_proj.bias":   {name: model.BK, xform: qk},
		"self_attn.v_proj.bias":   {name: model.BV},
		"self_attn.o_proj.bias":   {name: model.BO},
		"mlp.gate_proj.weight":    {name: model.WGate},
		"mlp.up_proj.weight":      {name: model.WUp},
		"mlp.down_proj.weight":    {name: model.WDown},
		"mlp.up_proj.bias":        {name: model.BUp},
		"mlp.down_proj.bias":      {name: model.BDown},
	}
	switch arch {
	case model.ArchQwen3, model.ArchQwen3MoE, model.ArchGemma3:
		m["self_attn.q_norm.weight"] = target{name: model.QNorm, xform: norm}
		m["self_attn.k_norm.weight"] = target{name: model.KNorm, xform: norm}
		if arch == model.ArchQwen3MoE {
			m["mlp.gate.weight"] = target{name: model.Router}
		}
	case model.ArchPhi3:
		m["self_attn.qkv_proj.weight"] = target{name: model.WQ, xform: splitRowsQKV}
		m["mlp.gate_up_proj.weight"] = target{name: model.WGate, xform: splitGateUp}
	}
	if arch == model.ArchGemma4 {
		for k, v := range gemma4Layer {
			m[k] = v
		}
		return m
	}
	if arch == model.ArchGemma2 || arch == model.ArchGemma3 {
		// Gemma 2's "post_attention_layernorm" really is a post-norm; its FFN
		// pre-norm is "pre_feedforward_layernorm".
		m["post_attention_layernorm.weight"] = target{name: model.PostAttnNorm, xform: plusOne}
		m["pre_feedforward_layernorm.weight"] = target{name: model.FFNNorm, xform: plusOne}
		m["post_feedforward_layernorm.weight"] = target{name: model.PostFFNNorm, xform: plusOne}
	} else {
		m["post_attention_layernorm.weight"] = target{name: model.FFNNorm, xform: norm}
		m["post_attention_layernorm.bias"] = target{name: model.FFNNormBias}
	}
	return m
}

// expertTarget parses Qwen 3 MoE's per-expert suffix
// "mlp.experts.K.{gate,up,down}_proj.weight" into the expert and our
// stacked tensor's suffix.
func expertTarget(suffix string) (expert int, name string, ok bool) {
	rest, found := strings.CutPrefix(suffix, "mlp.experts.")
	if !found {
		return 0, "", false
	}
	num, proj, found := strings.Cut(rest, ".")
	e, err := strconv.Atoi(num)
	if !found || err != nil || e < 0 || strconv.Itoa(e) != num {
		return 0, "", false
	}
	name, ok = map[string]string{"gate_proj.weight": model.ExpertsGate, "up_proj.weight": model.ExpertsUp,
		"down_proj.weight": model.ExpertsDown}[proj]
	return e, name, ok
}

// layerPrefix is where per-layer tensors live.
func layerPrefix(arch string) string {
	if arch == model.ArchFalcon {
		return "transformer.h."
	}
	return "model.layers."
}

// parseLayer splits "<prefix>N.suffix"; ok is false for other names.
func parseLayer(name, prefix string, layers int) (layer int, suffix string, ok bool) {
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return 0, "", false
	}
	num, suffix, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 || l >= layers || strconv.Itoa(l) != num {
		return 0, "", false
	}
	return l, suffix, true
}

// isGemma reports the architectures whose HF norms store w for a 1+w
// multiplier.
func isGemma(arch string) bool {
	return arch == model.ArchGemma || arch == model.ArchGemma2 || arch == model.ArchGemma3
}
