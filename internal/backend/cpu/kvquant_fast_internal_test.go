package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
)

// TestScoreRowsQ4_0 holds the q4_0 key scores through simd.DotQ4
// (scoreRowsQ4_0, gathered runs of 64 rows) to the block sums of
// dotBlocks, which is llama.cpp's ggml_vec_dot_q4_0_q8_0 in scalar form:
// equal within float32 rounding of the sum of blocks, for 150 rows (two
// full runs and a partial one) of head dims 32, 64 and 128.
func TestScoreRowsQ4_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, hd := range []int{32, 64, 128} {
		const n = 150
		x := make([]float32, n*hd)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		k := make([]byte, n*hd/qk*fusion.KVQ4_0.BlockBytes())
		quantizeBlocks(fusion.KVQ4_0, k, x)
		q := make([]float32, hd)
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		qq := q8Query{q: make([]int8, hd), d: make([]float32, hd/qk+1), s: make([]float32, hd/qk+1)}
		qq.quantize(q, false)
		got := make([]float32, n)
		scoreRows(fusion.KVQ4_0, k, hd, &qq, got)
		rb := hd / qk * fusion.KVQ4_0.BlockBytes()
		for i := range got {
			want := dotBlocks(fusion.KVQ4_0, k[i*rb:(i+1)*rb], &qq)
			if d := math.Abs(float64(got[i] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
				t.Fatalf("hd %d row %d: %g, dotBlocks %g", hd, i, got[i], want)
			}
		}
	}
}
