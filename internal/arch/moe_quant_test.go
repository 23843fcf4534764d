package arch_test

import (
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// QuantMoECases are testdata/moe/gen.sh's files: arch2's qwen3moe
// quantized by llama-quantize, with llama.cpp's logits on each, and the
// block types their experts keep (gate, up, down of layers 0 and 1).
var QuantMoECases = []struct {
	Name    string
	Experts [2][3]tensors.DType
	// DynamicTol holds the CPU's dynamic math: 1e-4 where every product
	// quantizes its activations as llama.cpp does; Q5_0's prefill tiles
	// run exactly (cpu's dynamicPrefill), so the prompt's logits and
	// cached keys and values carry f32 activations (measured 2.0e-2).
	DynamicTol float64
}{
	{"qwen3moe-q8_0", [2][3]tensors.DType{{tensors.Q8_0, tensors.Q8_0, tensors.Q8_0}, {tensors.Q8_0, tensors.Q8_0, tensors.Q8_0}}, 1e-4},
	{"qwen3moe-q4_k_m", [2][3]tensors.DType{{tensors.Q5_0, tensors.Q5_0, tensors.Q5_0}, {tensors.Q5_0, tensors.Q5_0, tensors.Q8_0}}, quantMoETol},
}

// llama.cpp quantizes each product's activations to 8 bits for these
// weights. Dynamic math does too (in another summation order) and is held
// to DynamicTol with every greedy id; exact math, which keeps
// the activations in f32 as the GPU backends do, to quantMoETol (measured
// 3.0e-2 on logits of about ±0.5; a weight decoded one byte off moves
// them by more than 0.1).
const quantMoETol = 5e-2

// TestQuantizedMoEGoldens runs the quantized qwen3moe files on the CPU
// backend in both arithmetics against llama.cpp: experts of llama.cpp's
// block types (Q8_0 kept in its blocks, Q5_0, and the two mixed in one
// layer) through the router and the selected experts' products. The
// files' expert types are checked first, so a converter that changed them
// would not pass unnoticed.
func TestQuantizedMoEGoldens(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "moe")
	for _, tc := range QuantMoECases {
		ck, err := gguf.Load(filepath.Join(dir, tc.Name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		for l, types := range tc.Experts {
			for i, n := range []string{model.ExpertsGate, model.ExpertsUp, model.ExpertsDown} {
				if got := ck.Tensor(model.Layer(l, n)); got == nil || got.DType != types[i] {
					t.Fatalf("%s: layer %d %s is not %s", tc.Name, l, n, types[i])
				}
			}
		}
		var g testmodels.ArchGolden
		testmodels.DecodeJSON(t, filepath.Join(dir, tc.Name+".golden.json"), &g)
		for _, m := range []struct {
			name  string
			math  cpu.Math
			tol   float64
			exact bool
		}{{"exact", cpu.MathExact, quantMoETol, false}, {"dynamic", cpu.MathDynamic, tc.DynamicTol, true}} {
			for _, fused := range []bool{false, true} {
				sub := tc.Name + "/" + m.name
				if fused {
					sub += "/fused"
				}
				t.Run(sub, func(t *testing.T) {
					ck, err := gguf.Load(filepath.Join(dir, tc.Name+".gguf"))
					if err != nil {
						t.Fatal(err)
					}
					checkCheckpointMath(t, sub, ck, g, m.tol, m.exact, fused, nil, m.math)
				})
			}
		}
	}
}
