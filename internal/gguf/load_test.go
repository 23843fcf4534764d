package gguf

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// ourName maps a llama.cpp tensor name to ours, independently of names.go's
// tables in the package.
func ourName(gg string) string {
	global := map[string]string{
		"token_embd.weight": "params.lm.token_embedding.w", "output_norm.weight": "params.lm.final_ln.scale",
		"output_norm.bias": "params.lm.final_ln.bias", "output.weight": "params.lm.softmax.logits_ffn.w",
		"output.bias": "params.lm.softmax.logits_ffn.b",
	}
	if n, ok := global[gg]; ok {
		return n
	}
	parts := strings.SplitN(gg, ".", 3)
	layer := map[string]string{
		"attn_norm.weight": "pre_layer_norm.scale", "attn_norm.bias": "pre_layer_norm.bias",
		"attn_q.weight": "self_attention.q.w", "attn_k.weight": "self_attention.k.w", "attn_v.weight": "self_attention.v.w",
		"attn_q.bias": "self_attention.q.b", "attn_k.bias": "self_attention.k.b", "attn_v.bias": "self_attention.v.b",
		"attn_output.weight": "self_attention.post.w", "attn_output.bias": "self_attention.post.b",
		"ffn_norm.weight": "ff_layer.pre_layer_norm.scale", "ffn_norm.bias": "ff_layer.pre_layer_norm.bias",
		"post_attention_norm.weight": "post_attention_norm.scale", "post_ffw_norm.weight": "ff_layer.post_layer_norm.scale",
		"ffn_gate.weight": "ff_layer.ffn_layer1_gate.w", "ffn_up.weight": "ff_layer.ffn_layer1.w", "ffn_down.weight": "ff_layer.ffn_layer2.w",
		"ffn_up.bias": "ff_layer.ffn_layer1.b", "ffn_down.bias": "ff_layer.ffn_layer2.b",
	}[parts[2]]
	return "params.lm.transformer.x_layers_" + parts[1] + "." + layer
}

// expect is the README's table of distinguishing settings.
type expect struct {
	norm       string
	eps        float32
	rope       string
	ropeDims   int
	base       float32
	act        string
	gated      bool
	parallel   bool
	postNorms  bool
	tied       bool
	qkvBias    bool
	outBias    bool
	ffnBias    bool
	headBias   bool
	embedScale float32
	attnCap    float32
	finalCap   float32
	window     int
	policy     string
}

var archTable = map[string]expect{
	"llama":         {norm: "rms", eps: 1e-5, rope: "interleaved", ropeDims: 16, base: 500000, act: "silu", gated: true, policy: "auto"},
	"gemma":         {norm: "rms", eps: 1e-6, rope: "halves", ropeDims: 16, base: 10000, act: "gelu_tanh", gated: true, tied: true, embedScale: 8, policy: "f16"},
	"gemma2":        {norm: "rms", eps: 1e-6, rope: "halves", ropeDims: 8, base: 10000, act: "gelu_tanh", gated: true, postNorms: true, tied: true, embedScale: float32(math.Sqrt(32)), attnCap: 0.02, finalCap: 0.5, window: 8, policy: "f16"},
	"phi2":          {norm: "layer", eps: 1e-5, rope: "halves", ropeDims: 6, base: 10000, act: "gelu_tanh", parallel: true, qkvBias: true, outBias: true, ffnBias: true, headBias: true, policy: "f32"},
	"phi2_fusedqkv": {norm: "layer", eps: 1e-5, rope: "halves", ropeDims: 6, base: 10000, act: "gelu_tanh", parallel: true, qkvBias: true, outBias: true, ffnBias: true, headBias: true, policy: "f32"},
	"falcon":        {norm: "layer", eps: 1e-5, rope: "halves", ropeDims: 16, base: 10000, act: "gelu_tanh", parallel: true, tied: true, policy: "f32"},
	"stablelm":      {norm: "layer", eps: 1e-5, rope: "halves", ropeDims: 4, base: 10000, act: "silu", gated: true, policy: "f16"},
	"llama-q8_0":    {norm: "rms", eps: 1e-5, rope: "interleaved", ropeDims: 16, base: 500000, act: "silu", gated: true, policy: "auto"},
	"llama-q4_0":    {norm: "rms", eps: 1e-5, rope: "interleaved", ropeDims: 16, base: 500000, act: "silu", gated: true, policy: "auto"},
}

