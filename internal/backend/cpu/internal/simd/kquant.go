package simd

import "encoding/binary"

// The K-quant kernels: dot products of weight rows stored in llama.cpp's
// K-quant blocks (256 values per block, sub-blocks of 16 or 32 values with
// their own scales and, for some types, mins), kept in their GGUF byte
// layout, with activations quantized once per product by QuantizeQ8K
// (llama.cpp's Q8_K: one f32 scale and 256 int8 values per block, plus the
// sum of every 16 values for the types whose values carry an offset).
// Within a block every product is an exact integer sum; the sub-block
// scales and mins are applied to integer sums, and each block adds
//
//	float32(dw*dx * Σ_s sc_s Σ q·x) - float32(dminw*dx * Σ_s m_s Σ x)
//
// to the float32 result, in that order, in every implementation: all of
// them give the same bits.

// QK is the number of values of one K-quant block and of one QuantizeQ8K
// block; QKSum the number of activations each of QuantizeQ8K's sums covers.
const (
	QK    = 256
	QKSum = 16
)

// KQuant is one of llama.cpp's K-quant block types (tensors' Q4K ... Q3K;
// the layouts are documented in tensors/blocks.go).
type KQuant int

const (
	Q4K    KQuant = iota // 144 bytes: d, dmin, 12 bytes of 6-bit scales and mins, 4-bit values
	Q5K                  // 176 bytes: Q4K with a fifth bit per value
	Q6K                  // 210 bytes: 6-bit values, 16 int8 scales, d
	Q2K                  // 84 bytes: 4-bit scales and mins, 2-bit values, d, dmin
	Q3K                  // 110 bytes: high bits, 2-bit values, 6-bit scales, d
	IQ4XS                // 136 bytes: d, 6-bit scales per 32 (offset 32), 4-bit codes of IQ4NLValues
	IQ3S                 // 110 bytes: d, 8-bit grid indices, their ninth bits, sign bits, 4-bit scales
	IQ3XXS               // 98 bytes: d, 8-bit grid indices, per 32 four 7-bit sign indices and a 4-bit scale
	IQ2XXS               // 66 bytes: d, per 32 four 8-bit grid indices, four 7-bit sign indices and a 4-bit scale
	NumKQuant
)

var kquantInfo = [NumKQuant]struct {
	name  string
	bytes int
}{{"q4_k", 144}, {"q5_k", 176}, {"q6_k", 210}, {"q2_k", 84}, {"q3_k", 110}, {"iq4_xs", 136}, {"iq3_s", 110}, {"iq3_xxs", 98}, {"iq2_xxs", 66}}

func (t KQuant) String() string { return kquantInfo[t].name }

// BlockBytes is the size of one block of t.
func (t KQuant) BlockBytes() int { return kquantInfo[t].bytes }

// QuantizeQ8K quantizes x (a multiple of QK long) the way llama.cpp makes
// its Q8_K activation blocks: per block of QK values, with v the value of
// largest magnitude (the first one), iscale = -127/v, q = round-half-even
// (x*iscale) within [-127, 127], d = 1/iscale (an all-zero block: d = 0, q
// = 0); sums[s] is the sum of q over values [QKSum*s, QKSum*(s+1)).
func QuantizeQ8K(q []int8, d []float32, sums []int16, x []float32) {
	nb := len(x) / QK
	q, d, sums = q[:nb*QK], d[:nb], sums[:nb*QK/QKSum]
	if k := best; k.quantQ8K != nil && nb > 0 {
		k.quantQ8K(q, d, sums, x[:nb*QK])
		return
	}
	for b := range nb {
		quantizeQ8KBlock(q[b*QK:], &d[b], sums[b*QK/QKSum:], x[b*QK:])
	}
}

