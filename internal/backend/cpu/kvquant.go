package cpu

import (
	"encoding/binary"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/tensors"
)

// Quantized caches (fusion.KVType): keys and values stored in llama.cpp's
// blocks of 32, quantized as its CPU backend's stores do (from_float:
// quantize_row_*_ref, and for q8_0 the x86 quantize_row_q8_0; the same
// float32 operations in the same order, so the blocks are bit for bit
// llama.cpp's), and read by attention without a dequantized copy: a key's
// score is the block dot product with the query quantized to q8_0 (q8_1),
// a value row is dequantized one block at a time into the weighted sum.

const qk = fusion.KVBlock

// kvalues_iq4nl: the 16 levels of IQ4_NL (llama.cpp's ggml-common.h).
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, tensors.F16Bits(f)) }

func getF16(b []byte) float32 { return simd.F16ToF32[binary.LittleEndian.Uint16(b)] }

// truncU8 is C's (int8_t) conversion of a float in range, then to uint8_t
// (truncation toward zero).
func truncI8(f float32) int { return int(int8(int32(f))) }

// quantizeBlocks quantizes src (a multiple of 32 values) into dst as
// blocks of t, as llama.cpp's CPU backend stores them.
func quantizeBlocks(t fusion.KVType, dst []byte, src []float32) {
	bs := t.BlockBytes()
	for i := 0; i+qk <= len(src); i += qk {
		quantizeBlock(t, dst[i/qk*bs:(i/qk+1)*bs], src[i:i+qk])
	}
}

func quantizeBlock(t fusion.KVType, y []byte, x []float32) {
	switch t {
	case fusion.KVQ8_0:
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		// llama.cpp's CPU stores q8_0 with its from_float,
		// quantize_row_q8_0: on x86 (AVX) id = 127/amax and halves
		// rounded to even, where quantize_row_q8_0_ref takes 1/d and
		// rounds them away from zero.
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		putF16(y, d)
		for j, v := range x {
			y[2+j] = byte(int8(math.RoundToEven(float64(v * id))))
		}
	case fusion.KVQ4_0, fusion.KVQ5_0:
		var amax, mx float32
		for _, v := range x {
			if amax < abs32(v) {
				amax, mx = abs32(v), v
			}
		}
		levels, qs := float32(-8), y[2:18]
		if t == fusion.KVQ5_0 {
			levels, qs = -16, y[6:22]
		}
		d := mx / levels
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(y, d)
		var qh uint32
		for j := range qk / 2 {
			x0, x1 := x[j]*id, x[j+qk/2]*id
			if t == fusion.KVQ4_0 {
				qs[j] = byte(min(15, truncI8(x0+8.5)) | min(15, truncI8(x1+8.5))<<4)
				continue
			}
			a, b := min(31, truncI8(x0+16.5)), min(31, truncI8(x1+16.5))
			qs[j] = byte(a&15 | (b&15)<<4)
			qh |= uint32(a>>4&1)<<j | uint32(b>>4&1)<<(j+qk/2)
		}
		if t == fusion.KVQ5_0 {
			binary.LittleEndian.PutUint32(y[2:], qh)
		}
	case fusion.KVQ4_1, fusion.KVQ5_1:
		lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		levels, qs := float32(15), y[4:20]
		if t == fusion.KVQ5_1 {
			levels, qs = 31, y[8:24]
		}
		d := (hi - lo) / levels
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(y, d)
		putF16(y[2:], lo)
		var qh uint32
		for j := range qk / 2 {
			x0, x1 := (x[j]-lo)*id, (x[j+qk/2]-lo)*id
			if t == fusion.KVQ4_1 {
				qs[j] = byte(min(15, truncI8(x0+0.5)) | min(15, truncI8(x1+0.5))<<4)
				continue
			}
			a, b := int(uint8(int32(x0+0.5))), int(uint8(int32(x1+0.5)))
			qs[j] = byte(a&15 | (b&15)<<4)
			qh |= uint32(a>>4&1)<<j | uint32(b>>4&1)<<(j+qk/2)
		}
		if t == fusion.KVQ5_1 {
			binary.LittleEndian.PutUint32(y[4:], qh)
		}
	case fusion.KVIQ4NL:
		quantizeIQ4NL(y, x)
	}
}

