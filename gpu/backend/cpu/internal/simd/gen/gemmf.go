package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmF32Rows is the number of weight rows of the f32 GEMM's register
// tile; gemmF32MaxTokens its most tokens.
const (
	gemmF32Rows      = 4
	gemmF32MaxTokens = 6
)

// gemmF32Kernels writes the f32 prefill GEMM kernels (AVX-512): a
// register tile of 4 weight rows by 1 to 6 tokens, one 16-lane
// accumulator per output (each lane sums the columns congruent to it mod
// 16), so per 16 columns 4 weight and up to 6 input vectors are loaded for
// up to 24 FMAs; the lanes are reduced once at the end.
func gemmF32Kernels() {
	for t := 1; t <= gemmF32MaxTokens; t++ {
		gemmF32(t)
	}
}

// gemmF32 writes gemmF32T<tokens>AVX512.
func gemmF32(tokens int) {
	name := fmt.Sprintf("gemmF32T%dAVX512", tokens)
	TEXT(name, NOSPLIT, "func(w *float32, wstride int, x *float32, xstride, n int, out *float32, ostride int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets out[t*ostride+r] = Σ_{i<n} w[r*wstride+i]*x[t*xstride+i] for r < %d and t < %d, n a multiple of 16 (simd.GemmF32).", name, gemmF32Rows, tokens))
	w, ws := Load(Param("w"), GP64()), Load(Param("wstride"), GP64())
	x, xs := Load(Param("x"), GP64()), Load(Param("xstride"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), ws)
	SHLQ(Imm(2), xs)
	SHLQ(Imm(2), n) // bytes
	// Row pointers w, w+ws, w+2ws, w+3ws; token pointers x + t*xs.
	rows := []Register{w}
	for r := 1; r < gemmF32Rows; r++ {
		p := GP64()
		LEAQ(Mem{Base: rows[r-1], Index: ws, Scale: 1}, p)
		rows = append(rows, p)
	}
	toks := []Register{x}
	for t := 1; t < tokens; t++ {
		p := GP64()
		LEAQ(Mem{Base: toks[t-1], Index: xs, Scale: 1}, p)
		toks = append(toks, p)
	}
	acc := make([][gemmF32Rows]VecVirtual, tokens)
	for t := range acc {
		for r := range acc[t] {
			acc[t][r] = ZMM()
			VXORPS(acc[t][r], acc[t][r], acc[t][r])
		}
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "loop")
	CMPQ(i, n)
	JGE(LabelRef(name + "done"))
	var wv [gemmF32Rows]VecVirtual
	for r := range wv {
		wv[r] = ZMM()
		VMOVUPS(Mem{Base: rows[r], Index: i, Scale: 1}, wv[r])
	}
	for t := range tokens {
		xv := ZMM()
		VMOVUPS(Mem{Base: toks[t], Index: i, Scale: 1}, xv)
		for r := range wv {
			VFMADD231PS(xv, wv[r], acc[t][r])
		}
	}
	ADDQ(Imm(64), i)
	JMP(LabelRef(name + "loop"))
	Label(name + "done")
	out, os := Load(Param("out"), GP64()), Load(Param("ostride"), GP64())
	SHLQ(Imm(2), os)
	for t := range tokens {
		// Fold each accumulator to 8 lanes, then transpose-add the four
		// rows' vectors into one: lane r of the result is row r's sum.
		var y [gemmF32Rows]VecVirtual
		for r := range y {
			y[r] = YMM()
			VEXTRACTF64X4(Imm(1), acc[t][r], y[r])
			VADDPS(acc[t][r].AsY(), y[r], y[r])
		}
		lo, hi := YMM(), YMM()
		VUNPCKLPS(y[1], y[0], lo) // y0_0 y1_0 y0_1 y1_1 per 128 bits
		VUNPCKHPS(y[1], y[0], hi) // y0_2 y1_2 y0_3 y1_3
		VADDPS(hi, lo, y[0])      // (r0, r1, r0, r1)
		VUNPCKLPS(y[3], y[2], lo)
		VUNPCKHPS(y[3], y[2], hi)
		VADDPS(hi, lo, y[2]) // (r2, r3, r2, r3)
		VUNPCKLPD(y[2], y[0], lo)
		VUNPCKHPD(y[2], y[0], hi)
		VADDPS(hi, lo, lo) // (r0, r1, r2, r3) per 128 bits
		h := XMM()
		VEXTRACTF32X4(Imm(1), lo, h)
		VADDPS(lo.AsX(), h, h)
		VMOVUPS(h, Mem{Base: out})
		if t+1 < tokens {
			ADDQ(os, out)
		}
	}
	VZEROUPPER()
	RET()
}
