package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestQwen35Config: arch3's qwen35 imports as llama.cpp loads it: layers
// 0-2 Gated DeltaNet (conv kernel 4, 2 key heads, 4 value heads of 16),
// layer 3 gated attention with 8 of 32 dims rotated at base 1e7; attn_q's
// per-head interleaved query and gate rows split into WQ and WQGate.
func TestQwen35Config(t *testing.T) {
	path := testmodels.Path(t, "arch3", "qwen35.gguf")
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	if !slices.Equal(c.DeltaLayers, []int{0, 1, 2}) || c.DeltaConvWidth != 4 || c.DeltaKeyHeads != 2 || c.DeltaValueHeads != 4 || c.DeltaHeadDim != 16 {
		t.Errorf("delta layers %v, conv %d, heads %d/%d of %d", c.DeltaLayers, c.DeltaConvWidth, c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim)
	}
	if !c.AttnOutputGate || c.HeadDim != 32 || c.RopeDims != 8 || c.RopeBase != 1e7 || c.RopeStyle != model.RopeHalves || c.KVHeads != 2 || c.NormEps != 1e-6 || !c.Tied {
		t.Errorf("attention: gate %t, head dim %d, rope dims %d base %g style %s, kv heads %d, eps %g, tied %t",
			c.AttnOutputGate, c.HeadDim, c.RopeDims, c.RopeBase, c.RopeStyle, c.KVHeads, c.NormEps, c.Tied)
	}
	by := map[string][]float32{}
	for _, ts := range ck.Tensors {
		if v, err := ts.Float32(); err == nil {
			by[ts.Name] = v
		}
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw []float32
	for i := range f.Tensors {
		if f.Tensors[i].Name == "blk.3.attn_q.weight" {
			rt, err := f.readTensor(&f.Tensors[i], "q")
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = rt.Float32()
		}
	}
	q, g := by[model.Layer(3, model.WQ)], by[model.Layer(3, model.WQGate)]
	const hd, dim = 32, 64
	if len(raw) != 2*len(q) || len(q) != len(g) || len(q) != 4*hd*dim {
		t.Fatalf("sizes raw %d, q %d, gate %d", len(raw), len(q), len(g))
	}
	for h := range 4 {
		if !slices.Equal(q[h*hd*dim:(h+1)*hd*dim], raw[2*h*hd*dim:(2*h+1)*hd*dim]) || !slices.Equal(g[h*hd*dim:(h+1)*hd*dim], raw[(2*h+1)*hd*dim:(2*h+2)*hd*dim]) {
			t.Errorf("head %d: query and gate rows not those of attn_q's interleaved blocks", h)
		}
	}
}

// i32s writes an array of int32 values.
func (w *ggufWriter) i32s(key string, vs []int32) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, [2]uint32{uint32(TypeArray), uint32(TypeInt32)})
	binary.Write(&w.kv, binary.LittleEndian, uint64(len(vs)))
	binary.Write(&w.kv, binary.LittleEndian, vs)
	w.nkv++
}

// qwen35MoEGGUF writes arch3's qwen35 as a qwen35moe GGUF, laid out as
// llama.cpp loads that architecture: the same metadata under qwen35moe.
// (without feed_forward_length, which qwen35moe does not read) plus the
// expert counts, and each layer's FFN as 4 experts (2 used) copying it
// (ffn_{gate,up,down}_exps [in, out, experts]), a router ffn_gate_inp
// [dim, experts] and a shared expert (ffn_{gate,up,down}_shexp) with its
// gate row ffn_gate_inp_shexp [dim] of zeros. With shared, the experts'
// down projections are zero and the shared one is twice the dense one
// (scaled by sigmoid(0) = 1/2); else the shared down projection is zero.
// Either way the model computes the dense one.
func qwen35MoEGGUF(t *testing.T, shared bool) string {
	t.Helper()
	return qwen35MoEGGUFWith(t, shared, nil)
}

