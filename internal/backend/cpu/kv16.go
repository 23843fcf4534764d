package cpu

import (
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/tensors"
)

// maxHalf is the largest finite binary16 value. The f16 cache saturates to
// it rather than storing an infinity, as the GPU kernels must (WGSL leaves
// packing an out-of-range value indeterminate), so both backends agree.
const maxHalf = 65504

// storeF16 rounds src to binary16 (nearest, ties to even) into dst,
// saturating at ±maxHalf.
func storeF16(dst []uint16, src []float32) {
	for i, x := range src[:len(dst)] {
		dst[i] = tensors.F16Bits(min(max(x, -maxHalf), maxHalf))
	}
}

// keyDot is q · K[off : off+len(q)] from either cache type.
func (c *layerCache) keyDot(q []float32, off int) float32 {
	if c.k16 != nil {
		return simd.DotF16(c.k16[off:off+len(q)], q)
	}
	return simd.DotF32(q, c.k[off:off+len(q)])
}

// weightedValues sets o = Σ_i w[i] * V[off+i*stride : off+i*stride+len(o)]
// from any cache type: a quantized one's rows dequantized valueRun at a
// time into the thread's scratch sc (growValues) and summed there.
func (c *layerCache) weightedValues(o, w []float32, off, stride int, sc *scratch) {
	if c.vq != nil {
		hd := len(o)
		sc.growValues(hd)
		clear(o)
		for i := 0; i < len(w); i += valueRun {
			n := min(valueRun, len(w)-i)
			rows := sc.vrows[:n*hd]
			dequantRows(c.vt, c.vq, off+i*stride, stride, n, hd, rows)
			part := sc.vsum[:hd]
			simd.WeightedSum(part, rows, hd, w[i:i+n])
			for j, x := range part {
				o[j] += x
			}
		}
		return
	}
	if c.v16 != nil {
		simd.WeightedSumF16(o, c.v16[off:], stride, w)
		return
	}
	simd.WeightedSum(o, c.v[off:], stride, w)
}
