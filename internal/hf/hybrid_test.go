package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestHybridConfigs: the hybrids' config.json keys as transformers reads
// them, in the forms the arch3 round trip (internal/arch
// TestHybridHFGolden) does not write.
func TestHybridConfigs(t *testing.T) {
	const q35 = `"model_type":"qwen3_5_text","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":8,"intermediate_size":128,"linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":16`
	const lfm = `"model_type":"lfm2","hidden_size":2048,"num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":16`
	const gr = `"model_type":"granitemoehybrid","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":1,"num_hidden_layers":2,"shared_intermediate_size":96,"layer_types":["mamba","attention"],"mamba_n_heads":8,"mamba_d_head":16,"mamba_d_state":16,"mamba_n_groups":1,"mamba_d_conv":4,"mamba_expand":2,"num_local_experts":0`
	for _, tc := range []struct {
		name, config string
		check        func(c *model.Config) bool
	}{
		{"qwen3_5 full_attention_interval", `{` + q35 + `,"full_attention_interval":4,"rope_theta":1e7,"partial_rotary_factor":0.25}`,
			func(c *model.Config) bool {
				return slices.Equal(c.DeltaLayers, []int{0, 1, 2, 4, 5, 6}) && c.RopeDims == 8 && c.RopeBase == 1e7 && c.AttnOutputGate
			}},
		{"qwen3_5 rope_scaling with mrope sections", `{` + q35 + `,"rope_theta":1e6,"rope_scaling":{"type":"mrope","mrope_section":[11,11,10],"mrope_interleaved":true}}`,
			func(c *model.Config) bool { return c.RopeDims == 8 && c.RopeBase == 1e6 && c.DeltaConvWidth == 4 }},
		// LiquidAI/LFM2-1.2B's config.json: block_ff_dim 12288 is 8192 after
		// Lfm2MLP's adjustment (the published FFN width).
		{"lfm2 full_attn_idxs and the FFN adjustment", `{` + lfm + `,"intermediate_size":12288,"block_auto_adjust_ff_dim":true,"block_ffn_dim_multiplier":1.0,"block_multiple_of":256,"full_attn_idxs":[2,5,8,10,12,14]}`,
			func(c *model.Config) bool {
				return c.HiddenDim == 8192 && slices.Equal(c.ConvLayers, []int{0, 1, 3, 4, 6, 7, 9, 11, 13, 15}) && c.ConvWidth == 3 && c.RopeBase == 1e6
			}},
		{"lfm2 Lfm2Config's defaults", `{` + lfm + `,"intermediate_size":12288,"layer_types":["conv","conv","full_attention","conv","conv","full_attention","conv","conv","full_attention","conv","full_attention","conv","full_attention","conv","full_attention","conv"]}`,
			func(c *model.Config) bool { return c.HiddenDim == 8192 && len(c.ConvLayers) == 10 && c.NormEps == 1e-5 }},
		{"lfm2 original keys", `{` + lfm + `,"block_ff_dim":12288,"intermediate_size":6144,"theta":5e5,"full_attn_idxs":[15]}`,
			func(c *model.Config) bool { return c.HiddenDim == 8192 && len(c.ConvLayers) == 15 && c.RopeBase == 5e5 }},
		{"lfm2 rope_parameters by layer type", `{` + lfm + `,"intermediate_size":12288,"rope_parameters":{"full_attention":{"rope_type":"default","rope_theta":2e6},"conv":null}}`,
			func(c *model.Config) bool { return c.ConvLayers == nil && c.RopeBase == 2e6 }},
		{"granite with RoPE", `{` + gr + `,"position_embedding_type":"rope","rope_theta":10000}`,
			func(c *model.Config) bool {
				return c.RopeDims == 16 && c.RopeStyle == model.RopeInterleaved && c.HiddenDim == 96 && c.SSM.Inner == 128 && slices.Equal(c.SSM.Layers, []int{0})
			}},
		// GraniteMoeHybridConfig's defaults: no position_embedding_type is
		// NoPE, mamba_d_head "auto" is d_inner / heads, eps 1e-6.
		{"granite defaults", `{` + strings.Replace(gr, `"mamba_d_head":16`, `"mamba_d_head":"auto"`, 1) + `}`,
			func(c *model.Config) bool { return c.RopeDims == 0 && c.SSM.Heads == 8 && c.NormEps == 1e-6 }},
		{"granite without multipliers", `{` + gr + `,"position_embedding_type":"nope","head_dim":64}`,
			func(c *model.Config) bool {
				return c.RopeDims == 0 && c.HeadDim == 16 && c.EmbedScale == 0 && c.ResidualScale == 0 && c.LogitScale == 0 && c.AttnScale == 0.25
			}},
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

// TestHybridConfigErrors: what the hybrids' import refuses, with the
// error kind.
func TestHybridConfigErrors(t *testing.T) {
	emb := &tensors.Tensor{Name: "model.embed_tokens.weight", DType: tensors.F32, Shape: []int{4, 8}, Data: make([]byte, 4*4*8)}
	const q35 = `"model_type":"qwen3_5_text","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":4,"head_dim":8`
	const lfm = `"model_type":"lfm2","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":2,"intermediate_size":24`
	const gr = `"model_type":"granitemoehybrid","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":2,"shared_intermediate_size":8,"layer_types":["mamba","attention"],"mamba_n_heads":2,"mamba_d_head":8,"mamba_d_state":4,"mamba_n_groups":1,"mamba_d_conv":4,"num_local_experts":0`
	for _, tc := range []struct {
		name, config string
		want         error
		key          string // what the error names
		extra        []*tensors.Tensor
	}{
		{"qwen3_5 without text_config", `{"model_type":"qwen3_5","vision_config":{}}`, ErrFormat, "text_config", nil},
		{"qwen3_5_moe without num_experts", `{"model_type":"qwen3_5_moe","text_config":{` + q35 + `}}`, ErrFormat, "num_experts", nil},
		{"qwen3_5_moe dense layers", `{` + strings.Replace(q35, "qwen3_5_text", "qwen3_5_moe_text", 1) + `,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,"mlp_only_layers":[0]}`, ErrUnsupported, "mlp_only_layers", nil},
		{"qwen3_5_moe fused experts of another count", `{` + strings.Replace(q35, "qwen3_5_text", "qwen3_5_moe_text", 1) + `,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8}`, ErrFormat, "experts",
			[]*tensors.Tensor{{Name: "model.layers.3.mlp.experts.gate_up_proj", DType: tensors.F32, Shape: []int{3, 16, 8}, Data: make([]byte, 4*3*16*8)}}},
		{"qwen3_5 value head dim", `{` + q35 + `,"linear_key_head_dim":4,"linear_value_head_dim":8}`, ErrUnsupported, "linear_value_head_dim", nil},
		{"qwen3_5 value heads not a multiple", `{` + q35 + `,"linear_num_key_heads":2,"linear_num_value_heads":3}`, ErrFormat, "linear_num_value_heads", nil},
		{"qwen3_5 yarn", `{` + q35 + `,"rope_parameters":{"rope_type":"yarn","factor":4.0}}`, ErrUnsupported, "yarn", nil},
		{"qwen3_5 layer types", `{` + q35 + `,"layer_types":["linear_attention","sliding_attention","linear_attention","full_attention"]}`, ErrUnsupported, "sliding_attention", nil},
		{"qwen3_5 layer count", `{` + q35 + `,"layer_types":["full_attention"]}`, ErrFormat, "layer_types", nil},
		{"qwen3_5 attention bias", `{` + q35 + `,"attention_bias":true}`, ErrUnsupported, "attention_bias", nil},
		{"lfm2 conv bias", `{` + lfm + `,"conv_bias":true,"layer_types":["conv","full_attention"]}`, ErrUnsupported, "conv_bias", nil},
		{"lfm2 rope scaling", `{` + lfm + `,"layer_types":["conv","full_attention"],"rope_scaling":{"rope_type":"linear","factor":2.0}}`, ErrUnsupported, "rope_scaling", nil},
		{"granite experts", `{` + gr + `,"num_local_experts":4}`, ErrUnsupported, "num_local_experts", nil},
		{"granite experts by default", `{` + strings.Replace(gr, `,"num_local_experts":0`, "", 1) + `}`, ErrUnsupported, "num_local_experts", nil},
		{"granite d_head of another kind", `{` + strings.Replace(gr, `"mamba_d_head":8`, `"mamba_d_head":[8]`, 1) + `}`, ErrFormat, "mamba_d_head", nil},
		{"granite conv without bias", `{` + gr + `,"mamba_conv_bias":false}`, ErrUnsupported, "mamba_conv_bias", nil},
		{"granite position embedding", `{` + gr + `,"position_embedding_type":"alibi"}`, ErrUnsupported, "alibi", nil},
		{"granite heads do not make d_inner", `{` + gr + `,"mamba_n_heads":3}`, ErrFormat, "heads", nil},
		{"granite negative multiplier", `{` + gr + `,"residual_multiplier":-1}`, ErrFormat, "residual_multiplier", nil},
		{"qwen3_5 linear attention tensor in an attention layer", `{` + q35 + `,"layer_types":["full_attention","full_attention","full_attention","full_attention"]}`, ErrFormat, "full-attention layer",
			[]*tensors.Tensor{{Name: "model.layers.1.linear_attn.in_proj_b.weight", DType: tensors.F32, Shape: []int{2, 8}, Data: make([]byte, 64)}}},
		{"granite without shared_intermediate_size", `{"model_type":"granitemoehybrid","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"layer_types":["attention"],"num_local_experts":0}`, ErrFormat, "shared_intermediate_size", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := safetensors.Write(&buf, append([]*tensors.Tensor{emb}, tc.extra...), nil); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want %v naming %s", err, tc.want, tc.key)
			}
		})
	}
}

