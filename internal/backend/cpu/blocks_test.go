package cpu_test

import (
	"math"
	"testing"

	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/tensors"
)

// TestBlockTypesEqualDecodedF32 runs every block-type case (llama.cpp's
// Q2_K ... Q6_K, Q4_1, Q5_0, Q5_1 weights, kept as blocks) and the same graph with each block
// tensor replaced by its f32 dequantization: the CPU backend dots block
// rows exactly as f32 rows, so a quantized GGUF and the F32 file llama.cpp
// dequantizes it to give bit-identical results.
func TestBlockTypesEqualDecodedF32(t *testing.T) {
	for _, c := range conformance.BlockCases() {
		t.Run(c.Name, func(t *testing.T) {
			g, ws := c.Build()
			var f32ws []*tensors.Tensor
			blocks := 0
			for _, w := range ws {
				if w.DType.Block() {
					blocks++
					vals, err := w.Float32()
					if err != nil {
						t.Fatal(err)
					}
					w = f32Tensor(t, w.Name, w.Shape, vals)
				}
				f32ws = append(f32ws, w)
			}
			if blocks == 0 {
				t.Fatal("case without block weights")
			}
			for _, threads := range []int{1, 2} {
				q, f := compile(t, g, ws, threads), compile(t, g, f32ws, threads)
				for si, s := range c.Steps {
					got, want := q.run(t, s.Tokens, s.Pos), f.run(t, s.Tokens, s.Pos)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("threads %d step %d value %d: blocks %v, f32 %v", threads, si, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}