func TestLoadArchConfig(t *testing.T) {
	for name, want := range archTable {
		t.Run(name, func(t *testing.T) {
			ck, err := Load(filepath.Join(archDir(t), name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			c := ck.Config
			g := testmodels.Arch(t, strings.TrimSuffix(strings.TrimSuffix(name, "-q8_0"), "-q4_0"))
			arch := g.Hparams["general.architecture"].(string)
			hp := func(k string) int { return int(g.Hparams[arch+"."+k].(float64)) }
			headDim := hp("embedding_length") / hp("attention.head_count")
			if _, ok := g.Hparams[arch+".attention.key_length"]; ok {
				headDim = hp("attention.key_length")
			}
			for _, f := range []struct {
				field     string
				got, want any
			}{
				{"arch", c.Arch, arch},
				{"dim", c.Dim, hp("embedding_length")},
				{"hidden", c.HiddenDim, hp("feed_forward_length")},
				{"layers", c.Layers, hp("block_count")},
				{"heads", c.Heads, hp("attention.head_count")},
				{"kv_heads", c.KVHeads, hp("attention.head_count_kv")},
				{"max_seq_len", c.MaxSeqLen, hp("context_length")},
				{"head_dim", c.HeadDim, headDim},
				{"vocab", c.VocabSize, 512},
				{"norm", c.Norm, want.norm},
				{"eps", c.NormEps, want.eps},
				{"rope", c.RopeStyle, want.rope},
				{"rope_dims", c.RopeDims, want.ropeDims},
				{"rope_base", c.RopeBase, want.base},
				{"act", c.Act, want.act},
				{"gated", c.GatedFFN, want.gated},
				{"parallel", c.Parallel, want.parallel},
				{"post_norms", c.PostNorms, want.postNorms},
				{"tied", c.Tied, want.tied},
				{"qkv_bias", c.QKVBias, want.qkvBias},
				{"out_bias", c.OutBias, want.outBias},
				{"ffn_bias", c.FFNBias, want.ffnBias},
				{"lm_head_bias", c.LMHeadBias, want.headBias},
				{"embed_scale", c.EmbedScale, want.embedScale},
				{"attn_scale", c.Scale(), float32(1 / math.Sqrt(float64(headDim)))},
				{"attn_softcap", c.AttnSoftCap, want.attnCap},
				{"final_softcap", c.FinalSoftCap, want.finalCap},
				{"window", c.SlidingWindow, want.window},
				{"window layer 0", c.LayerWindow(0), want.window},
				{"window layer 1", c.LayerWindow(1), 0},
				{"activations", c.Activations, want.policy},
				{"bos", c.BOS, 1},
				{"eos", c.EOS, 2},
				{"add_bos", c.AddBOS, true},
			} {
				if f.got != f.want {
					t.Errorf("%s = %v, want %v", f.field, f.got, f.want)
				}
			}
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLoadArchTensors checks every tensor against the golden shapes
// (transposed from ggml order) and, for F32 files, its bytes against the file
// at the offset the test's own walker finds. Fused QKV rows must split as
// [Q | K | V].
func TestLoadArchTensors(t *testing.T) {
	for _, name := range []string{"llama", "gemma", "gemma2", "phi2", "phi2_fusedqkv", "falcon", "stablelm"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(archDir(t), name+".gguf")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			g := testmodels.Arch(t, name)
			walked, _ := walkGGUF(t, raw)
			if len(walked) != len(g.Tensors) {
				t.Fatalf("walker found %d tensors, golden lists %d", len(walked), len(g.Tensors))
			}
			c := ck.Config
			seen := 0
			for _, rt := range walked {
				gshape := g.Tensors[rt.name]
				if !slices.Equal(gshape, toInts(rt.dims)) {
					t.Fatalf("%s: walker dims %v, golden %v", rt.name, rt.dims, gshape)
				}
				if rt.typ != 0 {
					t.Fatalf("%s: type %d in an F32 file", rt.name, rt.typ)
				}
				n := 4
				for _, d := range gshape {
					n *= d
				}
				fileBytes := raw[rt.start : rt.start+int64(n)]
				want := slices.Clone(gshape)
				slices.Reverse(want)
				if base, ok := strings.CutSuffix(rt.name, "attn_qkv.weight"); ok {
					seen += 3
					q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
					rowBytes := 4 * want[1]
					layer := ourName(base + "attn_q.weight")
					checkPart(t, ck, layer, []int{q, want[1]}, fileBytes[:q*rowBytes])
					checkPart(t, ck, strings.Replace(layer, ".q.w", ".k.w", 1), []int{kv, want[1]}, fileBytes[q*rowBytes:(q+kv)*rowBytes])
					checkPart(t, ck, strings.Replace(layer, ".q.w", ".v.w", 1), []int{kv, want[1]}, fileBytes[(q+kv)*rowBytes:])
					continue
				}
				if base, ok := strings.CutSuffix(rt.name, "attn_qkv.bias"); ok {
					seen += 3
					q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
					layer := ourName(base + "attn_q.bias")
					checkPart(t, ck, layer, []int{q}, fileBytes[:4*q])
					checkPart(t, ck, strings.Replace(layer, ".q.b", ".k.b", 1), []int{kv}, fileBytes[4*q:4*(q+kv)])
					checkPart(t, ck, strings.Replace(layer, ".q.b", ".v.b", 1), []int{kv}, fileBytes[4*(q+kv):])
					continue
				}
				seen++
				checkPart(t, ck, ourName(rt.name), want, fileBytes)
			}
			if seen != len(ck.Tensors) {
				t.Errorf("checkpoint has %d tensors, file accounts for %d", len(ck.Tensors), seen)
			}
			if c.Parallel && ck.Tensor(model.Layer(0, model.FFNNorm)) != nil {
				t.Error("parallel block with an FFN norm")
			}
		})
	}
}

func checkPart(t *testing.T, ck *model.Checkpoint, name string, shape []int, want []byte) {
	t.Helper()
	tt := ck.Tensor(name)
	if tt == nil {
		t.Errorf("missing %s", name)
		return
	}
	if tt.DType != tensors.F32 || !slices.Equal(tt.Shape, shape) {
		t.Errorf("%s: %s%v, want f32%v", name, tt.DType, tt.Shape, shape)
		return
	}
	if err := tt.Check(); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(tt.Data, want) {
		t.Errorf("%s: bytes differ from the file", name)
	}
}

func toInts(d []uint64) []int {
	out := make([]int, len(d))
	for i, v := range d {
		out[i] = int(v)
	}
	return out
}

// TestPhi2FusedEqualsSeparate: the two phi2 files hold the same weights, one
// with a fused attn_qkv, so the split must reproduce the separate tensors.
func TestPhi2FusedEqualsSeparate(t *testing.T) {
	sep, err := Load(filepath.Join(archDir(t), "phi2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	fused, err := Load(filepath.Join(archDir(t), "phi2_fusedqkv.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if sep.Config.Arch != fused.Config.Arch || len(sep.Tensors) != len(fused.Tensors) {
		t.Fatalf("configs or tensor counts differ: %d vs %d", len(sep.Tensors), len(fused.Tensors))
	}
	for _, a := range sep.Tensors {
		b := fused.Tensor(a.Name)
		if b == nil || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
			t.Errorf("%s differs between phi2 and phi2_fusedqkv", a.Name)
		}
	}
}
