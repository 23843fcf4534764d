package simd

import "github.com/gpurun/gpurun/tensors"

// The grid I-quants against QuantizeQ8K activations. Their values are
// entries of llama.cpp's lookup grids (tensors' tables, generated from
// ggml-common.h), a sign bit per value and a scale per sub-block of 32;
// as for the K-quants every sub-block sum is an exact integer, the scales
// apply to integers, and each block adds float32(d*dx*Σ) to the float32
// result in every implementation: all of them give the same bits.

// iq3sGrid is llama.cpp's iq3s_grid: 512 entries of four unsigned bytes.
var iq3sGrid = func() (g [512]uint32) {
	for _, t := range tensors.IQGrids() {
		if t.Name == "iq3s_grid" {
			copy(g[:], t.Words)
		}
	}
	return g
}()

// dotIQ3SGo is IQ3_S against Q8_K activations (llama.cpp's
// ggml_vec_dot_iq3_s_q8_K, integer for integer): per sub-block of 32 the
// eight grid entries (index qs | ninth bit from qh), each value negated
// where its sign bit is set, meet the activations; the sum is multiplied
// by the sub-block scale 2*s+1 and the block adds float32(d*dx*Σ).
func dotIQ3SGo(w []byte, x []int8, xd []float32, _ []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[110]byte)(w[i*110:])
		xb := (*[QK]int8)(x[i*QK:])
		var sumi int32
		for ib := range 8 {
			ls := 2*int32(b[106+ib/2]>>(4*(ib%2))&0xf) + 1
			h := int(b[66+ib])
			xs := (*[32]int8)(xb[32*ib:])
			var sub int32
			for k := range 8 {
				g := iq3sGrid[int(b[2+8*ib+k])|h>>k&1<<8]
				sg := b[74+4*ib+k/2] >> (4 * (k % 2))
				for j := range 4 {
					v := int32(uint8(g >> (8 * j)))
					if sg>>j&1 != 0 {
						v = -v
					}
					sub += v * int32(xs[4*k+j])
				}
			}
			sumi += ls * sub
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return s
}
