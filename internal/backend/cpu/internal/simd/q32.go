package simd

import (
	"encoding/binary"
	"math"
)

// The kernels of llama.cpp's 32-value block types (Q4_1, Q5_0, Q5_1:
// K-quant mixes store them where a row is not a multiple of 256 values;
// Q8_0 and MXFP4: stacked experts, which stay mapped, MXFP4 gpt-oss's),
// kept in their GGUF layout, against activations quantized by QuantizeQ8
// in natural order (llama.cpp's Q8_0 blocks; Q8_1's block sums
// are taken inside the kernels). Per block the integer sums Σq·x and Σx
// are exact and the block adds float32(d*dx*Σq·x) + float32(m*dx*Σx) (Q4_1,
// Q5_1), float32(d*dx*Σ(q-16)·x) (Q5_0), float32(d*dx*Σq·x) (Q8_0) or
// float32(d*dx*Σ iq4nl[q]·x) (IQ4_NL, as llama.cpp's
// ggml_vec_dot_iq4_nl_q8_0), float32(float32(dx*h)*Σ fp4[q]·x) (MXFP4, as llama.cpp's
// ggml_vec_dot_mxfp4_q8_0: fp4 the doubled E2M1 values, h half the E8M0
// scale) in every implementation without its own rows kernel (AVX2's Q8_0
// and MXFP4 kernels sum the blocks in vector lanes: Impl.Q32Exact).

// Q32 is one of the 32-value block types.
type Q32 int

const (
	Q4_1   Q32 = iota // 20 bytes: d, m, 16 bytes of nibbles; d*q + m
	Q5_0              // 22 bytes: d, 32 high bits, nibbles; d*(q-16)
	Q5_1              // 24 bytes: d, m, 32 high bits, nibbles; d*q + m
	Q8_0              // 34 bytes: d, 32 int8; d*q
	MXFP4             // 17 bytes: E8M0 exponent e, 16 bytes of E2M1 codes; fp4[q]*h(e)
	IQ4_NL            // 18 bytes: d, 16 bytes of codes; d*iq4nl[q]
	NumQ32
)

var q32Info = [NumQ32]struct {
	name  string
	bytes int
}{{"q4_1", 20}, {"q5_0", 22}, {"q5_1", 24}, {"q8_0", 34}, {"mxfp4", 17}, {"iq4_nl", 18}}

func (t Q32) String() string { return q32Info[t].name }

// BlockBytes is the size of one block of t.
func (t Q32) BlockBytes() int { return q32Info[t].bytes }

// DotQ32 returns the dot product of the weight row w (len(xd) blocks of
// type t) with activations quantized by QuantizeQ8 in natural order (x,
// len(xd)*QBlock values, and xd).
func (k *Impl) DotQ32(t Q32, w []byte, x []int8, xd []float32) float32 {
	nb := len(xd)
	return k.kernelQ32(t)(w[:nb*t.BlockBytes()], x[:nb*QBlock], xd)
}

// DotQ32Rows sets out[i] = DotQ32(t, row i, x, xd) for i < len(out), the
// rows consecutive in w.
func (k *Impl) DotQ32Rows(t Q32, w []byte, x []int8, xd []float32, out []float32) {
	nb := len(xd)
	rb := nb * t.BlockBytes()
	w, x = w[:len(out)*rb], x[:nb*QBlock]
	if f := k.dotQ32Rows[t]; f != nil && len(out) > 0 && nb > 0 {
		f(w, x, xd, out)
		return
	}
	f := k.kernelQ32(t)
	for i := range out {
		out[i] = f(w[i*rb:(i+1)*rb], x, xd)
	}
}

// DotQ32x4 sets out[j] = DotQ32(t, w, x[j*xstride:], xd[j*xstride/QBlock:])
// for j < 4 (xstride a multiple of QBlock).
func (k *Impl) DotQ32x4(t Q32, w []byte, x []int8, xd []float32, xstride int, out *[4]float32) {
	nb := len(w) / t.BlockBytes()
	n := nb * QBlock
	_, _ = x[3*xstride+n-1], xd[(3*xstride+n)/QBlock-1]
	f := k.kernelQ32(t)
	for j := range out {
		o := j * xstride
		out[j] = f(w[:nb*t.BlockBytes()], x[o:o+n], xd[o/QBlock:(o+n)/QBlock])
	}
}

// Q32Exact reports whether k's kernels for t give the Go form's bits.
func (k *Impl) Q32Exact(t Q32) bool { return k.dotQ32Rows[t] == nil }

func (k *Impl) kernelQ32(t Q32) func(w []byte, x []int8, xd []float32) float32 {
	if f := k.dotQ32[t]; f != nil {
		return f
	}
	return kernelsQ32Go[t]
}

