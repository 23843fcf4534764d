package hf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// hfPermute applies HF's convert_llama_weights_to_hf permute to Meta-layout
// rows: w.view(heads, rows/heads/2, 2, cols).transpose(1, 2).reshape(rows, cols),
// i.e. output row (h, j, i) is input row (h, i, j).
func hfPermute(data []byte, heads, rows int) []byte {
	rb := len(data) / rows
	hd := rows / heads
	out := make([]byte, len(data))
	for h := range heads {
		for j := range 2 {
			for i := range hd / 2 {
				dst := h*hd + j*hd/2 + i
				src := h*hd + 2*i + j
				copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}

// minusOne turns a stored Gemma multiplier 1+w back into HF's w. For values
// in [0.5, 2] x-1 is exact in f32 (Sterbenz), so adding 1 restores x exactly.
func minusOne(t *testing.T, data []byte) []byte {
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

// hfCase describes one architecture exported in HF form by the test.
type hfCase struct {
	gguf   string
	config map[string]any
	// names maps our global names and per-layer suffixes to HF names.
	global map[string]string
	layer  map[string]string
	prefix string
	// fuseQKV writes Falcon's query_key_value ([Q|K|V] for multi-query).
	fuseQKV bool
	// gemmaNorms stores w = multiplier-1 for norm weights.
	gemmaNorms bool
	// permute applies HF's q/k permutation (Llama).
	permute bool
}

var stdLayer = map[string]string{
	model.AttnNorm: "input_layernorm.weight", model.AttnNormBias: "input_layernorm.bias",
	model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight", model.WV: "self_attn.v_proj.weight",
	model.WO: "self_attn.o_proj.weight", model.FFNNorm: "post_attention_layernorm.weight",
	model.FFNNormBias: "post_attention_layernorm.bias", model.WGate: "mlp.gate_proj.weight",
	model.WUp: "mlp.up_proj.weight", model.WDown: "mlp.down_proj.weight",
}

var stdGlobal = map[string]string{
	model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.norm.weight",
	model.FinalNormBias: "model.norm.bias", model.LMHead: "lm_head.weight",
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

var hfCases = map[string]hfCase{
	"llama": {gguf: "llama", permute: true, global: stdGlobal, layer: stdLayer, prefix: "model.layers.",
		config: map[string]any{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
			"rope_theta": 500000.0, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
			"tie_word_embeddings": false, "rope_scaling": nil}},
	"gemma": {gguf: "gemma", gemmaNorms: true, global: stdGlobal, layer: stdLayer, prefix: "model.layers.",
		config: map[string]any{"model_type": "gemma", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
			"vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "hidden_activation": "gelu_pytorch_tanh"}},
	"gemma2": {gguf: "gemma2", gemmaNorms: true, global: stdGlobal, prefix: "model.layers.",
		layer: with(stdLayer, model.PostAttnNorm, "post_attention_layernorm.weight", model.FFNNorm, "pre_feedforward_layernorm.weight",
			model.PostFFNNorm, "post_feedforward_layernorm.weight"),
		config: map[string]any{"model_type": "gemma2", "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 26,
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
			"vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "query_pre_attn_scalar": 8, "attn_logit_softcapping": 0.02,
			"final_logit_softcapping": 0.5, "sliding_window": 8}},
	"phi2": {gguf: "phi2", prefix: "model.layers.",
		global: map[string]string{model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.final_layernorm.weight",
			model.FinalNormBias: "model.final_layernorm.bias", model.LMHead: "lm_head.weight", model.LMHeadBiasName: "lm_head.bias"},
		layer: map[string]string{model.AttnNorm: "input_layernorm.weight", model.AttnNormBias: "input_layernorm.bias",
			model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight", model.WV: "self_attn.v_proj.weight",
			model.BQ: "self_attn.q_proj.bias", model.BK: "self_attn.k_proj.bias", model.BV: "self_attn.v_proj.bias",
			model.WO: "self_attn.dense.weight", model.BO: "self_attn.dense.bias", model.WUp: "mlp.fc1.weight",
			model.BUp: "mlp.fc1.bias", model.WDown: "mlp.fc2.weight", model.BDown: "mlp.fc2.bias"},
		config: map[string]any{"model_type": "phi", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128, "layer_norm_eps": 1e-5,
			"partial_rotary_factor": 0.375, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "gelu_new"}},
	"falcon": {gguf: "falcon", fuseQKV: true, prefix: "transformer.h.",
		global: map[string]string{model.TokenEmbedding: "transformer.word_embeddings.weight", model.FinalNorm: "transformer.ln_f.weight",
			model.FinalNormBias: "transformer.ln_f.bias"},
		layer: map[string]string{model.AttnNorm: "input_layernorm.weight", model.AttnNormBias: "input_layernorm.bias",
			model.WO: "self_attention.dense.weight", model.WUp: "mlp.dense_h_to_4h.weight", model.WDown: "mlp.dense_4h_to_h.weight"},
		config: map[string]any{"model_type": "falcon", "hidden_size": 64, "ffn_hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
			"multi_query": true, "parallel_attn": true, "layer_norm_epsilon": 1e-5, "vocab_size": 512, "max_position_embeddings": 128,
			"bos_token_id": 1, "eos_token_id": 2, "alibi": false, "bias": false, "new_decoder_architecture": false}},
	"stablelm": {gguf: "stablelm", global: stdGlobal, layer: stdLayer, prefix: "model.layers.",
		config: map[string]any{"model_type": "stablelm", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128, "layer_norm_eps": 1e-5,
			"partial_rotary_factor": 0.25, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
			"use_parallel_residual": false}},
}

// writeHF exports ref (a GGUF import) as an HF directory the way HF's
// converters lay it out, split over two safetensors files.
func writeHF(t *testing.T, tc hfCase, ref *model.Checkpoint) string {
	dir := t.TempDir()
	c := ref.Config
	var files [2][]*tensors.Tensor
	for i, rt := range ref.Tensors {
		name, data := "", rt.Data
		isNorm := strings.HasSuffix(rt.Name, ".scale")
		if hn, ok := tc.global[rt.Name]; ok {
			name = hn
		} else {
			rest := strings.TrimPrefix(rt.Name, "params.lm.transformer.x_layers_")
			layer, suffix, _ := strings.Cut(rest, ".")
			if tc.fuseQKV && (suffix == model.WK || suffix == model.WV) {
				continue
			}
			if tc.fuseQKV && suffix == model.WQ {
				l := func(s string) []byte { return ref.Tensor("params.lm.transformer.x_layers_" + layer + "." + s).Data }
				name = "self_attention.query_key_value.weight"
				data = append(append(append([]byte(nil), l(model.WQ)...), l(model.WK)...), l(model.WV)...)
			} else if hn, ok := tc.layer[suffix]; ok {
				name = hn
			} else {
				t.Fatalf("test has no HF name for %s", rt.Name)
			}
			name = tc.prefix + layer + "." + name
			if tc.permute && suffix == model.WQ {
				data = hfPermute(data, c.Heads, rt.Shape[0])
			}
			if tc.permute && suffix == model.WK {
				data = hfPermute(data, c.KVHeads, rt.Shape[0])
			}
		}
		if tc.gemmaNorms && isNorm {
			data = minusOne(t, data)
		}
		shape := rt.Shape
		if name == tc.prefix+strings.Split(strings.TrimPrefix(rt.Name, "params.lm.transformer.x_layers_"), ".")[0]+".self_attention.query_key_value.weight" {
			shape = []int{(c.Heads + 2*c.KVHeads) * c.HeadDim, c.Dim}
		}
		files[i%2] = append(files[i%2], &tensors.Tensor{Name: name, DType: rt.DType, Shape: shape, Data: data})
	}
	for i, ts := range files {
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i])
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := json.Marshal(tc.config)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadMatchesGGUF exports each reference GGUF model as an HF checkpoint
// (HF names, HF q/k permutation for Llama, w instead of 1+w for Gemma, fused
// QKV for Falcon) and checks the import equals the GGUF import.
func TestLoadMatchesGGUF(t *testing.T) {
	for name, tc := range hfCases {
		t.Run(name, func(t *testing.T) {
			ref, err := gguf.Load(filepath.Join(testmodels.Dir(t), "arch", tc.gguf+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			dir := writeHF(t, tc, ref)
			tok, err := os.ReadFile(filepath.Join(testmodels.Dir(t), "tok512.model"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tokenizer.model"), tok, 0o644); err != nil {
				t.Fatal(err)
			}
			ck, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ck.Tokenizer, tok) {
				t.Error("tokenizer.model not carried over")
			}
			if len(ck.Tensors) != len(ref.Tensors) {
				t.Errorf("%d tensors, GGUF import has %d", len(ck.Tensors), len(ref.Tensors))
			}
			for _, want := range ref.Tensors {
				got := ck.Tensor(want.Name)
				if got == nil {
					t.Errorf("missing %s", want.Name)
					continue
				}
				if got.DType != want.DType || !reflect.DeepEqual(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s: %s%v differs from the GGUF import %s%v", want.Name, got.DType, got.Shape, want.DType, want.Shape)
				}
			}
			gc, wc := ck.Config, ref.Config
			gc.AttnScale, wc.AttnScale = gc.Scale(), wc.Scale()
			// llama.cpp evaluates Falcon's GELU with the tanh form; HF Falcon
			// uses the exact erf form.
			if name == "falcon" {
				wc.Act = model.ActGELU
			}
			// GPT-NeoX-style tokenizers do not prepend BOS.
			if name == "phi2" || name == "falcon" || name == "stablelm" {
				wc.AddBOS = false
			}
			if !reflect.DeepEqual(gc, wc) {
				t.Errorf("config\n got %+v\nwant %+v", gc, wc)
			}
		})
	}
}
