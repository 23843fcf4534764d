package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// expect2 is the arch2 README's table of what each architecture fixes.
type expect2 struct {
	rope          string
	ropeDims      int
	base          float32
	eps           float32
	act           string
	qkNorm        bool
	qkvBias       bool
	postNorms     bool
	embedScale    float32
	window        int
	slidingLayers []int
	baseLocal     float32
	noRope        []int
	origCtx       int
	attnFactor    float32
}

var arch2Table = map[string]expect2{
	"llama3":  {rope: "interleaved", ropeDims: 16, base: 500000, eps: 1e-5, act: "silu"},
	"qwen2":   {rope: "halves", ropeDims: 16, base: 1e6, eps: 1e-6, act: "silu", qkvBias: true},
	"qwen3":   {rope: "halves", ropeDims: 32, base: 1e6, eps: 1e-6, act: "silu", qkNorm: true},
	"gemma3":  {rope: "halves", ropeDims: 16, base: 1e6, eps: 1e-6, act: "gelu_tanh", qkNorm: true, postNorms: true, embedScale: 8, window: 8, slidingLayers: []int{0, 1, 2, 3, 4}, baseLocal: 10000},
	"phi3":    {rope: "halves", ropeDims: 12, base: 10000, eps: 1e-5, act: "silu", origCtx: 32, attnFactor: 1.18322},
	"smollm3": {rope: "interleaved", ropeDims: 16, base: 5e6, eps: 1e-6, act: "silu", noRope: []int{3}},
}

func arch2Path(t testing.TB, name string) string {
	t.Helper()
	return testmodels.Path(t, "arch2", name+".gguf")
}

