package hf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// peftModel is the model the tiny PEFT adapters are written for.
var peftModel = model.Config{Arch: model.ArchLlama, Layers: 1, Dim: 8, HiddenDim: 16, Heads: 2, KVHeads: 1, HeadDim: 4, VocabSize: 16}

func seq(n int, start float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)
	}
	return v
}

// tinyPEFT writes a rank-2 adapter on q_proj (8→8) and down_proj (16→8),
// with lora_B of q_proj in Hugging Face row order.
func tinyPEFT(t testing.TB, extra ...*tensors.Tensor) []byte {
	t.Helper()
	mk := func(name string, shape []int, start float32) *tensors.Tensor {
		x, err := tensors.FromF32("base_model.model.model.layers.0."+name, shape, seq(shape[0]*shape[1], start), tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	ts := []*tensors.Tensor{
		mk("self_attn.q_proj.lora_A.weight", []int{2, 8}, 0),
		mk("self_attn.q_proj.lora_B.weight", []int{8, 2}, 100),
		mk("mlp.down_proj.lora_A.weight", []int{2, 16}, 200),
		mk("mlp.down_proj.lora_B.weight", []int{8, 2}, 300),
	}
	var b bytes.Buffer
	if err := safetensors.Write(&b, append(ts, extra...), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const tinyPEFTConfig = `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "down_proj"], "bias": "none"}`

func parsePEFT(config, st []byte, c *model.Config) (*lora.Adapter, error) {
	f, err := safetensors.Parse(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	return ParseLoRA(config, f, c)
}

// TestPEFTTiny checks the pairs: q_proj's B rows are permuted back to
// GGUF's interleaved order per head (with head_dim 4, Meta row 2i+j of a
// head is HF row 2j+i), down_proj's are as stored.
func TestPEFTTiny(t *testing.T) {
	a, err := parsePEFT([]byte(tinyPEFTConfig), tinyPEFT(t), &peftModel)
	if err != nil {
		t.Fatal(err)
	}
	if a.Alpha != 4 || len(a.Pairs) != 2 {
		t.Fatalf("alpha %v, %d pairs", a.Alpha, len(a.Pairs))
	}
	q, down := a.Pairs[0], a.Pairs[1]
	if q.Target != model.Layer(0, model.WQ) || down.Target != model.Layer(0, model.WDown) {
		t.Fatalf("targets %s, %s", q.Target, down.Target)
	}
	hfB := seq(16, 100)
	// Head dim 4: Meta rows (0,1,2,3) of each head come from HF rows (0,2,1,3).
	var want []float32
	for _, r := range []int{0, 2, 1, 3, 4, 6, 5, 7} {
		want = append(want, hfB[2*r:2*r+2]...)
	}
	if !slices.Equal(q.B, want) || !slices.Equal(q.A, seq(16, 0)) {
		t.Errorf("q_proj B %v, want %v", q.B, want)
	}
	if !slices.Equal(down.B, seq(16, 300)) || down.In != 16 || down.Out != 8 {
		t.Errorf("down_proj %+v", down)
	}
	// rsLoRA: scale lora_alpha/√r.
	a, err = parsePEFT([]byte(`{"r": 2, "lora_alpha": 4, "use_rslora": true}`), tinyPEFT(t), &peftModel)
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Scale(&a.Pairs[0], 1); s < 2.828 || s > 2.829 {
		t.Errorf("rslora scale %v, want 4/√2", s)
	}
}

func TestPEFTErrors(t *testing.T) {
	bad, err := tensors.FromF32("base_model.model.model.layers.0.self_attn.q_proj.lora_C.weight", []int{2, 8}, seq(16, 0), tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	lone, _ := tensors.FromF32("base_model.model.model.layers.0.mlp.up_proj.lora_A.weight", []int{2, 8}, seq(16, 0), tensors.F32)
	norm, _ := tensors.FromF32("base_model.model.model.layers.0.input_layernorm.lora_A.weight", []int{2, 8}, seq(16, 0), tensors.F32)
	normB, _ := tensors.FromF32("base_model.model.model.layers.0.input_layernorm.lora_B.weight", []int{8, 2}, seq(16, 0), tensors.F32)
	for _, tc := range []struct {
		name   string
		config string
		extra  []*tensors.Tensor
		want   error
	}{
		{"bad JSON", `{"r": `, nil, lora.ErrFormat},
		{"DoRA", `{"r": 2, "use_dora": true}`, nil, lora.ErrUnsupported},
		{"rank pattern", `{"r": 2, "rank_pattern": {"q_proj": 4}}`, nil, lora.ErrUnsupported},
		{"trained biases", `{"r": 2, "bias": "all"}`, nil, lora.ErrUnsupported},
		{"modules to save", `{"r": 2, "modules_to_save": ["lm_head"]}`, nil, lora.ErrUnsupported},
		{"other PEFT type", `{"peft_type": "IA3"}`, nil, lora.ErrUnsupported},
		{"r disagrees", `{"r": 4}`, nil, lora.ErrFormat},
		{"zero r", `{"r": 0}`, nil, lora.ErrFormat},
		{"unknown tensor", tinyPEFTConfig, []*tensors.Tensor{bad}, lora.ErrUnsupported},
		{"lone lora_A", tinyPEFTConfig, []*tensors.Tensor{lone}, lora.ErrFormat},
		{"norm module", tinyPEFTConfig, []*tensors.Tensor{norm, normB}, lora.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePEFT([]byte(tc.config), tinyPEFT(t, tc.extra...), &peftModel)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzPEFT(f *testing.F) {
	f.Add([]byte(tinyPEFTConfig), tinyPEFT(f))
	f.Add([]byte(`{"r": 2, "use_rslora": true}`), tinyPEFT(f)[:100])
	f.Fuzz(func(t *testing.T, config, st []byte) {
		a, err := parsePEFT(config, st, &peftModel)
		if err != nil {
			if !errors.Is(err, lora.ErrFormat) && !errors.Is(err, lora.ErrMismatch) && !errors.Is(err, lora.ErrUnsupported) {
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

// TestWritePEFTCorpus regenerates testdata/fuzz/FuzzPEFT when
// GPURUN_WRITE_CORPUS=1; the committed files are its output.
func TestWritePEFTCorpus(t *testing.T) {
	if os.Getenv("GPURUN_WRITE_CORPUS") != "1" {
		t.Skip("set GPURUN_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzPEFT")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st := tinyPEFT(t)
	for name, args := range map[string][2][]byte{
		"tiny":           {[]byte(tinyPEFTConfig), st},
		"tiny_truncated": {[]byte(tinyPEFTConfig), st[:len(st)*2/3]},
		"rslora":         {[]byte(`{"r": 2, "lora_alpha": 4, "use_rslora": true}`), st},
	} {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n", args[0], args[1])
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
