package arch_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// loraCases are testdata/lora/gen.sh's llama.cpp runs: a base model of
// ../shared/models and adapters with their --lora-scaled scales.
var loraCases = []struct {
	name, base string
	adapters   []lora.Spec
	tol        float64
	exact      bool
	peft       bool // the adapters also exist as PEFT directories
}{
	{"llama_r4", "arch/llama", []lora.Spec{{Path: "llama_r4", Scale: 1}}, 1e-4, true, true},
	{"llama_r16_half", "arch/llama", []lora.Spec{{Path: "llama_r16", Scale: 0.5}}, 1e-4, true, false},
	{"llama_two", "arch/llama", []lora.Spec{{Path: "llama_r4", Scale: 1}, {Path: "llama_r16", Scale: 0.5}}, 1e-4, true, false},
	// llama.cpp quantizes activations to 8 bits for Q8_0 weights (see
	// TestGGUFGoldens); the merged weights here are F32.
	{"llama-q8_0_r4", "arch/llama-q8_0", []lora.Spec{{Path: "llama_r4", Scale: 1}}, 1e-2, false, false},
	{"phi2_fusedqkv_r4", "arch/phi2_fusedqkv", []lora.Spec{{Path: "phi2_fusedqkv_r4", Scale: 1}}, 1e-4, true, false},
	{"phi3_r4", "arch2/phi3", []lora.Spec{{Path: "phi3_r4", Scale: 1}}, 1e-4, true, true},
	{"qwen2_r16", "arch2/qwen2", []lora.Spec{{Path: "qwen2_r16", Scale: 1}}, 1e-4, true, true},
	{"gemma_r4", "arch/gemma", []lora.Spec{{Path: "gemma_r4", Scale: 1}}, 1e-4, true, true},
	// GELU through llama.cpp's fp16 table: the adapters make the FFN's
	// inputs larger (an fp16 ulp of 1e-3 to 2e-3 where the base model's
	// tiny activations have 6e-5), so a sum that rounds across an fp16
	// boundary moves the logits more: measured 2.3e-4 (falcon), 3.5e-4
	// (gemma2), 2.0e-4 (gemma3), the same merged or unmerged, every other
	// architecture within 8e-6. Greedy ids stay exact.
	{"gemma2_r4", "arch/gemma2", []lora.Spec{{Path: "gemma2_r4", Scale: 1}}, 5e-4, true, false},
	{"falcon_r4", "arch/falcon", []lora.Spec{{Path: "falcon_r4", Scale: 1}}, 5e-4, true, true},
	{"stablelm_r4", "arch/stablelm", []lora.Spec{{Path: "stablelm_r4", Scale: 1}}, 1e-4, true, false},
	{"llama3_r4", "arch2/llama3", []lora.Spec{{Path: "llama3_r4", Scale: 1}}, 1e-4, true, false},
	{"qwen3_r4", "arch2/qwen3", []lora.Spec{{Path: "qwen3_r4", Scale: 1}}, 1e-4, true, false},
	{"gemma3_r4", "arch2/gemma3", []lora.Spec{{Path: "gemma3_r4", Scale: 1}}, 5e-4, true, false},
	{"smollm3_r4", "arch2/smollm3", []lora.Spec{{Path: "smollm3_r4", Scale: 1}}, 1e-4, true, true},
}

func loraDir(t *testing.T) string {
	return filepath.Join(testmodels.Root(t), "testdata", "lora")
}

