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
// 16, in order: the lanes of dotF32x4AVX2's two 8-lane accumulators), so
// per 16 columns 4 weight and up to 6 input vectors are loaded for up to
// 24 FMAs; the lanes are reduced once at the end, in dotF32x4AVX2's
// order, so every output has its bits.
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
		// Fold each accumulator to 8 lanes, then 4 (as dotF32x4AVX2 adds
		// its two accumulators and hsum its halves), then transpose-add
		// the four rows' vectors into one whose lane r is row r's
		// (a0+a2)+(a1+a3), hsum's last two steps: dotF32x4AVX2's bits.
		var h [gemmF32Rows]VecVirtual
		for r := range h {
			y := YMM()
			VEXTRACTF64X4(Imm(1), acc[t][r], y)
			VADDPS(y, acc[t][r].AsY(), y)
			h[r] = XMM()
			VEXTRACTF32X4(Imm(1), y, h[r])
			VADDPS(h[r], y.AsX(), h[r])
		}
		lo, hi := XMM(), XMM()
		VUNPCKLPS(h[1], h[0], lo) // a0 b0 a1 b1
		VUNPCKHPS(h[1], h[0], hi) // a2 b2 a3 b3
		VADDPS(hi, lo, h[0])      // a0+a2 b0+b2 a1+a3 b1+b3
		VUNPCKLPS(h[3], h[2], lo)
		VUNPCKHPS(h[3], h[2], hi)
		VADDPS(hi, lo, h[2]) // c0+c2 d0+d2 c1+c3 d1+d3
		VUNPCKLPD(h[2], h[0], lo)
		VUNPCKHPD(h[2], h[0], hi)
		VADDPS(hi, lo, lo)
		VMOVUPS(lo, Mem{Base: out})
		if t+1 < tokens {
			ADDQ(os, out)
		}
	}
	VZEROUPPER()
	RET()
}