// quantizeQ8KBlock is QuantizeQ8K of the block at x.
func quantizeQ8KBlock(q []int8, d *float32, sums []int16, x []float32) {
	xb := (*[QK]float32)(x)
	qb := (*[QK]int8)(q)
	sb := (*[QK / QKSum]int16)(sums)
	var amax, vmax float32
	for _, v := range xb {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax == 0 {
		clear(qb[:])
		clear(sb[:])
		*d = 0
		return
	}
	iscale := -127 / vmax
	for i, v := range xb {
		qb[i] = q8(iscale * v)
	}
	*d = 1 / iscale
	blockSums16(sb, qb)
}

// blockSums16 sets sb[s] to the sum of qb's values [QKSum*s, QKSum*(s+1)).
func blockSums16(sb *[QK / QKSum]int16, qb *[QK]int8) {
	for s := range sb {
		var sum int16
		for _, v := range qb[QKSum*s : QKSum*(s+1)] {
			sum += int16(v)
		}
		sb[s] = sum
	}
}

// DotK returns the dot product of the weight row w (len(xd) blocks of type
// t) with activations quantized by QuantizeQ8K: x (len(xd)*QK values), xd
// and xs (len(xd)*QK/QKSum sums).
func (k *Impl) DotK(t KQuant, w []byte, x []int8, xd []float32, xs []int16) float32 {
	nb := len(xd)
	w, x, xs = w[:nb*t.BlockBytes()], x[:nb*QK], xs[:nb*QK/QKSum]
	return k.kernelK(t)(w, x, xd, xs)
}

// DotKRows sets out[i] = DotK(t, row i, x, xd, xs) for i < len(out): the
// rows consecutive in w, each len(xd) blocks.
func (k *Impl) DotKRows(t KQuant, w []byte, x []int8, xd []float32, xs []int16, out []float32) {
	nb := len(xd)
	rb := nb * t.BlockBytes()
	w, x, xs = w[:len(out)*rb], x[:nb*QK], xs[:nb*QK/QKSum]
	if f := k.dotKRows[t]; f != nil {
		f(w, x, xd, xs, out)
		return
	}
	f := k.kernelK(t)
	for i := range out {
		out[i] = f(w[i*rb:(i+1)*rb], x, xd, xs)
	}
}

// DotKx4 sets out[j] = DotK(t, w, x[j*xstride:], xd[j*xstride/QK:],
// xs[j*xstride/QKSum:]) for j < 4 (xstride a multiple of QK): one weight
// row against four token rows.
func (k *Impl) DotKx4(t KQuant, w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32) {
	nb := len(w) / t.BlockBytes()
	n := nb * QK
	_, _, _ = x[3*xstride+n-1], xd[(3*xstride+n)/QK-1], xs[(3*xstride+n)/QKSum-1]
	if f := k.dotKx4[t]; f != nil {
		f(w[:nb*t.BlockBytes()], x, xd, xs, xstride, out)
		return
	}
	f := k.kernelK(t)
	for j := range out {
		o := j * xstride
		out[j] = f(w[:nb*t.BlockBytes()], x[o:o+n], xd[o/QK:(o+n)/QK], xs[o/QKSum:(o+n)/QKSum])
	}
}

// HasKx4 reports whether the fastest implementation has a four-token
// kernel for t (DotKx4 otherwise loops over the one-token kernel).
func HasKx4(t KQuant) bool { return best.dotKx4[t] != nil }

// HasKRows reports whether the fastest implementation has a several-rows
// kernel for t (DotKRows otherwise loops over the one-row kernel).
func HasKRows(t KQuant) bool { return best.dotKRows[t] != nil }

// kernelK is k's kernel for t, or the pure-Go one where k has none.
func (k *Impl) kernelK(t KQuant) func(w []byte, x []int8, xd []float32, xs []int16) float32 {
	if f := k.dotK[t]; f != nil {
		return f
	}
	return kernelsKGo[t]
}

// The package-level forms run the fastest implementation.

func DotK(t KQuant, w []byte, x []int8, xd []float32, xs []int16) float32 {
	return best.DotK(t, w, x, xd, xs)
}
func DotKRows(t KQuant, w []byte, x []int8, xd []float32, xs []int16, out []float32) {
	best.DotKRows(t, w, x, xd, xs, out)
}
func DotKx4(t KQuant, w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32) {
	best.DotKx4(t, w, x, xd, xs, xstride, out)
}

var kernelsKGo = [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16) float32{
	Q4K: dotQ4KGo, Q5K: dotQ5KGo, Q6K: dotQ6KGo, Q2K: dotQ2KGo, Q3K: dotQ3KGo, IQ4XS: dotIQ4XSGo,
	IQ3S: dotIQ3SGo, IQ3XXS: dotIQ3XXSGo, IQ2XXS: dotIQ2XXSGo,
}

func f16Scale(b []byte) float32 { return F16ToF32[binary.LittleEndian.Uint16(b)] }

// scaleMinK unpacks the eight 6-bit scales and mins of a Q4K or Q5K block
// (tensors' sixScaleMin for every sub-block at once).
func scaleMinK(s *[12]byte) (sc, m [8]int32) {
	for j := range 4 {
		sc[j], m[j] = int32(s[j]&63), int32(s[j+4]&63)
		sc[j+4] = int32(s[j+8]&0xf | s[j]>>6<<4)
		m[j+4] = int32(s[j+8]>>4 | s[j+4]>>6<<4)
	}
	return sc, m
}

// blockSum adds one block's contribution in the order every implementation
// uses.
func blockSum(s, d, dmin float32, sumi, summ int32) float32 {
	return s + (float32(d*float32(sumi)) - float32(dmin*float32(summ)))
}

func dotQ4KGo(w []byte, x []int8, xd []float32, xs []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[144]byte)(w[i*144:])
		xb := (*[QK]int8)(x[i*QK:])
		bs := (*[QK / QKSum]int16)(xs[i*QK/QKSum:])
		sc, m := scaleMinK((*[12]byte)(b[4:]))
		var sumi, summ int32
		for g := range 4 {
			q := (*[32]byte)(b[16+32*g:])
			lo, hi := (*[32]int8)(xb[64*g:]), (*[32]int8)(xb[64*g+32:])
			var p1, p2 int32
			for l, c := range q {
				p1 += int32(c&0xf) * int32(lo[l])
				p2 += int32(c>>4) * int32(hi[l])
			}
			sumi += sc[2*g]*p1 + sc[2*g+1]*p2
			summ += m[2*g]*int32(bs[4*g]+bs[4*g+1]) + m[2*g+1]*int32(bs[4*g+2]+bs[4*g+3])
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), float32(f16Scale(b[2:])*dx), sumi, summ)
	}
	return s
}

