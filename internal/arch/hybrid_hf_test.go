package arch_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/hf"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// hybridHFTol bounds the HF imports' logits against llama.cpp's: the
// CPU backend's tolerance for these goldens (internal/backend/cpu
// qwen35Tol, lfm2Tol, graniteTol), 24 times below the smallest
// convention effect arch3/README.md measures (2.4e-2 for qwen35's output
// gate, 1.5e-2 for lfm2's conv taps; 6.5e-3 for Granite's NoPE).
const hybridHFTol = 1e-4

// hfExportHybrid is one arch3 hybrid written back as a Hugging Face
// checkpoint: its config.json and a function giving each of the GGUF
// import's tensors its HF names and layouts (undoing what llama.cpp's
// converter did), or nothing when another tensor carries it.
type hfExportHybrid struct {
	config map[string]any
	export func(t *testing.T, ref *model.Checkpoint, layer int, suffix string, rt *tensors.Tensor) []*tensors.Tensor
	global map[string]string
}

// hfT is a tensor of the HF checkpoint.
func hfT(name string, dtype tensors.DType, shape []int, data []byte) *tensors.Tensor {
	return &tensors.Tensor{Name: name, DType: dtype, Shape: shape, Data: data}
}

// untile undoes the converter's regrouping of Qwen3.5's value heads
// (conversion/qwen.py _reorder_v_heads): tiled head i*k + g back to HF's
// grouped head g*(v/k) + i; runs of run bytes from byte offset from, or
// per row of rowBytes when cols.
func untile(data []byte, from, k, v, run int, cols bool, rowBytes int) []byte {
	out := slices.Clone(data)
	r := v / k
	do := func(src, dst []byte) {
		for i := range r {
			for g := range k {
				copy(dst[(g*r+i)*run:(g*r+i+1)*run], src[(i*k+g)*run:(i*k+g+1)*run])
			}
		}
	}
	if cols {
		for row := 0; row < len(data)/rowBytes; row++ {
			do(data[row*rowBytes:(row+1)*rowBytes], out[row*rowBytes:(row+1)*rowBytes])
		}
		return out
	}
	do(data[from:], out[from:])
	return out
}

// aLog turns the converter's A = -exp(A_log) back into A_log (f32).
func aLog(t *testing.T, data []byte) []byte {
	t.Helper()
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
		if !(a < 0) {
			t.Fatalf("A = %v is not negative", a)
		}
		binary.LittleEndian.PutUint32(out[i:], math.Float32bits(float32(math.Log(-float64(a)))))
	}
	return out
}

