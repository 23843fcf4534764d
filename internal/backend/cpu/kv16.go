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
// from any cache type (a quantized one's rows dequantized block by block).
func (c *layerCache) weightedValues(o, w []float32, off, stride int) {
	if c.vq != nil {
		clear(o)
		bs := c.vt.BlockBytes()
		for i, wi := range w {
			row := c.vq[(off+i*stride)/qk*bs:]
			for b := 0; b < len(o)/qk; b++ {
				addBlock(c.vt, (*[qk]float32)(o[b*qk:]), row[b*bs:], wi)
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
