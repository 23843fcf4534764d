package arch_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/hf"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// hfExport describes one arch2 model in Hugging Face form: its
// config.json with the real keys of its model type, and the layout
// transforms llama.cpp's converter applied that the export undoes.
type hfExport struct {
	config map[string]any
	// permute applies HF's q/k row permutation (llama.cpp's converter
	// un-permutes Llama-family q/k to its NORM pairing).
	permute bool
	// gemma stores norm weights as w for HF's 1+w (the GGUF holds 1+w).
	gemma bool
	// fused writes Phi 3's qkv_proj [Q|K|V] and gate_up_proj [gate|up].
	fused bool
}

// hfLayerNames maps our per-layer suffixes to HF's (model.layers.N.*).
var hfLayerNames = map[string]string{
	model.AttnNorm: "input_layernorm.weight", model.FFNNorm: "post_attention_layernorm.weight",
	model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight", model.WV: "self_attn.v_proj.weight",
	model.BQ: "self_attn.q_proj.bias", model.BK: "self_attn.k_proj.bias", model.BV: "self_attn.v_proj.bias",
	model.WO: "self_attn.o_proj.weight", model.QNorm: "self_attn.q_norm.weight", model.KNorm: "self_attn.k_norm.weight",
	model.WGate: "mlp.gate_proj.weight", model.WUp: "mlp.up_proj.weight", model.WDown: "mlp.down_proj.weight",
	model.Router: "mlp.gate.weight",
}

// hfExpertNames are Qwen 3 MoE's per-expert projections
// (model.layers.N.mlp.experts.K.<name>), one slab of our stacked tensors.
var hfExpertNames = map[string]string{
	model.ExpertsGate: "gate_proj.weight", model.ExpertsUp: "up_proj.weight", model.ExpertsDown: "down_proj.weight",
}

var hfGlobalNames = map[string]string{
	model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.norm.weight", model.LMHead: "lm_head.weight",
}

func base(kv map[string]any, extra ...any) map[string]any {
	out := map[string]any{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
		"max_position_embeddings": 128, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2}
	for k, v := range kv {
		out[k] = v
	}
	for i := 0; i < len(extra); i += 2 {
		out[extra[i].(string)] = extra[i+1]
	}
	return out
}

// hfExports follows arch2/README.md's table of dims and conventions.
func hfExports(g testmodels.Arch2Golden) map[string]hfExport {
	factors := func(k string) []float64 { return g.NonWeightTensors[k] }
	return map[string]hfExport{
		"llama3": {permute: true, config: base(map[string]any{"model_type": "llama", "num_hidden_layers": 2, "num_key_value_heads": 2,
			"head_dim": 16, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": false,
			"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
				"original_max_position_embeddings": 64}})},
		"qwen2": {config: base(map[string]any{"model_type": "qwen2", "num_hidden_layers": 3, "num_key_value_heads": 2,
			"rms_norm_eps": 1e-6, "rope_theta": 1e6, "hidden_act": "silu", "tie_word_embeddings": false,
			"use_sliding_window": false, "sliding_window": 131072, "rope_scaling": nil})},
		"qwen3": {config: base(map[string]any{"model_type": "qwen3", "num_hidden_layers": 2, "num_key_value_heads": 2,
			"head_dim": 32, "attention_bias": false, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "hidden_act": "silu",
			"tie_word_embeddings": true, "use_sliding_window": false, "rope_scaling": nil})},
		"gemma3": {gemma: true, config: base(map[string]any{"model_type": "gemma3_text", "num_hidden_layers": 6, "num_key_value_heads": 1,
			"head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 10000.0, "sliding_window": 8,
			"sliding_window_pattern": 6, "query_pre_attn_scalar": 16, "hidden_activation": "gelu_pytorch_tanh",
			"final_logit_softcapping": nil, "attn_logit_softcapping": nil, "rope_scaling": nil})},
		"phi3": {fused: true, config: base(map[string]any{"model_type": "phi3", "num_hidden_layers": 2, "num_key_value_heads": 2,
			"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 0.75, "original_max_position_embeddings": 32,
			"hidden_act": "silu", "tie_word_embeddings": true, "sliding_window": 262144,
			"rope_scaling": map[string]any{"type": "longrope", "long_factor": factors("rope_factors_long.weight"),
				"short_factor": factors("rope_factors_short.weight")}})},
		"qwen3moe": {config: base(map[string]any{"model_type": "qwen3_moe", "num_hidden_layers": 2, "num_key_value_heads": 2,
			"head_dim": 32, "attention_bias": false, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "hidden_act": "silu",
			"tie_word_embeddings": false, "use_sliding_window": false, "rope_scaling": nil, "num_experts": 4,
			"num_experts_per_tok": 2, "moe_intermediate_size": 64, "norm_topk_prob": true, "decoder_sparse_step": 1,
			"mlp_only_layers": []int{}})},
		"smollm3": {permute: true, config: base(map[string]any{"model_type": "smollm3", "num_hidden_layers": 4, "num_key_value_heads": 1,
			"rms_norm_eps": 1e-6, "rope_theta": 5e6, "hidden_act": "silu", "tie_word_embeddings": true,
			"no_rope_layers": []int{1, 1, 1, 0}, "use_sliding_window": false, "rope_scaling": nil})},
	}
}