// dotF32Rows4 writes dotF32Rows4AVX512: dotF32RowsAVX2 four rows at a
// time (n a multiple of 32, rows a multiple of 4). Each row gets the
// arithmetic of dotF32AVX2 in the same order (four accumulators of 8
// lanes, combined and reduced the same way), so the same bits; the four
// rows' weight streams are read side by side and each input vector is
// loaded once for the four, which memory-bound decode reads faster than
// one row after another. The 16 accumulators and 4 inputs need the 32
// vector registers of AVX-512 (VL).
func dotF32Rows4() {
	TEXT("dotF32Rows4AVX512", NOSPLIT, "func(a, x *float32, n, rows int, out *float32)")
	Pragma("noescape")
	Doc("dotF32Rows4AVX512 sets out[r] = dotF32AVX2(a+r*n, x, n) for r < rows, n a multiple of 32, rows of 4, bit for bit.")
	a, x0, n0 := Load(Param("a"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	nrows, out := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
	SHLQ(Imm(2), n0) // row bytes
	r1, r2, r3 := GP64(), GP64(), GP64()
	i := GP64()
	var acc [4][4]VecVirtual
	Label("f32r4row")
	CMPQ(nrows, Imm(4))
	JL(LabelRef("f32r4end"))
	LEAQ(Mem{Base: a, Index: n0, Scale: 1}, r1)
	LEAQ(Mem{Base: r1, Index: n0, Scale: 1}, r2)
	LEAQ(Mem{Base: r2, Index: n0, Scale: 1}, r3)
	rows := [4]Register{a, r1, r2, r3}
	for r := range acc {
		for j := range acc[r] {
			acc[r][j] = YMM()
			VXORPS(acc[r][j], acc[r][j], acc[r][j])
		}
	}
	XORQ(i, i)
	Label("f32r4loop")
	var xv [4]VecVirtual
	for j := range xv {
		xv[j] = YMM()
		VMOVUPS(Mem{Base: x0, Index: i, Scale: 1, Disp: 32 * j}, xv[j])
	}
	for r := range rows {
		for j := range 4 {
			VFMADD231PS(Mem{Base: rows[r], Index: i, Scale: 1, Disp: 32 * j}, xv[j], acc[r][j])
		}
	}
	ADDQ(Imm(128), i)
	CMPQ(i, n0)
	JL(LabelRef("f32r4loop"))
	for r := range rows {
		VADDPS(acc[r][1], acc[r][0], acc[r][0])
		VADDPS(acc[r][3], acc[r][2], acc[r][2])
		VADDPS(acc[r][2], acc[r][0], acc[r][0])
		hsum(acc[r][0])
		VMOVSS(acc[r][0].AsX(), Mem{Base: out, Disp: 4 * r})
	}
	ADDQ(Imm(16), out)
	LEAQ(Mem{Base: r3, Index: n0, Scale: 1}, a)
	SUBQ(Imm(4), nrows)
	JMP(LabelRef("f32r4row"))
	Label("f32r4end")
	VZEROUPPER()
	RET()
}

// dotF32RowsZ writes dotF32Rows8AVX512: dotF32RowsAVX2 eight rows at a
// time (n a multiple of 32, rows a multiple of 8) on 512-bit vectors. A
// row's two accumulators hold dotF32AVX2's four (lanes 0-15: its first
// two, 16-31 its last two), each lane summing the same products in the
// same order, and are reduced as it reduces them: the same bits.
func dotF32RowsZ() {
	const per = 8
	name := "dotF32Rows8AVX512"
	TEXT(name, NOSPLIT, "func(a, x *float32, n, rows int, out *float32)")
	Pragma("noescape")
	Doc(name + " sets out[r] = dotF32AVX2(a+r*n, x, n) for r < rows, n a multiple of 32, rows of 8, bit for bit.")
	a, x0, n0 := Load(Param("a"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	nrows, out := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
	SHLQ(Imm(2), n0) // row bytes
	n3 := GP64()
	LEAQ(Mem{Base: n0, Index: n0, Scale: 2}, n3)
	// Rows a, a+n, a+2n, a+3n, and b = a+4n, b+n, b+2n, b+3n.
	b := GP64()
	i := GP64()
	var acc [per][2]VecVirtual
	Label(name + "row")
	CMPQ(nrows, Imm(per))
	JL(LabelRef(name + "end"))
	LEAQ(Mem{Base: a, Index: n0, Scale: 4}, b)
	for r := range acc {
		for k := range acc[r] {
			acc[r][k] = ZMM()
			VXORPS(acc[r][k], acc[r][k], acc[r][k])
		}
	}
	XORQ(i, i)
	Label(name + "loop")
	xv := [2]VecVirtual{ZMM(), ZMM()}
	VMOVUPS(Mem{Base: x0, Index: i, Scale: 1}, xv[0])
	VMOVUPS(Mem{Base: x0, Index: i, Scale: 1, Disp: 64}, xv[1])
	row := func(r int) Mem {
		base := a
		if r >= 4 {
			base = b
		}
		switch r % 4 {
		case 0:
			return Mem{Base: base}
		case 1:
			return Mem{Base: base, Index: n0, Scale: 1}
		case 2:
			return Mem{Base: base, Index: n0, Scale: 2}
		}
		return Mem{Base: base, Index: n3, Scale: 1}
	}
	for r := range per {
		for k := range 2 {
			m := row(r)
			m.Disp = 64 * k
			VFMADD231PS(m, xv[k], acc[r][k])
		}
	}
	ADDQ(Imm(128), a)
	ADDQ(Imm(128), b)
	ADDQ(Imm(128), i)
	CMPQ(i, n0)
	JL(LabelRef(name + "loop"))
	for r := range per {
		lo, hi := YMM(), YMM()
		VEXTRACTF64X4(Imm(1), acc[r][0], hi)
		VADDPS(hi, acc[r][0].AsY(), lo) // acc0 + acc1
		t := YMM()
		VEXTRACTF64X4(Imm(1), acc[r][1], t)
		VADDPS(t, acc[r][1].AsY(), hi) // acc2 + acc3
		VADDPS(hi, lo, lo)
		hsum(lo)
		VMOVSS(lo.AsX(), Mem{Base: out, Disp: 4 * r})
	}
	ADDQ(Imm(4*per), out)
	// a has advanced by one row: on past the other seven.
	LEAQ(Mem{Base: b, Index: n3, Scale: 1}, a)
	SUBQ(Imm(per), nrows)
	JMP(LabelRef(name + "row"))
	Label(name + "end")
	VZEROUPPER()
	RET()
}
