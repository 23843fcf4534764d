package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

// TestUnpackedPrefillBits: a long prefill product of f16 and bf16 weights
// (where the CPU has no f32 GEMM, the weight rows unpacked to f32 a chunk
// at a time and met by the tokens a block at a time) gives its first
// tokens exactly the bits of a short prefill of the same tokens (rows
// unpacked a tile at a time, every token against each tile), for a row
// count that fills no tile and one or two threads.
func TestUnpackedPrefillBits(t *testing.T) {
	const rows, cols, long, short = 37, 96, 300, 12
	rng := rand.New(rand.NewPCG(5, 6))
	for _, wt := range []weightType{{"f16", tensors.F16, 0}, {"bf16", tensors.BF16, 0}} {
		w := storeAs(t, "w", rows, cols, wt, rng)
		x := f32Tensor(t, "x", []int{long, cols}, randVals(rng, long*cols, 1))
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads=%d", wt.name, threads), func(t *testing.T) {
				got := dynamicProduct(t, long, rows, cols, []*tensors.Tensor{w, x}, threads).run(t, seq(long), 0)
				want := dynamicProduct(t, short, rows, cols, []*tensors.Tensor{w, x}, threads).run(t, seq(short), 0)
				for i, v := range want {
					if math.Float32bits(got[i]) != math.Float32bits(v) {
						t.Fatalf("token %d row %d: %v in the long prefill, %v in the short", i/rows, i%rows, got[i], v)
					}
				}
			})
		}
	}
}