// TestLoRAGoldens applies each case's adapters to its base model, merged
// into the weights and unmerged (BuildOptions.LoRA: W·x + B·(A·x)), with
// and without fusion, and compares the CPU backend's logits and greedy ids
// with llama.cpp's, which applies the same adapters unmerged
// (llama_set_adapters_lora); the PEFT form of an adapter must give the
// same. Each golden is first shown to be
// far (> 0.1, and > 10 tolerances) from the base model's own golden, so a merge
// that did nothing could not pass.
func TestLoRAGoldens(t *testing.T) {
	dir := loraDir(t)
	for _, tc := range loraCases {
		var g testmodels.ArchGolden
		decodeJSON(t, filepath.Join(dir, tc.name+".golden.json"), &g)
		var base testmodels.ArchGolden
		decodeJSON(t, testmodels.Path(t, tc.base+".golden.json"), &base)
		if d := maxDiffRows(g.Logits, base.Logits); d < max(10*tc.tol, 0.1) {
			t.Fatalf("%s: the adapters move the logits by only %.3g", tc.name, d)
		}
		forms := []string{"gguf"}
		if tc.peft {
			forms = append(forms, "peft")
		}
		for _, form := range forms {
			for _, mode := range []string{"merged", "merged/fused", "unmerged", "unmerged/fused"} {
				sub := tc.name + "/" + form + "/" + mode
				fused := strings.HasSuffix(mode, "fused")
				t.Run(sub, func(t *testing.T) {
					ck, err := gguf.Load(testmodels.Path(t, tc.base+".gguf"))
					if err != nil {
						t.Fatal(err)
					}
					var list []lora.Applied
					for _, s := range tc.adapters {
						path := filepath.Join(dir, s.Path+"."+form)
						a, err := checkpoint.LoadLoRA(path, &ck.Config)
						if err != nil {
							t.Fatal(err)
						}
						list = append(list, lora.Applied{Adapter: a, Scale: s.Scale})
					}
					if strings.HasPrefix(mode, "merged") {
						if err := lora.Merge(ck, list, lora.Options{}); err != nil {
							t.Fatal(err)
						}
						checkCheckpoint(t, tc.name, ck, g, tc.tol, tc.exact, fused)
						return
					}
					ts, pairs, err := lora.Unmerged(ck.Config.Arch, ck.Tensors, list)
					if err != nil {
						t.Fatal(err)
					}
					ck.Tensors = append(ck.Tensors, ts...)
					byWeight := map[string][]arch.LoRAPair{}
					for _, p := range pairs {
						byWeight[p.Target] = append(byWeight[p.Target], arch.LoRAPair{A: p.A, B: p.B, Rank: p.Rank})
					}
					checkCheckpointLoRA(t, tc.name, ck, g, tc.tol, tc.exact, fused, byWeight)
				})
			}
		}
	}
}

// TestLoRAMismatch loads adapters onto models they were not made for.
func TestLoRAMismatch(t *testing.T) {
	dir := loraDir(t)
	for _, tc := range []struct {
		name, base, adapter string
		want                error
	}{
		{"another architecture", "arch/phi2_fusedqkv", "llama_r4.gguf", lora.ErrMismatch},
		{"PEFT onto other shapes", "arch2/qwen3", "llama_r4.peft", lora.ErrMismatch},
		{"PEFT with more layers than the model", "arch/llama", "qwen2_r16.peft", lora.ErrMismatch},
		{"PEFT module the model lacks", "arch/phi2", "phi3_r4.peft", lora.ErrMismatch},
		{"a model, not an adapter", "arch/llama", "../../../shared/models/arch/llama.gguf", lora.ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ck, err := gguf.Load(testmodels.Path(t, tc.base+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			a, err := checkpoint.LoadLoRA(filepath.Join(dir, tc.adapter), &ck.Config)
			if err == nil {
				err = lora.Merge(ck, []lora.Applied{{Adapter: a, Scale: 1}}, lora.Options{})
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestLoRARequantize merges into the Q8_0 model with Requantize: the
// weights stay I8 with their block scales. Requantizing costs accuracy
// (measured: prompt logits 0.031 from llama.cpp's unmerged run, against
// 0.0056 for the F32 merge), still far closer than the base model (0.75),
// so the bound is 5e-2.
func TestLoRARequantize(t *testing.T) {
	ck, err := gguf.Load(testmodels.Path(t, "arch", "llama-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := checkpoint.LoadLoRA(filepath.Join(loraDir(t), "llama_r4.gguf"), &ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := lora.Merge(ck, []lora.Applied{{Adapter: a, Scale: 1}}, lora.Options{Requantize: true}); err != nil {
		t.Fatal(err)
	}
	wq := ck.Tensor(model.Layer(0, model.WQ))
	if wq.DType != tensors.I8 || wq.BlockSize() != 32 {
		t.Fatalf("merged wq is %s with blocks of %d, want i8 blocks of 32", wq.DType, wq.BlockSize())
	}
	var g testmodels.ArchGolden
	decodeJSON(t, filepath.Join(loraDir(t), "llama-q8_0_r4.golden.json"), &g)
	checkCheckpoint(t, "llama-q8_0_r4/requantized", ck, g, 5e-2, false, false)
}

func decodeJSON(t *testing.T, path string, v any) {
	t.Helper()
	testmodels.DecodeJSON(t, path, v)
}

func maxDiffRows(a, b [][]float64) float64 {
	var d float64
	for i := range min(len(a), len(b)) {
		for j := range min(len(a[i]), len(b[i])) {
			d = max(d, abs(a[i][j]-b[i][j]))
		}
	}
	return d
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