// TestLoadArch2Config checks the import of today's architectures against
// the README's conventions and the golden's dims and factor tensors.
func TestLoadArch2Config(t *testing.T) {
	for name, want := range arch2Table {
		t.Run(name, func(t *testing.T) {
			ck, err := Load(arch2Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			c, g := ck.Config, testmodels.Arch2(t, name)
			factors := func(key string) []float32 {
				var fs []float32
				for _, v := range g.NonWeightTensors[key] {
					fs = append(fs, float32(v))
				}
				return fs
			}
			long := factors("rope_freqs.weight")
			if long == nil {
				long = factors("rope_factors_long.weight")
			}
			var window []int
			for l := range c.Layers {
				if c.LayerWindow(l) > 0 {
					window = append(window, l)
				}
			}
			for _, f := range []struct {
				field     string
				got, want any
			}{
				{"arch", c.Arch, g.GGUFArch},
				{"dim", c.Dim, g.Dims.Embd},
				{"layers", c.Layers, g.Dims.Layers},
				{"heads", c.Heads, g.Dims.Heads},
				{"kv_heads", c.KVHeads, g.Dims.KVHeads},
				{"head_dim", c.HeadDim, g.Dims.HeadDim},
				{"hidden", c.HiddenDim, g.Dims.FFN},
				{"tied", c.Tied, g.Tied},
				{"rope", c.RopeStyle, want.rope},
				{"rope_dims", c.RopeDims, want.ropeDims},
				{"rope_base", c.RopeBase, want.base},
				{"eps", c.NormEps, want.eps},
				{"act", c.Act, want.act},
				{"gated", c.GatedFFN, true},
				{"qk_norm", c.QKNorm, want.qkNorm},
				{"qkv_bias", c.QKVBias, want.qkvBias},
				{"post_norms", c.PostNorms, want.postNorms},
				{"embed_scale", c.EmbedScale, want.embedScale},
				{"attn_scale", c.Scale(), float32(1 / math.Sqrt(float64(g.Dims.HeadDim)))},
				{"window", c.SlidingWindow, want.window},
				{"sliding layers", slices.Equal(window, want.slidingLayers), true},
				{"rope_base_local", c.RopeBaseLocal, want.baseLocal},
				{"no_rope_layers", slices.Equal(c.NoRopeLayers, want.noRope), true},
				{"rope_factors", slices.Equal(c.RopeFactors, long), true},
				{"rope_factors_short", slices.Equal(c.RopeFactorsShort, factors("rope_factors_short.weight")), true},
				{"rope_orig_ctx", c.RopeOrigCtx, want.origCtx},
				{"rope_attn_factor", math.Abs(float64(c.RopeAttnFactor-want.attnFactor)) < 1e-5, true},
			} {
				if f.got != f.want {
					t.Errorf("%s = %v, want %v", f.field, f.got, f.want)
				}
			}
		})
	}
}

// TestPhi3FusedUpSplits checks that Phi 3's ffn_up [gate | up] becomes the
// gate and up projections, row for row, read with the test's own walker.
func TestPhi3FusedUpSplits(t *testing.T) {
	path := arch2Path(t, "phi3")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := walkGGUF(t, raw)
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ff, e := ck.Config.HiddenDim, ck.Config.Dim
	for _, rt := range ts {
		layer, ok := strings.CutSuffix(strings.TrimPrefix(rt.name, "blk."), ".ffn_up.weight")
		if !ok {
			continue
		}
		fused := raw[rt.start : rt.start+int64(2*ff*e*4)]
		for i, n := range []string{model.WGate, model.WUp} {
			got := ck.Tensor("params.lm.transformer.x_layers_" + layer + "." + n)
			if got == nil || !slices.Equal(got.Shape, []int{ff, e}) || !bytes.Equal(got.Data, fused[i*ff*e*4:(i+1)*ff*e*4]) {
				t.Errorf("layer %s %s: not rows %d.. of ffn_up", layer, n, i*ff)
			}
		}
	}
}

// TestLoadRefusesUnsupported: what the runtime does not implement fails at
// load, naming the key (or architecture) and its value.
func TestLoadRefusesUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"unknown rope scaling", testmodels.GGUFWithString(t, arch2Path(t, "llama3"), "llama.rope.scaling.type", "dynamic"),
			[]string{"llama.rope.scaling.type", "dynamic"}},
		{"sliding window pattern", testmodels.GGUFWithString(t, arch2Path(t, "qwen3"), "qwen3.attention.sliding_window_pattern", "4"),
			[]string{"qwen3.attention.sliding_window_pattern", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestQwen3MoEMetadata: qwen3moe's expert counts are checked at load,
// naming the key and value.
func TestQwen3MoEMetadata(t *testing.T) {
	ck, err := Load(arch2Path(t, "qwen3moe"))
	if err != nil {
		t.Fatal(err)
	}
	if c := ck.Config; c.Experts != 4 || c.ExpertsUsed != 2 || c.ExpertHidden != 64 || !c.NormTopK {
		t.Errorf("experts %d, used %d, hidden %d, norm %t; want 4, 2, 64, true (README.md)", c.Experts, c.ExpertsUsed, c.ExpertHidden, c.NormTopK)
	}
	for _, key := range []string{"qwen3moe.expert_shared_count"} {
		_, err := Load(testmodels.GGUFWithString(t, arch2Path(t, "qwen3moe"), key, "two"))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "two") {
			t.Errorf("%s = \"two\": err %v, want one naming the key and value", key, err)
		}
	}
}

// tinyModern writes a one-layer GGUF of arch with today's tensors: Phi 3's
// fused attn_qkv and ffn_up [gate | up] with LongRoPE factor tensors and
// partial rotary, Qwen 3's separate projections with q/k norms and a
// head dim apart from embd/heads, or Qwen 3 MoE's router and 3-D experts. It seeds FuzzGGUF with the import paths
// of these architectures.
func tinyModern(arch string) []byte {
	w := &ggufWriter{}
	w.string("general.architecture", arch)
	d, f, hd := uint64(32), uint64(64), uint64(16)
	for k, v := range map[string]uint32{".embedding_length": 32, ".feed_forward_length": 64, ".block_count": 1,
		".attention.head_count": 2, ".context_length": 16} {
		w.u32(arch+k, v)
	}
	w.f32(arch+".attention.layer_norm_rms_epsilon", 1e-6)
	w.string("tokenizer.ggml.model", "llama")
	w.strings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁a"})
	w.tensor("token_embd.weight", GGMLF32, []uint64{d, 4}, f32Bytes(int(d*4), 0, 0.01))
	w.tensor("output_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	w.tensor("blk.0.attn_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	w.tensor("blk.0.ffn_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	if arch != "qwen3moe" {
		w.tensor("blk.0.ffn_down.weight", GGMLF16, []uint64{f, d}, make([]byte, 2*d*f))
	}
	switch arch {
	case "phi3":
		w.u32("phi3.rope.dimension_count", 12)
		w.u32("phi3.rope.scaling.original_context_length", 8)
		w.f32("phi3.rope.scaling.attn_factor", 1.1)
		w.tensor("rope_factors_long.weight", GGMLF32, []uint64{6}, f32Bytes(6, 1, 2))
		w.tensor("rope_factors_short.weight", GGMLF32, []uint64{6}, f32Bytes(6, 1, 0.1))
		w.tensor("blk.0.attn_qkv.weight", GGMLF32, []uint64{d, 3 * d}, f32Bytes(int(3*d*d), -1, 0.001))
		w.tensor("blk.0.attn_output.weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
		w.tensor("blk.0.ffn_up.weight", GGMLF32, []uint64{d, 2 * f}, f32Bytes(int(2*d*f), -1, 0.0005))
	case "qwen3":
		w.u32("qwen3.attention.key_length", uint32(hd*2))
		w.u32("qwen3.attention.value_length", uint32(hd*2))
		q := 2 * 2 * hd
		w.tensor("blk.0.attn_q.weight", GGMLF32, []uint64{d, q}, f32Bytes(int(d*q), -1, 0.001))
		w.tensor("blk.0.attn_k.weight", GGMLF32, []uint64{d, q}, f32Bytes(int(d*q), -1, 0.001))
		w.tensor("blk.0.attn_v.weight", GGMLF32, []uint64{d, q}, f32Bytes(int(d*q), -1, 0.001))
		w.tensor("blk.0.attn_output.weight", GGMLF32, []uint64{q, d}, f32Bytes(int(d*q), -1, 0.001))
		w.tensor("blk.0.attn_q_norm.weight", GGMLF32, []uint64{2 * hd}, f32Bytes(int(2*hd), 1, 0))
		w.tensor("blk.0.attn_k_norm.weight", GGMLF32, []uint64{2 * hd}, f32Bytes(int(2*hd), 1, 0))
		w.tensor("blk.0.ffn_gate.weight", GGMLF32, []uint64{d, f}, f32Bytes(int(d*f), -1, 0.001))
		w.tensor("blk.0.ffn_up.weight", GGMLF32, []uint64{d, f}, f32Bytes(int(d*f), -1, 0.001))
	case "qwen3moe":
		// Three experts of 32 units, two per token: the router and the
		// 3-D expert tensors (gate and up in Q8_0 blocks, down F32), in
		// place of the dense ffn_down written above, which the MoE
		// import refuses to leave out: it is dropped below.
		e, ef := uint64(3), uint64(32)
		w.u32("qwen3moe.expert_count", uint32(e))
		w.u32("qwen3moe.expert_used_count", 2)
		w.u32("qwen3moe.expert_feed_forward_length", uint32(ef))
		w.tensor("blk.0.attn_q.weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
		w.tensor("blk.0.attn_k.weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
		w.tensor("blk.0.attn_v.weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
		w.tensor("blk.0.attn_output.weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
		w.tensor("blk.0.attn_q_norm.weight", GGMLF32, []uint64{hd}, f32Bytes(int(hd), 1, 0))
		w.tensor("blk.0.attn_k_norm.weight", GGMLF32, []uint64{hd}, f32Bytes(int(hd), 1, 0))
		w.tensor("blk.0.ffn_gate_inp.weight", GGMLF32, []uint64{d, e}, f32Bytes(int(d*e), -1, 0.01))
		q8 := func(n uint64) []byte { return make([]byte, n/32*34) }
		w.tensor("blk.0.ffn_gate_exps.weight", GGMLQ8_0, []uint64{d, ef, e}, q8(d*ef*e))
		w.tensor("blk.0.ffn_up_exps.weight", GGMLQ8_0, []uint64{d, ef, e}, q8(d*ef*e))
		w.tensor("blk.0.ffn_down_exps.weight", GGMLF32, []uint64{ef, d, e}, f32Bytes(int(d*ef*e), -1, 0.001))
	}
	return w.bytes()
}

// The fuzz seeds of today's architectures import as they should.
func TestTinyModernSeeds(t *testing.T) {
	for _, arch := range []string{"phi3", "qwen3", "qwen3moe"} {
		f, err := Parse(tinyModern(arch))
		if err != nil {
			t.Fatal(err)
		}
		ck, err := f.Checkpoint()
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		c := ck.Config
		if arch == "phi3" && (c.RopeDims != 12 || len(c.RopeFactors) != 6 || c.RopeFactorsShort[5] != 1.5 || c.RopeOrigCtx != 8 ||
			ck.Tensor(model.Layer(0, model.WGate)) == nil || ck.Tensor(model.Layer(0, model.WK)) == nil) {
			t.Errorf("phi3 seed: %+v", c)
		}
		if arch == "qwen3" && (!c.QKNorm || c.HeadDim != 32 || ck.Tensor(model.Layer(0, model.KNorm)) == nil) {
			t.Errorf("qwen3 seed: %+v", c)
		}
		if arch == "qwen3moe" {
			g := ck.Tensor(model.Layer(0, model.ExpertsGate))
			if c.Experts != 3 || c.ExpertsUsed != 2 || c.ExpertHidden != 32 || g == nil || !slices.Equal(g.Shape, []int{3, 32, 32}) {
				t.Errorf("qwen3moe seed: %+v, gate experts %v", c, g)
			}
		}
	}
}

// TestLoadGPTOSS: testdata/gptoss's tiny gpt-oss GGUF (gen.py) imports
// with llama.cpp's conventions (src/models/openai-moe.cpp): even layers
// slide, experts gated by top-k then softmax with router and expert
// biases, attention sinks and biases, post_attention_norm as the FFN's
// norm, and YaRN worked out by hand from ggml's formulas for factor 4,
// original context 16, 16 rotary dims and base 150000: correction dims
// floor(16·ln(16/(32·2π))/(2·ln 150000)) -> 0 and ceil(16·ln(16/2π)/(2·ln
// 150000)) = ceil(0.627) = 1, so pair 0 keeps its angle and the others are
// divided by 4; cos and sin scaled by 1 + 0.1·ln 4.
func TestLoadGPTOSS(t *testing.T) {
	ck, err := Load(filepath.Join(testmodels.Root(t), "testdata", "gptoss", "gpt-oss.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	if c.Arch != model.ArchGPTOSS || c.Experts != 4 || c.ExpertsUsed != 2 || c.ExpertHidden != 32 ||
		c.ExpertGating != model.GatingTopKSoftmax || c.NormTopK || !c.RouterBias || !c.ExpertBias || !c.AttnSinks ||
		!c.QKVBias || !c.OutBias || c.Act != model.ActSwiGLUOAI || c.RopeStyle != model.RopeHalves ||
		c.SlidingWindow != 4 || c.LayerWindow(0) != 4 || c.LayerWindow(1) != 0 {
		t.Fatalf("config %+v", c)
	}
	want := []float32{1, 4, 4, 4, 4, 4, 4, 4}
	if !slices.Equal(c.RopeFactors, want) {
		t.Errorf("rope factors %v, want %v", c.RopeFactors, want)
	}
	if d := math.Abs(float64(c.RopeAttnFactor) - (1 + 0.1*math.Log(4))); d > 1e-6 {
		t.Errorf("rope attention factor %g, want 1 + 0.1 ln 4", c.RopeAttnFactor)
	}
	if ck.Tensor(model.Layer(1, model.FFNNorm)) == nil || ck.Tensor(model.Layer(1, model.PostAttnNorm)) != nil {
		t.Error("post_attention_norm is not the FFN norm")
	}
	for _, n := range []string{model.AttnSinks, model.RouterBias, model.ExpertsGateBias, model.ExpertsUpBias, model.ExpertsDownBias} {
		if ck.Tensor(model.Layer(1, n)) == nil {
			t.Errorf("no %s", n)
		}
	}
}