func dotQ5KGo(w []byte, x []int8, xd []float32, xs []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[176]byte)(w[i*176:])
		xb := (*[QK]int8)(x[i*QK:])
		bs := (*[QK / QKSum]int16)(xs[i*QK/QKSum:])
		sc, m := scaleMinK((*[12]byte)(b[4:]))
		qh := (*[32]byte)(b[16:])
		var sumi, summ int32
		for g := range 4 {
			q := (*[32]byte)(b[48+32*g:])
			lo, hi := (*[32]int8)(xb[64*g:]), (*[32]int8)(xb[64*g+32:])
			var p1, p2 int32
			for l, c := range q {
				h := qh[l] >> (2 * g)
				p1 += int32(c&0xf|(h&1)<<4) * int32(lo[l])
				p2 += int32(c>>4|(h>>1&1)<<4) * int32(hi[l])
			}
			sumi += sc[2*g]*p1 + sc[2*g+1]*p2
			summ += m[2*g]*int32(bs[4*g]+bs[4*g+1]) + m[2*g+1]*int32(bs[4*g+2]+bs[4*g+3])
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), float32(f16Scale(b[2:])*dx), sumi, summ)
	}
	return s
}

// dotQ6KGo takes the values unsigned (0..63) and removes the offset of 32
// through the activation sums: Σ (q-32)·x = Σ q·x - 32 Σ x.
func dotQ6KGo(w []byte, x []int8, xd []float32, xs []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[210]byte)(w[i*210:])
		xb := (*[QK]int8)(x[i*QK:])
		bs := (*[QK / QKSum]int16)(xs[i*QK/QKSum:])
		var sumi int32
		for h := range 2 {
			ql0, ql1 := (*[32]byte)(b[64*h:]), (*[32]byte)(b[64*h+32:])
			qh := (*[32]byte)(b[128+32*h:])
			var p [8]int32 // the half's sub-blocks of 16
			for l := range 32 {
				u := l / 16
				bits := qh[l]
				p[u] += int32(ql0[l]&0xf|(bits&3)<<4) * int32(xb[128*h+l])
				p[2+u] += int32(ql1[l]&0xf|(bits>>2&3)<<4) * int32(xb[128*h+32+l])
				p[4+u] += int32(ql0[l]>>4|(bits>>4&3)<<4) * int32(xb[128*h+64+l])
				p[6+u] += int32(ql1[l]>>4|(bits>>6&3)<<4) * int32(xb[128*h+96+l])
			}
			for j, v := range p {
				sumi += int32(int8(b[192+8*h+j])) * (v - 32*int32(bs[8*h+j]))
			}
		}
		s = blockSum(s, float32(f16Scale(b[208:])*dx), 0, sumi, 0)
	}
	return s
}

