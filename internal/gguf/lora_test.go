package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/tensors/model"
)

// loraConfig is the model the tiny adapters are written for.
var loraConfig = model.Config{Arch: model.ArchLlama, Layers: 1, Dim: 8, HiddenDim: 16, Heads: 2, KVHeads: 1, HeadDim: 4, VocabSize: 16}

// ramp returns n float32 values start, start+1, ... as F32 bytes.
func ramp(n int, start float32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(start+float32(i)))
	}
	return b
}

// loraEdit changes the tiny adapter; nil writes the good one.
type loraEdit struct {
	typ, adapterType string
	noAlpha          bool
	dropB            bool
	extra            string // another tensor name
	extraPair        string // another target's base name, with lora_a and lora_b
	rankB            uint64
}

// tinyAdapter writes a rank-2 adapter for loraConfig: attn_q (8→8), a fused
// attn_qkv (8→16: Q 8, K 4, V 4) and ffn_down (16→8).
func tinyAdapter(e loraEdit) []byte {
	w := &ggufWriter{}
	w.string("general.architecture", "llama")
	w.string("general.type", cmp(e.typ, "adapter"))
	w.string("adapter.type", cmp(e.adapterType, "lora"))
	if !e.noAlpha {
		w.f32("adapter.lora.alpha", 4)
	}
	rankB := uint64(2)
	if e.rankB != 0 {
		rankB = e.rankB
	}
	w.tensor("blk.0.attn_q.weight.lora_a", GGMLF32, []uint64{8, 2}, ramp(16, 0))
	if !e.dropB {
		w.tensor("blk.0.attn_q.weight.lora_b", GGMLF32, []uint64{rankB, 8}, ramp(int(rankB)*8, 100))
	}
	w.tensor("blk.0.attn_qkv.weight.lora_a", GGMLF32, []uint64{8, 2}, ramp(16, 200))
	w.tensor("blk.0.attn_qkv.weight.lora_b", GGMLF32, []uint64{2, 16}, ramp(32, 300))
	w.tensor("blk.0.ffn_down.weight.lora_a", GGMLF32, []uint64{16, 2}, ramp(32, 400))
	w.tensor("blk.0.ffn_down.weight.lora_b", GGMLF32, []uint64{2, 8}, ramp(16, 500))
	if e.extra != "" {
		w.tensor(e.extra, GGMLF32, []uint64{8, 2}, ramp(16, 0))
	}
	if e.extraPair != "" {
		w.tensor(e.extraPair+".lora_a", GGMLF32, []uint64{8, 2}, ramp(16, 0))
		w.tensor(e.extraPair+".lora_b", GGMLF32, []uint64{2, 8}, ramp(16, 0))
	}
	return w.bytes()
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func values(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestLoRATiny checks the pairs of the tiny adapter: ggml [in, r] data is
// A's rows, [r, out] data is B's rows, and the fused attn_qkv splits into
// Q, K and V rows of B with A shared.
func TestLoRATiny(t *testing.T) {
	f, err := Parse(tinyAdapter(loraEdit{}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.LoRA(&loraConfig)
	if err != nil {
		t.Fatal(err)
	}
	if a.Arch != "llama" || a.Alpha != 4 {
		t.Errorf("arch %q alpha %v", a.Arch, a.Alpha)
	}
	qkvA := values(ramp(16, 200))
	qkvB := values(ramp(32, 300))
	want := []lora.Pair{
		{Target: model.Layer(0, model.WQ), Rank: 2, In: 8, Out: 8, A: values(ramp(16, 0)), B: values(ramp(16, 100))},
		{Target: model.Layer(0, model.WQ), Rank: 2, In: 8, Out: 8, A: qkvA, B: qkvB[:16]},
		{Target: model.Layer(0, model.WK), Rank: 2, In: 8, Out: 4, A: qkvA, B: qkvB[16:24]},
		{Target: model.Layer(0, model.WV), Rank: 2, In: 8, Out: 4, A: qkvA, B: qkvB[24:]},
		{Target: model.Layer(0, model.WDown), Rank: 2, In: 16, Out: 8, A: values(ramp(32, 400)), B: values(ramp(16, 500))},
	}
	if len(a.Pairs) != len(want) {
		t.Fatalf("%d pairs, want %d", len(a.Pairs), len(want))
	}
	for i, p := range a.Pairs {
		w := want[i]
		if p.Target != w.Target || p.Rank != w.Rank || p.In != w.In || p.Out != w.Out || !slices.Equal(p.A, w.A) || !slices.Equal(p.B, w.B) {
			t.Errorf("pair %d: %s r%d %dx%d, want %s r%d %dx%d (or values differ)", i, p.Target, p.Rank, p.Out, p.In, w.Target, w.Rank, w.Out, w.In)
		}
	}
	if s := a.Scale(&a.Pairs[0], 0.5); s != 1 {
		t.Errorf("scale 0.5 with alpha 4, rank 2 = %v, want 1", s)
	}
}

func TestLoRAErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit loraEdit
		cfg  func(*model.Config)
		want error
	}{
		{"a model", loraEdit{typ: "model"}, nil, ErrFormat},
		{"not lora", loraEdit{adapterType: "control_vector"}, nil, lora.ErrUnsupported},
		{"lone lora_a", loraEdit{dropB: true}, nil, lora.ErrFormat},
		{"rank disagrees", loraEdit{rankB: 3}, nil, lora.ErrMismatch},
		{"unknown tensor", loraEdit{extra: "blk.0.attn_q.weight.lora_c"}, nil, lora.ErrUnsupported},
		{"norm target", loraEdit{extraPair: "blk.0.attn_norm.weight"}, nil, lora.ErrUnsupported},
		{"token embedding target", loraEdit{extraPair: "token_embd.weight"}, nil, lora.ErrUnsupported},
		{"block past the model", loraEdit{extraPair: "blk.7.attn_q.weight"}, nil, lora.ErrMismatch},
		{"other architecture", loraEdit{}, func(c *model.Config) { c.Arch = model.ArchQwen2 }, lora.ErrMismatch},
		{"wider model", loraEdit{}, func(c *model.Config) { c.Heads, c.HeadDim = 4, 4 }, lora.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tinyAdapter(tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			c := loraConfig
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			_, err = f.LoRA(&c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// An adapter is no model.
	f, err := Parse(tinyAdapter(loraEdit{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Checkpoint(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "LoRA adapter") {
		t.Errorf("adapter as a model: %v", err)
	}
	// No alpha: the user's scale alone, as llama.cpp.
	f, _ = Parse(tinyAdapter(loraEdit{noAlpha: true}))
	a, err := f.LoRA(&loraConfig)
	if err != nil || a.Alpha != 0 || a.Scale(&a.Pairs[0], 0.5) != 0.5 {
		t.Errorf("no alpha: %v, %+v", err, a)
	}
}

func FuzzLoRA(f *testing.F) {
	good := tinyAdapter(loraEdit{})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(tinyAdapter(loraEdit{rankB: 3}))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		a, err := file.LoRA(&loraConfig)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, lora.ErrFormat) &&
				!errors.Is(err, lora.ErrMismatch) && !errors.Is(err, lora.ErrUnsupported) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		for i := range a.Pairs {
			if err := a.Pairs[i].Check(); err != nil {
				t.Fatalf("imported pair fails its check: %v", err)
			}
		}
	})
}

// TestWriteLoRACorpus regenerates testdata/fuzz/FuzzLoRA when
// GPURUN_WRITE_CORPUS=1; the committed files are its output.
func TestWriteLoRACorpus(t *testing.T) {
	if os.Getenv("GPURUN_WRITE_CORPUS") != "1" {
		t.Skip("set GPURUN_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	good := tinyAdapter(loraEdit{})
	writeCorpus(t, "FuzzLoRA", map[string][]byte{
		"tiny_adapter":           good,
		"tiny_adapter_truncated": good[:len(good)*2/3],
		"rank_disagrees":         tinyAdapter(loraEdit{rankB: 3}),
	})
}