// TestTileValueHeads checks the regrouping on labelled rows and columns:
// 2 key heads, 6 value heads of 2 rows after 3 leading rows. HF's grouped
// heads are A B C (key head 0) and D E F (key head 1); llama.cpp's tiled
// order pairs head j with key head j mod 2: A D B E C F.
func TestTileValueHeads(t *testing.T) {
	labels := "qkkAaBbCcDdEeFf"
	rows := &tensors.Tensor{Name: "qkv", DType: tensors.I8, Shape: []int{len(labels), 1}, Data: []byte(labels)}
	got, err := tileValueHeads(rows, 3, 2, 6, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != "qkkAaDdBbEeCcFf" {
		t.Errorf("rows %s, want qkkAaDdBbEeCcFf", got.Data)
	}
	cols := &tensors.Tensor{Name: "out", DType: tensors.I8, Shape: []int{2, 6}, Data: []byte("ABCDEFabcdef")}
	if got, err = tileValueHeads(cols, 0, 2, 6, 1, true); err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != "ADBECFadbecf" {
		t.Errorf("columns %s, want ADBECFadbecf", got.Data)
	}
	if _, err := tileValueHeads(rows, 0, 2, 6, 2, false); !errors.Is(err, ErrFormat) {
		t.Errorf("15 rows as 6 heads of 2: err = %v", err)
	}
	q, gate, err := splitQueryGate(&tensors.Tensor{Name: "q", DType: tensors.I8, Shape: []int{8, 1}, Data: []byte("qqGGrrHH")}, 2)
	if err != nil || string(q.Data) != "qqrr" || string(gate.Data) != "GGHH" {
		t.Errorf("query %q, gate %q, err %v", q.Data, gate.Data, err)
	}
}

// TestSplitGateUp3D: fused experts [experts, 2*hidden, dim] split into
// each expert's gate rows then up rows, on labelled rows of 2 experts.
func TestSplitGateUp3D(t *testing.T) {
	fused := &tensors.Tensor{Name: "gate_up", DType: tensors.I8, Shape: []int{2, 4, 1}, Data: []byte("gGuUhHvV")}
	parts, err := splitGateUp3D(fused, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if string(parts[0].Data) != "gGhH" || string(parts[1].Data) != "uUvV" || !slices.Equal(parts[0].Shape, []int{2, 2, 1}) ||
		parts[0].Name != model.Layer(5, model.ExpertsGate) || parts[1].Name != model.Layer(5, model.ExpertsUp) {
		t.Errorf("gate %q %v %s, up %q %s", parts[0].Data, parts[0].Shape, parts[0].Name, parts[1].Data, parts[1].Name)
	}
	if _, err := splitGateUp3D(fused, 3, 0); !errors.Is(err, ErrFormat) {
		t.Errorf("3 experts: %v", err)
	}
}