func dotQ2KGo(w []byte, x []int8, xd []float32, xs []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[84]byte)(w[i*84:])
		xb := (*[QK]int8)(x[i*QK:])
		bs := (*[QK / QKSum]int16)(xs[i*QK/QKSum:])
		var sumi, summ int32
		for h := range 2 {
			for j := range 4 {
				for u := range 2 {
					sub := 8*h + 2*j + u
					q := (*[16]byte)(b[16+32*h+16*u:])
					xv := (*[16]int8)(xb[16*sub:])
					var p int32
					for l, c := range q {
						p += int32(c>>(2*j)&3) * int32(xv[l])
					}
					sumi += int32(b[sub]&0xf) * p
					summ += int32(b[sub]>>4) * int32(bs[sub])
				}
			}
		}
		s = blockSum(s, float32(f16Scale(b[80:])*dx), float32(f16Scale(b[82:])*dx), sumi, summ)
	}
	return s
}

// dotQ3KGo takes the two low bits unsigned and removes 4 where the high bit
// is clear.
func dotQ3KGo(w []byte, x []int8, xd []float32, xs []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[110]byte)(w[i*110:])
		xb := (*[QK]int8)(x[i*QK:])
		hm := (*[32]byte)(b[0:])
		sc := (*[12]byte)(b[96:])
		var sumi int32
		for h := range 2 {
			for j := range 4 {
				bit := byte(1) << (4*h + j)
				for u := range 2 {
					sub := 8*h + 2*j + u
					q := (*[16]byte)(b[32+32*h+16*u:])
					xv := (*[16]int8)(xb[16*sub:])
					var p int32
					for l, c := range q {
						v := int32(c >> (2 * j) & 3)
						if hm[16*u+l]&bit == 0 {
							v -= 4
						}
						p += v * int32(xv[l])
					}
					lo := sc[sub%8] >> (4 * (sub / 8)) & 0xf
					hi := sc[8+sub%4] >> (2 * (sub / 4)) & 3
					sumi += (int32(lo|hi<<4) - 32) * p
				}
			}
		}
		s = blockSum(s, float32(f16Scale(b[108:])*dx), 0, sumi, 0)
	}
	return s
}

// dotIQ4XSGo is IQ4_XS against Q8_K activations: per block the sub-block
// scales ls-32 apply to the exact integer sums Σ iq4nl[q]·x of their 32
// values (as llama.cpp's ggml_vec_dot_iq4_xs_q8_K, whose float sums per
// sub-block this form gathers into one integer per block), and the block
// adds float32(d*dx*Σ).
func dotIQ4XSGo(w []byte, x []int8, xd []float32, _ []int16) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[136]byte)(w[i*136:])
		xb := (*[QK]int8)(x[i*QK:])
		sh := binary.LittleEndian.Uint16(b[2:])
		var sumi int32
		for ib := range 8 {
			ls := int32(b[4+ib/2]>>(4*(ib%2))&0xf) | int32(sh>>(2*ib)&3)<<4
			qs := (*[16]byte)(b[8+16*ib:])
			xs := (*[32]int8)(xb[32*ib:])
			var sub int32
			for j, c := range qs {
				sub += int32(IQ4NLValues[c&0xf])*int32(xs[j]) + int32(IQ4NLValues[c>>4])*int32(xs[j+16])
			}
			sumi += (ls - 32) * sub
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return s
}
