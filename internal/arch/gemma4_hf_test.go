package arch_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/hf"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// gemma4HFGlobal and gemma4HFLayer name arch3/gemma4's tensors as a
// Gemma 4 Hugging Face checkpoint does (Gemma4ForCausalLM; under
// model.language_model. in Gemma4ForConditionalGeneration).
var (
	gemma4HFGlobal = map[string]string{
		model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.norm.weight",
		model.PerLayerEmbedding: "model.embed_tokens_per_layer.weight", model.PerLayerModelProj: "model.per_layer_model_projection.weight",
		model.PerLayerProjNorm: "model.per_layer_projection_norm.weight",
	}
	gemma4HFLayer = map[string]string{
		model.AttnNorm: "input_layernorm.weight", model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight",
		model.WV: "self_attn.v_proj.weight", model.WO: "self_attn.o_proj.weight", model.QNorm: "self_attn.q_norm.weight",
		model.KNorm: "self_attn.k_norm.weight", model.PostAttnNorm: "post_attention_layernorm.weight",
		model.FFNNorm: "pre_feedforward_layernorm.weight", model.PostFFNNorm: "post_feedforward_layernorm.weight",
		model.WGate: "mlp.gate_proj.weight", model.WUp: "mlp.up_proj.weight", model.WDown: "mlp.down_proj.weight",
		model.PerLayerGate: "per_layer_input_gate.weight", model.PerLayerProj: "per_layer_projection.weight",
		model.PerLayerPostNorm: "post_per_layer_input_norm.weight", model.LayerScale: "layer_scalar",
	}
)

// gemma4HFConfig is arch3/gemma4's config.json under Gemma4TextConfig's
// keys (arch3/README.md's metadata, as llama.cpp's converter would have
// read them): two head dims, the layer types, rope_parameters per layer
// type with the global layers' proportional RoPE, shared KV layers,
// per-layer inputs, the doubled FFN of the shared layers.
func gemma4HFConfig() map[string]any {
	s, f := "sliding_attention", "full_attention"
	return map[string]any{"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
		"num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "global_head_dim": 32,
		"max_position_embeddings": 128, "vocab_size": 512, "vocab_size_per_layer_input": 512, "rms_norm_eps": 1e-6,
		"hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4, "layer_types": []string{s, s, s, f, s, f},
		"num_kv_shared_layers": 2, "hidden_size_per_layer_input": 16, "use_double_wide_mlp": true,
		"final_logit_softcapping": 1.0, "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2,
		"attention_k_eq_v": false, "enable_moe_block": false,
		"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
		}}
}

// writeGemma4HF writes ref as a Gemma 4 HF directory: the text model's
// checkpoint, or with multimodal a Gemma4ForConditionalGeneration one
// (model_type gemma4, the text config under text_config, the text tensors
// under model.language_model. beside a vision tower's tensor). The layer
// scalars are saved as 0-dim tensors, as PyTorch saves a scalar parameter.
func writeGemma4HF(t *testing.T, ref *model.Checkpoint, multimodal bool) string {
	t.Helper()
	prefix := "model."
	if multimodal {
		prefix = "model.language_model."
	}
	var out []*tensors.Tensor
	for _, rt := range ref.Tensors {
		shape := rt.Shape
		name, ok := gemma4HFGlobal[rt.Name]
		if !ok {
			rest := strings.TrimPrefix(rt.Name, "params.lm.transformer.x_layers_")
			l, suffix, _ := strings.Cut(rest, ".")
			hn, known := gemma4HFLayer[suffix]
			if !known {
				t.Fatalf("no HF name for %s", rt.Name)
			}
			name = "model.layers." + l + "." + hn
			if suffix == model.LayerScale {
				shape = []int{}
			}
		}
		name = prefix + strings.TrimPrefix(name, "model.")
		out = append(out, &tensors.Tensor{Name: name, DType: rt.DType, Shape: shape, Data: rt.Data})
	}
	cfg := gemma4HFConfig()
	if multimodal {
		out = append(out, &tensors.Tensor{Name: "model.vision_tower.encoder.layers.0.mlp.fc1.weight", DType: tensors.F32, Shape: []int{2, 2}, Data: make([]byte, 16)})
		cfg = map[string]any{"model_type": "gemma4", "text_config": cfg, "vision_config": map[string]any{"hidden_size": 2},
			"tie_word_embeddings": true, "architectures": []string{"Gemma4ForConditionalGeneration"}}
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, out, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGemma4HFGolden writes arch3/gemma4 as a Hugging Face directory,
// text-only and multimodal, imports it with internal/hf and checks it: the
// config equals the GGUF import's (but for what only the tokenizer files
// state), every tensor is the GGUF import's, and the model gives
// llama.cpp's golden logits (gemma4Tol) and greedy ids on the CPU backend.
func TestGemma4HFGolden(t *testing.T) {
	g := testmodels.Arch3(t, "gemma4")
	ref, err := gguf.Load(testmodels.Path(t, "arch3", "gemma4.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, multimodal := range []bool{false, true} {
		name := "text"
		if multimodal {
			name = "multimodal"
		}
		t.Run(name, func(t *testing.T) {
			ck, err := hf.Load(writeGemma4HF(t, ref, multimodal))
			if err != nil {
				t.Fatal(err)
			}
			got, want := ck.Config, ref.Config
			want.BOS, want.EOS, want.AddBOS, want.StopTokens = got.BOS, got.EOS, got.AddBOS, got.StopTokens
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config\n got %+v\nwant %+v", got, want)
			}
			if len(ck.Tensors) != len(ref.Tensors) {
				t.Errorf("%d tensors, the GGUF import has %d", len(ck.Tensors), len(ref.Tensors))
			}
			for _, w := range ref.Tensors {
				if gt := ck.Tensor(w.Name); gt == nil || !reflect.DeepEqual(gt.Shape, w.Shape) || !bytes.Equal(gt.Data, w.Data) {
					t.Errorf("%s differs from the GGUF import", w.Name)
				}
			}
			checkCheckpoint(t, "gemma4 (hf "+name+")", ck, g.ArchGolden, gemma4Tol, true, true)
		})
	}
}