// quantizeIQ4NL is llama.cpp's quantize_row_iq4_nl_ref for one block
// (quantize_row_iq4_nl_impl with one block of 32, no importance weights
// and ntry -1): the levels nearest x/d for d = max/values[0], then the
// scale refit by least squares weighted by x².
func quantizeIQ4NL(y []byte, x []float32) {
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	var l [qk]uint8
	var scale float32
	if amax >= 1e-15 {
		d := mx / float32(iq4nlValues[0])
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range x {
			k := bestIndexIQ4(id * v)
			l[j] = uint8(k)
			q := float32(iq4nlValues[k])
			w := v * v
			sumqx += w * q * v
			sumq2 += w * q * q
		}
		if sumq2 > 0 {
			scale = sumqx / sumq2
		}
	}
	putF16(y, scale)
	for j := range qk / 2 {
		y[2+j] = l[j] | l[j+qk/2]<<4
	}
}

// bestIndexIQ4 is llama.cpp's best_index_int8 over the IQ4_NL levels.
func bestIndexIQ4(x float32) int {
	v := &iq4nlValues
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(v[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(v[mu-1]) < float32(v[mu])-x {
		return mu - 1
	}
	return mu
}

// dequantBlock writes the 32 values of block b of type t into y, as
// llama.cpp's dequantize_row_* does.
func dequantBlock(t fusion.KVType, b []byte, y []float32) {
	y = y[:qk]
	d := getF16(b)
	switch t {
	case fusion.KVQ8_0:
		for j := range qk {
			y[j] = float32(int8(b[2+j])) * d
		}
	case fusion.KVQ4_0:
		for j, q := range b[2:18] {
			y[j] = float32(int(q&15)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	case fusion.KVQ4_1:
		m := getF16(b[2:])
		for j, q := range b[4:20] {
			y[j] = float32(q&15)*d + m
			y[j+16] = float32(q>>4)*d + m
		}
	case fusion.KVQ5_0:
		qh := binary.LittleEndian.Uint32(b[2:])
		for j, q := range b[6:22] {
			y[j] = float32(int(q&15|byte(qh>>j&1)<<4)-16) * d
			y[j+16] = float32(int(q>>4|byte(qh>>(j+16)&1)<<4)-16) * d
		}
	case fusion.KVQ5_1:
		m := getF16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j, q := range b[8:24] {
			y[j] = float32(q&15|byte(qh>>j&1)<<4)*d + m
			y[j+16] = float32(q>>4|byte(qh>>(j+16)&1)<<4)*d + m
		}
	case fusion.KVIQ4NL:
		for j, q := range b[2:18] {
			y[j] = d * float32(iq4nlValues[q&15])
			y[j+16] = d * float32(iq4nlValues[q>>4])
		}
	}
}

// q8Query is a query row quantized to q8_0 blocks as llama.cpp's CPU
// flash attention quantizes it for quantized keys (its from_float of the
// key type's vec_dot_type: q8_0, or q8_1 for q4_1 and q5_1, whose block
// sums the kernels take from q): simd.QuantizeQ8, d = f16(amax/127), q =
// round-half-even(x*127/amax), as llama.cpp's x86 quantize_row_q8_0.
type q8Query struct {
	q    []int8
	d, s []float32 // s: q8_1's block sums (quantize with sums)
	// q4_0 keys gathered for simd.DotQ4 (scoreRowsQ4_0): nibbles and
	// scales.
	nib []byte
	ws  []uint16
}

// quantize quantizes x; with sums (keys of q4_1 or q5_1) it also sets each
// block's s = f16(amax/127 * Σq) as llama.cpp's x86 quantize_row_q8_1
// does (amax/127 unrounded there).
func (qq *q8Query) quantize(x []float32, sums bool) {
	simd.QuantizeQ8(qq.q, qq.d, x, false)
	if !sums {
		return
	}
	for b := range len(x) / qk {
		var amax float32
		var sq int32
		for j, v := range x[b*qk : (b+1)*qk] {
			amax = max(amax, abs32(v))
			sq += int32(qq.q[b*qk+j])
		}
		qq.s[b] = simd.F16ToF32[tensors.F16Bits(amax/127*float32(sq))]
	}
}

// sumsQ8 reports whether keys of type t are dotted with q8_1 queries.
func sumsQ8(t fusion.KVType) bool { return t == fusion.KVQ4_1 || t == fusion.KVQ5_1 }

// q32Kinds maps the key types simd's 32-value block kernels read in their
// GGUF layout (simd.Q32); the others are summed here (dotBlocks).
var q32Kinds = map[fusion.KVType]simd.Q32{fusion.KVQ8_0: simd.Q8_0, fusion.KVQ5_0: simd.Q5_0}

// scoreRows sets out[i] to the score of key row i of k (consecutive rows
// of hd values, blocks of t) with the quantized query: per block
// d_k*d_q*Σ k_j q_j (+ m_k*s_q for the _1 types, s_q = f16(d_q*Σ q_j):
// llama.cpp's q8_1 block sum), as llama.cpp's ggml_vec_dot_*_q8_* sums
// them.
func scoreRows(t fusion.KVType, k []byte, hd int, qq *q8Query, out []float32) {
	nb := hd / qk
	if st, ok := q32Kinds[t]; ok {
		simd.DotQ32Rows(st, k, qq.q[:hd], qq.d[:nb], out)
		return
	}
	if t == fusion.KVQ4_0 {
		scoreRowsQ4_0(k, hd, qq, out)
		return
	}
	run := nb * t.BlockBytes()
	for i := range out {
		out[i] = dotBlocks(t, k[i*run:(i+1)*run], qq)
	}
}

// dotBlocks is scoreRows of one row of q4_0, q4_1, q5_1 or iq4_nl
// blocks.
func dotBlocks(t fusion.KVType, k []byte, qq *q8Query) float32 {
	bs := t.BlockBytes()
	var sum float32
	for b := 0; b < len(k)/bs; b++ {
		kb, q := k[b*bs:(b+1)*bs], qq.q[b*qk:(b+1)*qk]
		var si int32
		switch t {
		case fusion.KVIQ4NL:
			for j, v := range kb[2:18] {
				si += int32(iq4nlValues[v&15])*int32(q[j]) + int32(iq4nlValues[v>>4])*int32(q[j+16])
			}
		case fusion.KVQ4_0:
			// Σ (n-8)·q = Σ n·q - 8·Σ q, the nibbles n unsigned.
			k4, q0, q1 := (*[16]byte)(kb[2:]), (*[16]int8)(q), (*[16]int8)(q[16:])
			var sq int32
			for j, v := range k4 {
				a, b := int32(q0[j]), int32(q1[j])
				si += int32(v&15)*a + int32(v>>4)*b
				sq += a + b
			}
			si -= 8 * sq
		case fusion.KVQ4_1, fusion.KVQ5_1:
			if t == fusion.KVQ4_1 {
				for j, v := range kb[4:20] {
					si += int32(v&15)*int32(q[j]) + int32(v>>4)*int32(q[j+16])
				}
			} else {
				qh := binary.LittleEndian.Uint32(kb[4:])
				for j, v := range kb[8:24] {
					si += int32(v&15|byte(qh>>j&1)<<4)*int32(q[j]) + int32(v>>4|byte(qh>>(j+16)&1)<<4)*int32(q[j+16])
				}
			}
			sum += getF16(kb)*qq.d[b]*float32(si) + getF16(kb[2:])*qq.s[b]
			continue
		}
		sum += getF16(kb) * qq.d[b] * float32(si)
	}
	return sum
}

// hadamard multiplies every run of n values of x (n a power of two, len(x)
// a multiple of it) by the orthonormal Walsh-Hadamard matrix H_n/sqrt(n),
// in place: llama.cpp's ggml_gen_hadamard matrix (Sylvester's
// construction, H_2n = [[H, H], [H, -H]]), symmetric and its own inverse,
// computed as llama.cpp's CPU backend computes that product
// (ggml_compute_forward_fwht): each value scaled by float32 1/sqrtf(n)
// first, then the butterflies (a+b, a-b) over strides 1, 2, 4, ..., the
// same float operations, so the same bits.
func hadamard(x []float32, n int) {
	scale := 1 / float32(math.Sqrt(float64(n)))
	for r := 0; r+n <= len(x); r += n {
		v := x[r : r+n]
		for i := range v {
			v[i] *= scale
		}
		for h := 1; h < n; h *= 2 {
			for i := 0; i < n; i += 2 * h {
				for j := i; j < i+h; j++ {
					a, b := v[j], v[j+h]
					v[j], v[j+h] = a+b, a-b
				}
			}
		}
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