// hybridExports follows arch3/README.md's dims and the converters'
// transforms (conversion/qwen.py Qwen3_5TextModel, lfm2.py LFM2Model,
// granite.py GraniteHybridModel with mamba.py Mamba2Model).
func hybridExports() map[string]hfExportHybrid {
	plain := map[string]string{model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.norm.weight"}
	return map[string]hfExportHybrid{
		"qwen35": {
			global: plain,
			config: map[string]any{"model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
				"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 128, "vocab_size": 512,
				"rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": true, "attention_bias": false,
				"layer_types":             []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"},
				"full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
				"linear_num_key_heads": 2, "linear_num_value_heads": 4, "bos_token_id": nil, "eos_token_id": 2,
				"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
					"mrope_section": []int{2, 1, 1}, "mrope_interleaved": true}},
			export: exportQwen35,
		},
		"lfm2": {
			global: map[string]string{model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.embedding_norm.weight"},
			// intermediate_size 192 becomes the FFN's 128 as Lfm2MLP
			// adjusts it: 2/3 of it, times 1.0, rounded up to 32.
			config: map[string]any{"model_type": "lfm2", "hidden_size": 64, "intermediate_size": 192, "block_auto_adjust_ff_dim": true,
				"block_ffn_dim_multiplier": 1.0, "block_multiple_of": 32, "num_hidden_layers": 5, "num_attention_heads": 4,
				"num_key_value_heads": 2, "max_position_embeddings": 128, "vocab_size": 512, "norm_eps": 1e-5, "conv_L_cache": 3,
				"conv_bias": false, "layer_types": []string{"conv", "conv", "full_attention", "conv", "full_attention"},
				"rope_theta": 1e6, "tie_embedding": true, "bos_token_id": 1, "eos_token_id": 2},
			export: exportLFM2,
		},
		"granitehybrid": {
			global: plain,
			config: map[string]any{"model_type": "granitemoehybrid", "hidden_size": 64, "intermediate_size": 128,
				"shared_intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1,
				"max_position_embeddings": 131072, "vocab_size": 512, "rms_norm_eps": 1e-5, "hidden_act": "silu",
				"layer_types": []string{"mamba", "mamba", "attention", "mamba"}, "mamba_n_heads": 8, "mamba_d_head": 16,
				"mamba_d_state": 16, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true,
				"mamba_proj_bias": false, "embedding_multiplier": 4.0, "residual_multiplier": 0.22, "attention_multiplier": 2.0,
				"logits_scaling": 0.5, "position_embedding_type": "nope", "rope_theta": 10000.0, "num_local_experts": 0,
				"tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2},
			export: exportGranite,
		},
	}
}

// exportQwen35: norms back to w (the converter stored 1+w; not the
// DeltaNet's norm), the query and gate rows interleaved per head in
// q_proj, the value heads back in HF's grouped order, A back to A_log and
// the convolution to Conv1d's [channels, 1, taps].
func exportQwen35(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
	c := ref.Config
	k, v, d := c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim
	p := "model.layers." + strconv.Itoa(l) + "."
	one := func(name string, data []byte, shape ...int) []*tensors.Tensor {
		if shape == nil {
			shape = rt.Shape
		}
		return []*tensors.Tensor{hfT(p+name, rt.DType, shape, data)}
	}
	rb := rt.DType.ByteSize(1)
	if len(rt.Shape) == 2 {
		rb = rt.DType.ByteSize(rt.Shape[1])
	}
	switch suffix {
	case model.AttnNorm:
		return one("input_layernorm.weight", gemmaMinusOne(t, rt.Data))
	case model.FFNNorm:
		return one("post_attention_layernorm.weight", gemmaMinusOne(t, rt.Data))
	case model.QNorm:
		return one("self_attn.q_norm.weight", gemmaMinusOne(t, rt.Data))
	case model.KNorm:
		return one("self_attn.k_norm.weight", gemmaMinusOne(t, rt.Data))
	case model.WQ:
		gate := ref.Tensor(model.Layer(l, model.WQGate)).Data
		run := c.HeadDim * rb
		var data []byte
		for h := range c.Heads {
			data = append(append(data, rt.Data[h*run:(h+1)*run]...), gate[h*run:(h+1)*run]...)
		}
		return one("self_attn.q_proj.weight", data, 2*rt.Shape[0], rt.Shape[1])
	case model.WQGate:
		return nil
	case model.WK:
		return one("self_attn.k_proj.weight", rt.Data)
	case model.WV:
		return one("self_attn.v_proj.weight", rt.Data)
	case model.WO:
		return one("self_attn.o_proj.weight", rt.Data)
	case model.WGate:
		return one("mlp.gate_proj.weight", rt.Data)
	case model.WUp:
		return one("mlp.up_proj.weight", rt.Data)
	case model.WDown:
		return one("mlp.down_proj.weight", rt.Data)
	case model.DeltaQKV:
		return one("linear_attn.in_proj_qkv.weight", untile(rt.Data, 2*k*d*rb, k, v, d*rb, false, 0))
	case model.DeltaZ:
		return one("linear_attn.in_proj_z.weight", untile(rt.Data, 0, k, v, d*rb, false, 0))
	case model.DeltaBeta:
		return one("linear_attn.in_proj_b.weight", untile(rt.Data, 0, k, v, rb, false, 0))
	case model.DeltaAlpha:
		return one("linear_attn.in_proj_a.weight", untile(rt.Data, 0, k, v, rb, false, 0))
	case model.DeltaConv:
		return one("linear_attn.conv1d.weight", untile(rt.Data, 2*k*d*rb, k, v, d*rb, false, 0), rt.Shape[0], 1, rt.Shape[1])
	case model.DeltaDtBias:
		return one("linear_attn.dt_bias", untile(rt.Data, 0, k, v, rb, false, 0))
	case model.DeltaA:
		return one("linear_attn.A_log", untile(aLog(t, rt.Data), 0, k, v, rb, false, 0))
	case model.DeltaNorm:
		return one("linear_attn.norm.weight", rt.Data)
	case model.DeltaOut:
		return one("linear_attn.out_proj.weight", untile(rt.Data, 0, k, v, d*rt.DType.ByteSize(1), true, rb))
	}
	t.Fatalf("no HF name for %s", rt.Name)
	return nil
}

// exportLFM2: LFM2's names, the convolution as Conv1d's [channels, 1, taps].
func exportLFM2(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
	names := map[string]string{model.AttnNorm: "operator_norm.weight", model.FFNNorm: "ffn_norm.weight",
		model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight", model.WV: "self_attn.v_proj.weight",
		model.WO: "self_attn.out_proj.weight", model.QNorm: "self_attn.q_layernorm.weight", model.KNorm: "self_attn.k_layernorm.weight",
		model.ConvInProj: "conv.in_proj.weight", model.ConvKernel: "conv.conv.weight", model.ConvOutProj: "conv.out_proj.weight",
		model.WGate: "feed_forward.w1.weight", model.WUp: "feed_forward.w3.weight", model.WDown: "feed_forward.w2.weight"}
	hn, ok := names[suffix]
	if !ok {
		t.Fatalf("no HF name for %s", rt.Name)
	}
	shape := rt.Shape
	if suffix == model.ConvKernel {
		shape = []int{shape[0], 1, shape[1]}
	}
	return []*tensors.Tensor{hfT("model.layers."+strconv.Itoa(l)+"."+hn, rt.DType, shape, rt.Data)}
}

// exportGranite: q/k rows in HF's rotate-half order (the converter's
// undo_permute made them Meta's), gate and up fused in
// shared_mlp.input_linear, A back to A_log, the convolution as Conv1d's.
func exportGranite(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
	c := ref.Config
	p := "model.layers." + strconv.Itoa(l) + "."
	names := map[string]string{model.AttnNorm: "input_layernorm.weight", model.FFNNorm: "post_attention_layernorm.weight",
		model.WV: "self_attn.v_proj.weight", model.WO: "self_attn.o_proj.weight", model.WDown: "shared_mlp.output_linear.weight",
		model.SSMIn: "mamba.in_proj.weight", model.SSMConvBias: "mamba.conv1d.bias", model.SSMDtBias: "mamba.dt_bias",
		model.SSMD: "mamba.D", model.SSMNorm: "mamba.norm.weight", model.SSMOut: "mamba.out_proj.weight"}
	switch suffix {
	case model.WQ:
		return []*tensors.Tensor{hfT(p+"self_attn.q_proj.weight", rt.DType, rt.Shape, toHFPermuted(rt.Data, c.Heads, rt.Shape[0]))}
	case model.WK:
		return []*tensors.Tensor{hfT(p+"self_attn.k_proj.weight", rt.DType, rt.Shape, toHFPermuted(rt.Data, c.KVHeads, rt.Shape[0]))}
	case model.WGate:
		up := ref.Tensor(model.Layer(l, model.WUp))
		return []*tensors.Tensor{hfT(p+"shared_mlp.input_linear.weight", rt.DType, []int{2 * rt.Shape[0], rt.Shape[1]},
			append(slices.Clone(rt.Data), up.Data...))}
	case model.WUp:
		return nil
	case model.SSMA:
		return []*tensors.Tensor{hfT(p+"mamba.A_log", rt.DType, rt.Shape, aLog(t, rt.Data))}
	case model.SSMConv:
		return []*tensors.Tensor{hfT(p+"mamba.conv1d.weight", rt.DType, []int{rt.Shape[0], 1, rt.Shape[1]}, rt.Data)}
	}
	hn, ok := names[suffix]
	if !ok {
		t.Fatalf("no HF name for %s", rt.Name)
	}
	return []*tensors.Tensor{hfT(p+hn, rt.DType, rt.Shape, rt.Data)}
}

// writeHybridHF writes ref as the HF checkpoint ex describes; with
// prefix "model.language_model." (and extra tensors) it is a multimodal
// checkpoint's layout.
func writeHybridHF(t *testing.T, ex hfExportHybrid, ref *model.Checkpoint, config map[string]any, prefix string, extra ...*tensors.Tensor) string {
	t.Helper()
	var out []*tensors.Tensor
	for _, rt := range ref.Tensors {
		if name, ok := ex.global[rt.Name]; ok {
			data := rt.Data
			if ref.Config.Arch == model.ArchQwen35 && rt.Name == model.FinalNorm {
				data = gemmaMinusOne(t, data)
			}
			out = append(out, hfT(name, rt.DType, rt.Shape, data))
			continue
		}
		rest, found := strings.CutPrefix(rt.Name, "params.lm.transformer.x_layers_")
		l, suffix, _ := strings.Cut(rest, ".")
		if !found {
			t.Fatalf("no HF name for %s", rt.Name)
		}
		out = append(out, ex.export(t, ref, atoi(t, l), suffix, rt)...)
	}
	for _, o := range out {
		o.Name = prefix + strings.TrimPrefix(o.Name, "model.")
	}
	out = append(out, extra...)
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, out, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkHybridImport compares an HF import with the GGUF import of the
// same weights: the configs (but for what only the tokenizer files state,
// and Granite's context, which the converter sets to 2^20 for a NoPE
// model) and every tensor, byte for byte but for A (-exp(log(-A)) in f32
// is within an ulp or two of A).
func checkHybridImport(t *testing.T, ck, ref *model.Checkpoint) {
	t.Helper()
	got, want := ck.Config, ref.Config
	want.BOS, want.EOS, want.AddBOS, want.StopTokens = got.BOS, got.EOS, got.AddBOS, got.StopTokens
	if want.Arch == model.ArchGraniteHybrid {
		if want.MaxSeqLen != 1<<20 || got.MaxSeqLen != 131072 {
			t.Errorf("context %d (GGUF %d), want 131072 (2^20)", got.MaxSeqLen, want.MaxSeqLen)
		}
		want.MaxSeqLen = got.MaxSeqLen
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}
	if len(ck.Tensors) != len(ref.Tensors) {
		t.Errorf("%d tensors, the GGUF import has %d", len(ck.Tensors), len(ref.Tensors))
	}
	for _, w := range ref.Tensors {
		g := ck.Tensor(w.Name)
		if g == nil || !reflect.DeepEqual(g.Shape, w.Shape) || g.DType != w.DType {
			t.Errorf("%s: missing or of another shape or type", w.Name)
			continue
		}
		if strings.HasSuffix(w.Name, model.DeltaA) || strings.HasSuffix(w.Name, model.SSMA) {
			a, b := f32s(g.Data), f32s(w.Data)
			for i := range a {
				if math.Abs(float64(a[i]-b[i])) > 4e-7*math.Abs(float64(b[i])) {
					t.Errorf("%s[%d] = %v, the GGUF's %v", w.Name, i, a[i], b[i])
				}
			}
			continue
		}
		if !bytes.Equal(g.Data, w.Data) {
			t.Errorf("%s differs from the GGUF import", w.Name)
		}
	}
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestHybridHFGolden writes each of arch3's qwen35, lfm2 and
// granitehybrid as the Hugging Face checkpoint llama.cpp's converter
// would have read (config.json with the model type's keys, safetensors
// with HF's names and layouts), imports it with internal/hf, checks it
// against the GGUF import, and runs it against llama.cpp's golden logits
// and greedy ids on the CPU backend. Qwen3.5 is also written as the
// multimodal Qwen3_5ForConditionalGeneration checkpoint (text_config, the
// text model under model.language_model., a vision tower and an MTP head
// beside it, which the import skips).
func TestHybridHFGolden(t *testing.T) {
	exports := hybridExports()
	for _, name := range []string{"qwen35", "lfm2", "granitehybrid"} {
		t.Run(name, func(t *testing.T) {
			g := testmodels.Arch3(t, name)
			ref, err := gguf.Load(testmodels.Path(t, "arch3", name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			ex := exports[name]
			ck, err := hf.Load(writeHybridHF(t, ex, ref, ex.config, "model."))
			if err != nil {
				t.Fatal(err)
			}
			checkHybridImport(t, ck, ref)
			checkCheckpoint(t, name+" (hf)", ck, g.ArchGolden, hybridHFTol, true, true)
		})
	}
	t.Run("qwen35_multimodal", func(t *testing.T) {
		g := testmodels.Arch3(t, "qwen35")
		ref, err := gguf.Load(testmodels.Path(t, "arch3", "qwen35.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		ex := exports["qwen35"]
		text := maps.Clone(ex.config)
		delete(text, "tie_word_embeddings") // stated at the top level
		cfg := map[string]any{"model_type": "qwen3_5", "architectures": []string{"Qwen3_5ForConditionalGeneration"},
			"text_config": text, "vision_config": map[string]any{"hidden_size": 2}, "tie_word_embeddings": true}
		extra := []*tensors.Tensor{
			hfT("model.visual.blocks.0.mlp.linear_fc1.weight", tensors.F32, []int{2, 2}, make([]byte, 16)),
			hfT("mtp.fc.weight", tensors.F32, []int{2, 2}, make([]byte, 16)),
			hfT("mtp.layers.0.self_attn.q_proj.weight", tensors.F32, []int{2, 2}, make([]byte, 16)),
		}
		ck, err := hf.Load(writeHybridHF(t, ex, ref, cfg, "model.language_model.", extra...))
		if err != nil {
			t.Fatal(err)
		}
		checkHybridImport(t, ck, ref)
		checkCheckpoint(t, "qwen35 (hf multimodal)", ck, g.ArchGolden, hybridHFTol, true, true)
	})
}

// TestQwen35HFLayouts shows the golden pins the two layouts the Qwen3.5
// import must undo: a checkpoint whose value heads were left in the tiled
// order (as if the import did not regroup them), or whose q_proj holds
// all queries then all gates, imports without complaint and moves the
// prompt logits past 10x the tolerance.
func TestQwen35HFLayouts(t *testing.T) {
	g := testmodels.Arch3(t, "qwen35")
	ref, err := gguf.Load(testmodels.Path(t, "arch3", "qwen35.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ex := hybridExports()["qwen35"]
	c := ref.Config
	for _, tc := range []struct {
		name   string
		export func(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor
	}{
		{"value heads tiled", func(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
			out := exportQwen35(t, ref, l, suffix, rt)
			if c.DeltaLayer(l) && suffix != model.DeltaNorm && suffix != model.DeltaA && len(out) == 1 && strings.Contains(out[0].Name, "linear_attn") {
				out[0].Data = rt.Data // the GGUF's tiled order
			}
			return out
		}},
		{"query then gate", func(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
			out := exportQwen35(t, ref, l, suffix, rt)
			if suffix == model.WQ {
				out[0].Data = append(slices.Clone(rt.Data), ref.Tensor(model.Layer(l, model.WQGate)).Data...)
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := ex
			bad.export = tc.export
			ck, err := hf.Load(writeHybridHF(t, bad, ref, bad.config, "model."))
			if err != nil {
				t.Fatal(err)
			}
			d := promptDiff(t, ck, g.ArchGolden, func(*fusion.Graph) {})
			t.Logf("prompt logits max|Δ| from llama.cpp: %.3g", d)
			if d < 10*hybridHFTol {
				t.Errorf("max|Δ| %.3g: want past 10x the tolerance %g", d, hybridHFTol)
			}
		})
	}
}

// TestQwen35MoEHF imports a Qwen3.5 MoE checkpoint made from arch3's
// qwen35 so that its FFNs compute the dense model's: 4 experts, 2 used
// (renormalized), each the dense FFN with half its down projection, and
// a shared expert with the whole down projection behind a zero gate
// (sigmoid 0.5); the routed half and the shared half sum to the dense
// FFN, so the logits are llama.cpp's dense golden. The experts are
// written fused, as transformers 5 saves them ([experts, 2*hidden, dim]
// gate_up and [experts, dim, hidden] down), and per expert
// (mlp.experts.K.*), as a multimodal qwen3_5_moe checkpoint.
func TestQwen35MoEHF(t *testing.T) {
	g := testmodels.Arch3(t, "qwen35")
	ref, err := gguf.Load(testmodels.Path(t, "arch3", "qwen35.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const experts = 4
	halve := func(data []byte) []byte {
		out := make([]byte, len(data))
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))/2))
		}
		return out
	}
	ex := hybridExports()["qwen35"]
	for _, fused := range []bool{true, false} {
		name := "per expert, multimodal"
		if fused {
			name = "fused"
		}
		t.Run(name, func(t *testing.T) {
			moe := ex
			moe.export = func(t *testing.T, ref *model.Checkpoint, l int, suffix string, rt *tensors.Tensor) []*tensors.Tensor {
				p := "model.layers." + strconv.Itoa(l) + ".mlp."
				layer := func(s string) *tensors.Tensor { return ref.Tensor(model.Layer(l, s)) }
				switch suffix {
				case model.WGate:
					gate, up, down := layer(model.WGate), layer(model.WUp), layer(model.WDown)
					f, d := gate.Shape[0], gate.Shape[1]
					router := make([]byte, 4*experts*d)
					for i := range experts * d {
						binary.LittleEndian.PutUint32(router[4*i:], math.Float32bits(float32((i*7919)%13-6)/50))
					}
					out := []*tensors.Tensor{
						hfT(p+"gate.weight", tensors.F32, []int{experts, d}, router),
						hfT(p+"shared_expert.gate_proj.weight", tensors.F32, gate.Shape, gate.Data),
						hfT(p+"shared_expert.up_proj.weight", tensors.F32, up.Shape, up.Data),
						hfT(p+"shared_expert.down_proj.weight", tensors.F32, down.Shape, down.Data),
						hfT(p+"shared_expert_gate.weight", tensors.F32, []int{1, d}, make([]byte, 4*d)),
					}
					if fused {
						var gateUp, downs []byte
						for range experts {
							gateUp = append(append(gateUp, gate.Data...), up.Data...)
							downs = append(downs, halve(down.Data)...)
						}
						return append(out, hfT(p+"experts.gate_up_proj", tensors.F32, []int{experts, 2 * f, d}, gateUp),
							hfT(p+"experts.down_proj", tensors.F32, []int{experts, d, f}, downs))
					}
					for e := range experts {
						q := p + "experts." + strconv.Itoa(e) + "."
						out = append(out, hfT(q+"gate_proj.weight", tensors.F32, gate.Shape, gate.Data),
							hfT(q+"up_proj.weight", tensors.F32, up.Shape, up.Data),
							hfT(q+"down_proj.weight", tensors.F32, down.Shape, halve(down.Data)))
					}
					return out
				case model.WUp, model.WDown:
					return nil
				}
				return exportQwen35(t, ref, l, suffix, rt)
			}
			text := maps.Clone(ex.config)
			text["model_type"] = "qwen3_5_moe_text"
			text["num_experts"], text["num_experts_per_tok"], text["moe_intermediate_size"] = experts, 2, 128
			text["shared_expert_intermediate_size"], text["norm_topk_prob"] = 128, true
			cfg, prefix := text, "model."
			if !fused {
				cfg = map[string]any{"model_type": "qwen3_5_moe", "text_config": text, "tie_word_embeddings": true}
				prefix = "model.language_model."
			}
			ck, err := hf.Load(writeHybridHF(t, moe, ref, cfg, prefix))
			if err != nil {
				t.Fatal(err)
			}
			c := ck.Config
			if c.Arch != model.ArchQwen35MoE || c.Experts != experts || c.ExpertsUsed != 2 || c.ExpertHidden != 128 ||
				c.SharedExpertHidden != 128 || !c.NormTopK || !slices.Equal(c.DeltaLayers, ref.Config.DeltaLayers) {
				t.Fatalf("config %+v", c)
			}
			d := promptDiff(t, ck, g.ArchGolden, func(*fusion.Graph) {})
			t.Logf("prompt logits max|Δ| from llama.cpp's dense qwen35: %.3g", d)
			if d > hybridHFTol {
				t.Errorf("prompt logits differ from the dense golden by %.3g", d)
			}
		})
	}
}
