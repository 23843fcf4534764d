package simd

import (
	"encoding/binary"

	"github.com/gpurun/gpurun/tensors"
)

// The grid I-quants against QuantizeQ8K activations. Their values are
// entries of llama.cpp's lookup grids (tensors' tables, generated from
// ggml-common.h), a sign bit per value and a scale per sub-block of 32;
// as for the K-quants every sub-block sum is an exact integer, the scales
// apply to integers, and each block adds float32(d*dx*Σ) to the float32
// result in every implementation: all of them give the same bits.

// iqWords returns tensors' table name as words.
func iqWords(name string) []uint32 {
	for _, t := range tensors.IQGrids() {
		if t.Name == name {
			return t.Words
		}
	}
	panic("simd: no I-quant table " + name)
}

// iq3sGrid is llama.cpp's iq3s_grid: 512 entries of four unsigned bytes;
// iq3xxsGrid its iq3xxs_grid (256 of them); ksignsIQ2XS its ksigns_iq2xs
// (for each 7-bit index the 8 sign bits, the eighth making their parity
// even).
var (
	iq3sGrid   = [512]uint32(iqWords("iq3s_grid"))
	iq3xxsGrid = [256]uint32(iqWords("iq3xxs_grid"))
	iq2xxsGrid = func() (g [256]uint64) {
		w := iqWords("iq2xxs_grid")
		for i := range g {
			g[i] = uint64(w[2*i]) | uint64(w[2*i+1])<<32
		}
		return g
	}()
	ksignsIQ2XS = func() (k [128]uint8) {
		for i, w := range iqWords("ksigns_iq2xs") {
			for j := range 4 {
				k[4*i+j] = uint8(w >> (8 * j))
			}
		}
		return k
	}()
)

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

// dotIQ3XXSGo is IQ3_XXS against Q8_K activations (llama.cpp's
// ggml_vec_dot_iq3_xxs_q8_K, integer for integer): per sub-block of 32 the
// eight grid entries, each group of 8 values signed by the ksigns_iq2xs
// entry of its 7-bit index, meet the activations; the sum is multiplied by
// 2s+1 (s the top 4 bits of the sub-block's word), each block adds
// float32(d*dx*Σ) and the result is a quarter of the sum (llama.cpp's
// order: dequantized, a value is d*(0.5+s)*0.5 times its grid value).
func dotIQ3XXSGo(w []byte, x []int8, xd []float32, _ []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[98]byte)(w[i*98:])
		xb := (*[QK]int8)(x[i*QK:])
		var sumi int32
		for ib := range 8 {
			aux := binary.LittleEndian.Uint32(b[66+4*ib:])
			xs := (*[32]int8)(xb[32*ib:])
			var sub int32
			for k := range 8 {
				g := iq3xxsGrid[b[2+8*ib+k]]
				sg := ksignsIQ2XS[aux>>(7*(k/2))&127] >> (4 * (k % 2))
				for j := range 4 {
					v := int32(uint8(g >> (8 * j)))
					if sg>>j&1 != 0 {
						v = -v
					}
					sub += v * int32(xs[4*k+j])
				}
			}
			sumi += (2*int32(aux>>28) + 1) * sub
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return 0.25 * s
}

// dotIQ2XXSGo is IQ2_XXS against Q8_K activations (llama.cpp's
// ggml_vec_dot_iq2_xxs_q8_K, integer for integer): per sub-block of 32 the
// four 8-value entries of iq2xxs_grid, each signed by the ksigns_iq2xs
// entry of its 7-bit index, meet the activations; the sum is multiplied by
// 2s+1 (s the top 4 bits of the sub-block's second word), each block adds
// float32(d*dx*Σ) and the result is an eighth of the sum.
func dotIQ2XXSGo(w []byte, x []int8, xd []float32, _ []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[66]byte)(w[i*66:])
		xb := (*[QK]int8)(x[i*QK:])
		var sumi int32
		for ib := range 8 {
			aux := binary.LittleEndian.Uint32(b[6+8*ib:])
			xs := (*[32]int8)(xb[32*ib:])
			var sub int32
			for l := range 4 {
				g := iq2xxsGrid[b[2+8*ib+l]]
				sg := ksignsIQ2XS[aux>>(7*l)&127]
				for j := range 8 {
					v := int32(uint8(g >> (8 * j)))
					if sg>>j&1 != 0 {
						v = -v
					}
					sub += v * int32(xs[8*l+j])
				}
			}
			sumi += (2*int32(aux>>28) + 1) * sub
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return 0.125 * s
}
