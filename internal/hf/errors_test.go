package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func TestLoadErrors(t *testing.T) {
	const llamaCfg = `{"model_type":"llama","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"max_position_embeddings":16}`
	emb := &tensors.Tensor{Name: "model.embed_tokens.weight", DType: tensors.F32, Shape: []int{4, 8}, Data: make([]byte, 4*4*8)}
	// g4 is a Gemma 4 text config to be completed.
	const g4 = `{"model_type":"gemma4_text","hidden_size":8,"num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":1,"head_dim":4,"sliding_window":4,"layer_types":["full_attention"]`
	for _, tc := range []struct {
		name    string
		config  string
		tensors []*tensors.Tensor
		want    error
	}{
		{"bad json", `{"model_type":`, []*tensors.Tensor{emb}, ErrFormat},
		{"unknown model type", `{"model_type":"mamba","hidden_size":8,"num_attention_heads":2}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"llama3 rope scaling without its parameters", `{"model_type":"llama","hidden_size":8,"num_attention_heads":2,"rope_scaling":{"rope_type":"llama3"}}`, []*tensors.Tensor{emb}, ErrFormat},
		{"yarn rope scaling", `{"model_type":"qwen3","hidden_size":8,"num_attention_heads":2,"rope_scaling":{"rope_type":"yarn","factor":4.0}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"dynamic rope scaling", `{"model_type":"llama","hidden_size":8,"num_attention_heads":2,"rope_scaling":{"type":"dynamic","factor":2.0}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"longrope on llama", `{"model_type":"llama","hidden_size":8,"num_attention_heads":2,"rope_scaling":{"type":"longrope","short_factor":[1,1],"long_factor":[1,1]}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"rope scaling on gemma2", `{"model_type":"gemma2","hidden_size":8,"num_attention_heads":2,"rope_scaling":{"rope_type":"linear","factor":2.0}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"qwen2 sliding window", `{"model_type":"qwen2","hidden_size":8,"num_attention_heads":2,"use_sliding_window":true}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma3 unknown layer type", `{"model_type":"gemma3_text","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"sliding_window":4,"layer_types":["chunked_attention"]}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma3 yarn", `{"model_type":"gemma3_text","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"sliding_window":4,"rope_scaling":{"rope_type":"yarn","factor":8.0}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"multimodal gemma3", `{"model_type":"gemma3","text_config":{"hidden_size":8}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"heads do not divide", `{"model_type":"llama","hidden_size":8,"num_attention_heads":3}`, []*tensors.Tensor{emb}, ErrFormat},
		{"no safetensors", llamaCfg, nil, ErrFormat},
		{"unknown tensor", llamaCfg, []*tensors.Tensor{emb, {Name: "model.layers.0.mystery.weight", DType: tensors.F32, Shape: []int{1}, Data: make([]byte, 4)}}, ErrUnsupported},
		{"layer out of range", llamaCfg, []*tensors.Tensor{emb, {Name: "model.layers.7.input_layernorm.weight", DType: tensors.F32, Shape: []int{8}, Data: make([]byte, 32)}}, ErrUnsupported},
		{"incomplete", llamaCfg, []*tensors.Tensor{emb}, ErrFormat},
		{"falcon alibi", `{"model_type":"falcon","hidden_size":8,"num_attention_heads":2,"alibi":true}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"qwen3_moe decoder_sparse_step 2", `{"model_type":"qwen3_moe","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":2,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"decoder_sparse_step":2}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"qwen3_moe mlp_only_layers", `{"model_type":"qwen3_moe","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":2,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"mlp_only_layers":[1]}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"qwen3_moe shared expert", `{"model_type":"qwen3_moe","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":2,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"shared_expert_intermediate_size":16}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"qwen3_moe more used than experts", `{"model_type":"qwen3_moe","hidden_size":8,"num_attention_heads":2,"num_experts":2,"num_experts_per_tok":3,"moe_intermediate_size":4}`, []*tensors.Tensor{emb}, ErrFormat},
		{"gemma4 without global_head_dim", g4 + `}`, []*tensors.Tensor{emb}, ErrFormat},
		{"gemma4 keys equal to values", g4 + `,"global_head_dim":8,"attention_k_eq_v":true}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma4 mixture of experts", g4 + `,"global_head_dim":8,"enable_moe_block":true}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma4 global kv heads", g4 + `,"global_head_dim":8,"num_global_key_value_heads":2}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma4 yarn on global layers", g4 + `,"global_head_dim":8,"rope_parameters":{"full_attention":{"rope_type":"yarn","factor":8.0}}}`, []*tensors.Tensor{emb}, ErrUnsupported},
		{"gemma4 layer types", `{"model_type":"gemma4_text","hidden_size":8,"num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":2,"head_dim":4,"global_head_dim":8,"sliding_window":4,"layer_types":["sliding_attention"]}`, []*tensors.Tensor{emb}, ErrFormat},
		{"gemma4 without text_config", `{"model_type":"gemma4","vision_config":{}}`, []*tensors.Tensor{emb}, ErrFormat},
		{"qwen3_moe without num_experts", `{"model_type":"qwen3_moe","hidden_size":8,"num_attention_heads":2,"num_experts_per_tok":3,"moe_intermediate_size":4}`, []*tensors.Tensor{emb}, ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.tensors != nil {
				var buf bytes.Buffer
				if err := safetensors.Write(&buf, tc.tensors, nil); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644)
			}
			_, err := Load(dir)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			// A refused rope_scaling is named with its value.
			if tc.want == ErrUnsupported && strings.Contains(tc.config, `"rope_scaling"`) {
				for _, w := range []string{"rope_scaling", "type\":"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
			}
		})
	}
}

// TestSplitFusedQKVGroups checks the grouped Falcon layout on a multi-head
// example: 4 query heads in 2 KV groups, rows numbered by their origin.
func TestSplitFusedQKVGroups(t *testing.T) {
	// Group g holds rows: q(2g), q(2g+1), k(g), v(g); head_dim 1, one column.
	layout := []byte{'q' + 0, 'q' + 1, 'K', 'V', 'q' + 2, 'q' + 3, 'L', 'W'}
	fused := &tensors.Tensor{Name: "qkv", DType: tensors.I32, Shape: []int{8, 1}}
	for _, b := range layout {
		fused.Data = append(fused.Data, b, 0, 0, 0)
	}
	q, k, v, err := splitFusedQKV(fused, 4, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(t *tensors.Tensor) string {
		var s []byte
		for i := 0; i < len(t.Data); i += 4 {
			s = append(s, t.Data[i])
		}
		return string(s)
	}
	if got := rows(q) + "|" + rows(k) + "|" + rows(v); got != "qrst|KL|VW" {
		t.Errorf("split = %s, want qrst|KL|VW", got)
	}
}

// TestLlama3Factors: rope_scaling llama3 gives the divisors llama.cpp's
// converter wrote into arch2/llama3.gguf's rope_freqs.
func TestLlama3Factors(t *testing.T) {
	g := testmodels.Arch2(t, "llama3")
	want := g.NonWeightTensors["rope_freqs.weight"]
	h := hfConfig{ModelType: "llama", HiddenSize: 64, NumAttentionHeads: 4, NumHiddenLayers: 2, MaxPositionEmbeddings: 128,
		RopeScaling: json.RawMessage(`{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":64}`)}
	theta := 500000.0
	h.RopeTheta = &theta
	c, err := h.config()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RopeFactors) != len(want) || len(want) == 0 {
		t.Fatalf("%d factors, want %d", len(c.RopeFactors), len(want))
	}
	for i, w := range want {
		if math.Abs(float64(c.RopeFactors[i])-w) > 1e-6*w {
			t.Errorf("factor %d = %g, llama.cpp's converter wrote %g", i, c.RopeFactors[i], w)
		}
	}
}