// qwen35MoEGGUFWith is qwen35MoEGGUF with its counts (keys without the
// "qwen35moe." prefix) and IMROPE sections edited by edit.
func qwen35MoEGGUFWith(t *testing.T, shared bool, edit func(counts map[string]uint32, sections *[]int32)) string {
	t.Helper()
	f, err := Open(testmodels.Path(t, "arch3", "qwen35.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	w := &ggufWriter{}
	w.string("general.architecture", "qwen35moe")
	counts := map[string]uint32{"block_count": 4, "context_length": 128, "embedding_length": 64, "attention.head_count": 4,
		"attention.head_count_kv": 2, "attention.key_length": 32, "attention.value_length": 32, "ssm.conv_kernel": 4, "ssm.state_size": 16,
		"ssm.group_count": 2, "ssm.time_step_rank": 4, "ssm.inner_size": 64, "full_attention_interval": 4, "rope.dimension_count": 8,
		"expert_count": 4, "expert_used_count": 2, "expert_feed_forward_length": 128, "expert_shared_feed_forward_length": 128}
	sections := []int32{2, 1, 1, 0}
	if edit != nil {
		edit(counts, &sections)
	}
	for k, v := range counts {
		w.u32("qwen35moe."+k, v)
	}
	w.f32("qwen35moe.rope.freq_base", 1e7)
	w.f32("qwen35moe.attention.layer_norm_rms_epsilon", 1e-6)
	if sections != nil {
		w.i32s("qwen35moe.rope.dimension_sections", sections)
	}
	raw := map[string][]byte{}
	for i := range f.Tensors {
		info := &f.Tensors[i]
		data, err := f.TensorData(info)
		if err != nil {
			t.Fatal(err)
		}
		raw[info.Name] = data
		if !strings.Contains(info.Name, ".ffn_") {
			dims := make([]uint64, len(info.Dims))
			for i, d := range info.Dims {
				dims[i] = uint64(d)
			}
			w.tensor(info.Name, info.Type, dims, data)
		}
	}
	const experts, dim, hidden = 4, 64, 128
	scaled := func(b []byte, s float32) []byte {
		out := make([]byte, len(b))
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(s*math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))))
		}
		return out
	}
	r := rand.New(rand.NewPCG(35, 35))
	for l := range 4 {
		blk := fmt.Sprintf("blk.%d.", l)
		gate, up, down := raw[blk+"ffn_gate.weight"], raw[blk+"ffn_up.weight"], raw[blk+"ffn_down.weight"]
		expertDown, sharedDown := down, scaled(down, 0)
		if shared {
			expertDown, sharedDown = scaled(down, 0), scaled(down, 2)
		}
		router := make([]byte, 4*dim*experts)
		for i := 0; i < len(router); i += 4 {
			binary.LittleEndian.PutUint32(router[i:], math.Float32bits(float32(r.NormFloat64())))
		}
		w.tensor(blk+"ffn_gate_inp.weight", GGMLF32, []uint64{dim, experts}, router)
		w.tensor(blk+"ffn_gate_exps.weight", GGMLF32, []uint64{dim, hidden, experts}, bytes.Repeat(gate, experts))
		w.tensor(blk+"ffn_up_exps.weight", GGMLF32, []uint64{dim, hidden, experts}, bytes.Repeat(up, experts))
		w.tensor(blk+"ffn_down_exps.weight", GGMLF32, []uint64{hidden, dim, experts}, bytes.Repeat(expertDown, experts))
		w.tensor(blk+"ffn_gate_shexp.weight", GGMLF32, []uint64{dim, hidden}, gate)
		w.tensor(blk+"ffn_up_shexp.weight", GGMLF32, []uint64{dim, hidden}, up)
		w.tensor(blk+"ffn_down_shexp.weight", GGMLF32, []uint64{hidden, dim}, sharedDown)
		w.tensor(blk+"ffn_gate_inp_shexp.weight", GGMLF32, []uint64{dim}, make([]byte, 4*dim))
	}
	path := filepath.Join(t.TempDir(), "qwen35moe.gguf")
	if err := os.WriteFile(path, w.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestQwen35MoEImport imports Qwen3.5 MoE GGUFs built from arch3's qwen35
// (qwen35MoEGGUF) and runs them on the CPU backend: experts, router and
// shared expert land where the graph reads them, so the logits are
// llama.cpp's dense ones within the golden's tolerance (1e-4).
func TestQwen35MoEImport(t *testing.T) {
	g := testmodels.Arch3(t, "qwen35")
	for _, shared := range []bool{false, true} {
		ck, err := Load(qwen35MoEGGUF(t, shared))
		if err != nil {
			t.Fatal(err)
		}
		c := ck.Config
		if c.Arch != model.ArchQwen35MoE || c.Experts != 4 || c.ExpertsUsed != 2 || c.ExpertHidden != 128 || c.SharedExpertHidden != 128 || !c.NormTopK || len(c.DeltaLayers) != 3 {
			t.Fatalf("config: %+v", c)
		}
		ctx := context.Background()
		be := cpu.New(cpu.Options{Threads: 1})
		w, err := be.LoadWeights(ctx, ck.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		n := len(g.PromptIDs)
		prog := testmodels.Compiler(t, be, w, &ck.Config, arch.BuildOptions{MaxLen: 32}, false)(n, true)
		if err := prog.Run(ctx, testmodels.IDs32(g.PromptIDs), 0); err != nil {
			t.Fatal(err)
		}
		all := make([]float32, n*c.VocabSize)
		if _, err := prog.Logits(all); err != nil {
			t.Fatal(err)
		}
		var worst float64
		for p := range n {
			worst = max(worst, testmodels.MaxAbsDiff(all[p*c.VocabSize:(p+1)*c.VocabSize], g.Logits[p]))
		}
		t.Logf("shared %t: prompt logits max|Δ| %.3g from llama.cpp's dense qwen35", shared, worst)
		if worst > 1e-4 {
			t.Errorf("shared %t: prompt logits differ from the dense golden by %.3g", shared, worst)
		}
	}
}

// TestQwen35BadMetadata: Qwen3.5 metadata that llama.cpp would not load,
// or whose IMROPE would not be NEOX over the rotated dims for text, fails
// to import with a format or unsupported error naming it, never a panic.
func TestQwen35BadMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]uint32, *[]int32)
		want error
		key  string
	}{
		{"no sections", func(_ map[string]uint32, s *[]int32) { *s = nil }, ErrFormat, "dimension_sections"},
		{"three sections", func(_ map[string]uint32, s *[]int32) { *s = []int32{2, 1, 1} }, ErrFormat, "dimension_sections"},
		{"a pair on the fourth stream", func(_ map[string]uint32, s *[]int32) { *s = []int32{1, 1, 1, 1} }, ErrUnsupported, "fourth position stream"},
		{"inner size off", func(c map[string]uint32, _ *[]int32) { c["ssm.inner_size"] = 48 }, ErrFormat, "inner_size"},
		{"interval 0", func(c map[string]uint32, _ *[]int32) { c["full_attention_interval"] = 0 }, ErrFormat, "full_attention_interval"},
		{"value heads not a multiple", func(c map[string]uint32, _ *[]int32) { c["ssm.group_count"] = 3 }, ErrFormat, "delta net"},
		{"conv of one tap", func(c map[string]uint32, _ *[]int32) { c["ssm.conv_kernel"] = 1 }, ErrFormat, "conv width"},
		{"more experts used than exist", func(c map[string]uint32, _ *[]int32) { c["expert_used_count"] = 5 }, ErrFormat, "expert_used_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(qwen35MoEGGUFWith(t, false, tc.edit))
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.key) {
				t.Errorf("%v, want %v naming %q", err, tc.want, tc.key)
			}
		})
	}
}
