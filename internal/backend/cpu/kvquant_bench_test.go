package cpu

import (
	"testing"

	"github.com/gpurun/gpurun/fusion"
)

// BenchmarkKVQuantAttention times the two halves of attention over 512
// cached positions of one head of 64 values: the key scores (scoreRows)
// and the weighted value sum (weightedValues), per quantized type, beside
// the f32 cache's value sum (simd.WeightedSum).
func BenchmarkKVQuantAttention(b *testing.B) {
	const hd, n = 64, 512
	var sc scratch
	x := make([]float32, hd*n)
	for i := range x {
		x[i] = float32(i%17) - 8
	}
	for _, t := range []fusion.KVType{fusion.KVQ8_0, fusion.KVQ4_0, fusion.KVQ5_0} {
		k := make([]byte, n*hd/qk*t.BlockBytes())
		quantizeBlocks(t, k, x)
		qq := q8Query{q: make([]int8, hd), d: make([]float32, 2), s: make([]float32, 2)}
		qq.quantize(x[:hd], false)
		out := make([]float32, n)
		b.Run("score-"+t.String(), func(b *testing.B) {
			for b.Loop() {
				scoreRows(t, k, hd, &qq, out)
			}
		})
		c := &layerCache{vq: k, vt: t}
		o := make([]float32, hd)
		b.Run("values-"+t.String(), func(b *testing.B) {
			for b.Loop() {
				c.weightedValues(o, out, 0, hd, &sc)
			}
		})
	}
	kf := &layerCache{v: x}
	o := make([]float32, hd)
	w := make([]float32, n)
	b.Run("values-f32", func(b *testing.B) {
		for b.Loop() {
			kf.weightedValues(o, w, 0, hd, &sc)
		}
	})
}
