package tensors

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeBlocks dequantizes one 2048-element row of each block type.
func BenchmarkDecodeBlocks(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dt := range blockTypes {
		src := randomBlocks(rng, dt, 2048/dt.BlockLen(), false)
		dst := make([]float32, 2048)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				DecodeBlocks(dt, src, dst)
			}
		})
	}
}