// TestModernConfigs: config.json keys of today's model types map onto the
// config as transformers reads them.
func TestModernConfigs(t *testing.T) {
	const dims = `"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":8,"intermediate_size":128,"max_position_embeddings":128`
	for _, tc := range []struct {
		name, config string
		check        func(c *model.Config) bool
	}{
		{"mistral window on every layer", `{"model_type":"mistral",` + dims + `,"sliding_window":16}`,
			func(c *model.Config) bool { return c.LayerWindow(0) == 16 && c.LayerWindow(7) == 16 }},
		{"smollm3 default interval", `{"model_type":"smollm3",` + dims + `}`,
			func(c *model.Config) bool { return slices.Equal(c.NoRopeLayers, []int{3, 7}) }},
		{"smollm3 interval", `{"model_type":"smollm3",` + dims + `,"no_rope_layer_interval":2}`,
			func(c *model.Config) bool { return slices.Equal(c.NoRopeLayers, []int{1, 3, 5, 7}) }},
		{"gemma3 layer_types", `{"model_type":"gemma3_text",` + dims + `,"sliding_window":4,"layer_types":["sliding_attention","full_attention","sliding_attention","sliding_attention","full_attention","full_attention","full_attention","sliding_attention"]}`,
			func(c *model.Config) bool {
				return c.LayerWindow(0) == 4 && c.LayerWindow(1) == 0 && c.LayerWindow(7) == 4 && c.RopeBaseLocal == 10000
			}},
		{"gemma3 linear scaling on global layers only", `{"model_type":"gemma3_text",` + dims + `,"sliding_window":4,"rope_scaling":{"rope_type":"linear","factor":8.0}}`,
			func(c *model.Config) bool {
				_, local, _, _ := c.LayerRope(0, 128)
				_, global, _, _ := c.LayerRope(5, 128)
				return local == nil && len(global) == c.RopeDims/2 && global[0] == 8
			}},
		{"phi3 attention factor from the contexts", `{"model_type":"phi3",` + dims + `,"partial_rotary_factor":0.75,"original_max_position_embeddings":32,"rope_scaling":{"type":"longrope","long_factor":[1,2,3,4,5,6],"short_factor":[1,1,1,1,1,1]}}`,
			func(c *model.Config) bool {
				return c.RopeDims == 12 && c.RopeOrigCtx == 32 && math.Abs(float64(c.RopeAttnFactor)-math.Sqrt(1+math.Log(4)/math.Log(32))) < 1e-6
			}},
		{"phi3 attention factor given", `{"model_type":"phi3",` + dims + `,"rope_scaling":{"type":"longrope","original_max_position_embeddings":32,"attention_factor":1.5,"long_factor":[1,2,3,4,5,6,7,8],"short_factor":[1,1,1,1,1,1,1,1]}}`,
			func(c *model.Config) bool { return c.RopeAttnFactor == 1.5 && c.RopeFactors[7] == 8 }},
		{"qwen3 q/k norms", `{"model_type":"qwen3",` + dims + `,"head_dim":32}`,
			func(c *model.Config) bool { return c.QKNorm && c.HeadDim == 32 && c.RopeStyle == model.RopeHalves }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hfConfig
			if err := json.Unmarshal([]byte(tc.config), &h); err != nil {
				t.Fatal(err)
			}
			c, err := h.config()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(&c) {
				t.Errorf("config %+v", c)
			}
		})
	}
}