// TestHFGoldens writes each arch2 model as a Hugging Face directory
// (config.json with its model type's keys, model.safetensors with HF's
// names and layouts), loads it with internal/hf and checks it against
// llama.cpp's golden as TestGGUFGoldens does.
func TestHFGoldens(t *testing.T) {
	for _, name := range Arch2Models {
		t.Run(name, func(t *testing.T) {
			g := testmodels.Arch2(t, name)
			ref, err := gguf.Load(testmodels.Path(t, "arch2", name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			dir := writeHFExport(t, hfExports(g)[name], ref)
			ck, err := hf.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			// The HF import's config equals the GGUF import's but for what
			// only the tokenizer files or config.json state.
			got, want := ck.Config, ref.Config
			got.AttnScale, want.AttnScale = got.Scale(), want.Scale()
			// llama3's factors: ours from rope_scaling in float64, the
			// converter's in float32.
			got.RopeFactors = slices.Clone(got.RopeFactors) // ck runs with its own below
			for i, f := range got.RopeFactors {
				if i < len(want.RopeFactors) && math.Abs(float64(f-want.RopeFactors[i])) <= 1e-6*float64(f) {
					got.RopeFactors[i] = want.RopeFactors[i]
				}
			}
			want.BOS, want.EOS, want.AddBOS, want.StopTokens = got.BOS, got.EOS, got.AddBOS, got.StopTokens
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config\n got %+v\nwant %+v", got, want)
			}
			for _, fused := range []bool{false, true} {
				label := name + " (hf)"
				if fused {
					label = name + " (hf, fused)"
				}
				checkCheckpoint(t, label, ck, g.ArchGolden, 1e-4, true, fused)
			}
		})
	}
}

// writeHFExport writes ref's weights in HF form into a temporary directory.
func writeHFExport(t *testing.T, ex hfExport, ref *model.Checkpoint) string {
	t.Helper()
	c := ref.Config
	var out []*tensors.Tensor
	layerOf := func(name string) (string, string) {
		rest := strings.TrimPrefix(name, "params.lm.transformer.x_layers_")
		l, suffix, _ := strings.Cut(rest, ".")
		return l, suffix
	}
	for _, rt := range ref.Tensors {
		data, shape := rt.Data, rt.Shape
		name, ok := hfGlobalNames[rt.Name]
		if !ok {
			l, suffix := layerOf(rt.Name)
			hn, known := hfLayerNames[suffix]
			if ex.gemma {
				hn, known = map[string]string{model.FFNNorm: "pre_feedforward_layernorm.weight",
					model.PostAttnNorm: "post_attention_layernorm.weight", model.PostFFNNorm: "post_feedforward_layernorm.weight"}[suffix], true
				if hn == "" {
					hn, known = hfLayerNames[suffix]
				}
			}
			if ex, ok := hfExpertNames[suffix]; ok {
				n := shape[0]
				sz := len(data) / n
				for e := range n {
					out = append(out, &tensors.Tensor{Name: "model.layers." + l + ".mlp.experts." + strconv.Itoa(e) + "." + ex,
						DType: rt.DType, Shape: shape[1:], Data: data[e*sz : (e+1)*sz]})
				}
				continue
			}
			layer := func(s string) []byte { return ref.Tensor(model.Layer(atoi(t, l), s)).Data }
			switch {
			case ex.fused && (suffix == model.WK || suffix == model.WV || suffix == model.WUp):
				continue
			case ex.fused && suffix == model.WQ:
				hn = "self_attn.qkv_proj.weight"
				data = append(append(append([]byte(nil), layer(model.WQ)...), layer(model.WK)...), layer(model.WV)...)
				shape = []int{(c.Heads + 2*c.KVHeads) * c.HeadDim, c.Dim}
			case ex.fused && suffix == model.WGate:
				hn = "mlp.gate_up_proj.weight"
				data = append(append([]byte(nil), layer(model.WGate)...), layer(model.WUp)...)
				shape = []int{2 * c.HiddenDim, c.Dim}
			case !known:
				t.Fatalf("no HF name for %s", rt.Name)
			}
			if ex.permute && suffix == model.WQ {
				data = toHFPermuted(data, c.Heads, shape[0])
			}
			if ex.permute && suffix == model.WK {
				data = toHFPermuted(data, c.KVHeads, shape[0])
			}
			name = "model.layers." + l + "." + hn
		}
		if ex.gemma && strings.HasSuffix(rt.Name, ".scale") {
			data = gemmaMinusOne(t, data)
		}
		out = append(out, &tensors.Tensor{Name: name, DType: rt.DType, Shape: shape, Data: data})
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(f, out, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(ex.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("layer number %q", s)
		}
		n = 10*n + int(r-'0')
	}
	return n
}

// toHFPermuted applies HF's Llama q/k permutation to rows in Meta's
// interleaved order: per head, row 2i+j moves to j*headDim/2 + i, so that
// rotate-half RoPE pairs what the interleaved one paired.
func toHFPermuted(data []byte, heads, rows int) []byte {
	rb, hd := len(data)/rows, rows/heads
	out := make([]byte, len(data))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				src, dst := h*hd+2*i+j, h*hd+j*hd/2+i
				copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}

// gemmaMinusOne turns the GGUF's 1+w into HF's w; for values in [0.5, 2]
// x-1 is exact in f32 (Sterbenz), so the import's 1+(x-1) gives x back.
func gemmaMinusOne(t *testing.T, data []byte) []byte {
	t.Helper()
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
		if x < 0.5 || x > 2 {
			t.Fatalf("norm weight %v outside [0.5, 2]: the round trip would not be exact", x)
		}
		binary.LittleEndian.PutUint32(out[i:], math.Float32bits(x-1))
	}
	return out
}