func DotQ32(t Q32, w []byte, x []int8, xd []float32) float32 { return best.DotQ32(t, w, x, xd) }
func DotQ32Rows(t Q32, w []byte, x []int8, xd []float32, out []float32) {
	best.DotQ32Rows(t, w, x, xd, out)
}
func DotQ32x4(t Q32, w []byte, x []int8, xd []float32, xstride int, out *[4]float32) {
	best.DotQ32x4(t, w, x, xd, xstride, out)
}

var kernelsQ32Go = [NumQ32]func(w []byte, x []int8, xd []float32) float32{
	Q4_1: dotQ4_1Go, Q5_0: dotQ5_0Go, Q5_1: dotQ5_1Go, Q8_0: dotQ8_0Go, MXFP4: dotMXFP4Go, IQ4_NL: dotIQ4NLGo,
}

// The Go forms add m*dx*Σx as blockSum's "- dmin*dx*(-Σx)", which has the
// same bits (negation is exact).

func dotQ4_1Go(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[20]byte)(w[i*20:])
		xb := (*[QBlock]int8)(x[i*QBlock:])
		var sumi, sumx int32
		for j, c := range (*[16]byte)(b[4:]) {
			sumi += int32(c&0xf)*int32(xb[j]) + int32(c>>4)*int32(xb[j+16])
			sumx += int32(xb[j]) + int32(xb[j+16])
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), float32(f16Scale(b[2:])*dx), sumi, -sumx)
	}
	return s
}

// q5Sums returns Σ q·x and Σ x of one block of nibbles qs with fifth bits
// qh (bit j for element j) and activations xb.
func q5Sums(qs *[16]byte, qh uint32, xb *[QBlock]int8) (sumi, sumx int32) {
	for j, c := range qs {
		lo := int32(c&0xf) | int32(qh>>j&1)<<4
		hi := int32(c>>4) | int32(qh>>(j+16)&1)<<4
		sumi += lo*int32(xb[j]) + hi*int32(xb[j+16])
		sumx += int32(xb[j]) + int32(xb[j+16])
	}
	return sumi, sumx
}

func dotQ5_0Go(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[22]byte)(w[i*22:])
		sumi, sumx := q5Sums((*[16]byte)(b[6:]), binary.LittleEndian.Uint32(b[2:]), (*[QBlock]int8)(x[i*QBlock:]))
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi-16*sumx, 0)
	}
	return s
}

func dotQ5_1Go(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[24]byte)(w[i*24:])
		sumi, sumx := q5Sums((*[16]byte)(b[8:]), binary.LittleEndian.Uint32(b[4:]), (*[QBlock]int8)(x[i*QBlock:]))
		s = blockSum(s, float32(f16Scale(b[0:])*dx), float32(f16Scale(b[2:])*dx), sumi, -sumx)
	}
	return s
}

func dotQ8_0Go(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[34]byte)(w[i*34:])
		xb := (*[QBlock]int8)(x[i*QBlock:])
		var sumi int32
		for j, c := range (*[QBlock]byte)(b[2:]) {
			sumi += int32(int8(c)) * int32(xb[j])
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return s
}

// fp4Values are the E2M1 values of the 16 MXFP4 codes, doubled so that
// they are integers (llama.cpp's kvalues_mxfp4).
var fp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is half the scale of the E8M0 byte e, 2^(e-128), with
// ggml_e8m0_to_fp32_half's bits (subnormal for e < 2).
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dotMXFP4Go(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[17]byte)(w[i*17:])
		xb := (*[QBlock]int8)(x[i*QBlock:])
		var sumi int32
		for j, c := range (*[16]byte)(b[1:]) {
			sumi += int32(fp4Values[c&0xf])*int32(xb[j]) + int32(fp4Values[c>>4])*int32(xb[j+16])
		}
		s = blockSum(s, float32(dx*e8m0Half(b[0])), 0, sumi, 0)
	}
	return s
}

// IQ4NLValues are llama.cpp's non-linear IQ4_NL values (kvalues_iq4nl;
// the tests check them against tensors', generated from its header).
var IQ4NLValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dotIQ4NLGo(w []byte, x []int8, xd []float32) float32 {
	var s float32
	for i, dx := range xd {
		b := (*[18]byte)(w[i*18:])
		xb := (*[QBlock]int8)(x[i*QBlock:])
		var sumi int32
		for j, c := range (*[16]byte)(b[2:]) {
			sumi += int32(IQ4NLValues[c&0xf])*int32(xb[j]) + int32(IQ4NLValues[c>>4])*int32(xb[j+16])
		}
		s = blockSum(s, float32(f16Scale(b[0:])*dx), 0, sumi, 0)
	}
	return s
}
