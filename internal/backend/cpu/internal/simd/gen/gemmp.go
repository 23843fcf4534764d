package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmPanelKernels writes the AVX2 panel GEMM kernels (simd.GemmPanel): a
// register tile of mr rows of a by nr columns of b (nr 8, 16 or 24; mr up
// to 6, or 4 for 24 columns: mr*nr/8 accumulators, nr/8 b vectors and a
// broadcast fill the 16 vector registers). Per step of the inner
// dimension the tile loads nr/8 vectors of one row of b (row stride
// bstride) and broadcasts one value of each of its mr rows of a, for
// mr*nr/8 FMAs; each output is one lane summing its products in order of
// the inner index. With acc the tile is added to c's values, else stored.
func gemmPanelKernels() {
	for _, nr := range []int{8, 16, 24} {
		maxR := 6
		if nr == 24 {
			maxR = 4
		}
		for mr := 1; mr <= maxR; mr++ {
			gemmPanel(mr, nr)
		}
	}
}

// gemmPanel writes gemmP<mr>x<nr>AVX2.
func gemmPanel(mr, nr int) {
	name := fmt.Sprintf("gemmP%dx%dAVX2", mr, nr)
	nv := nr / 8
	TEXT(name, NOSPLIT, "func(a *float32, astride int, b *float32, bstride, k int, c *float32, cstride int, acc bool)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets (acc: adds to) c[i*cstride+j] = Σ_{p<k} a[i*astride+p]*b[p*bstride+j] for i < %d and j < %d, k > 0 (simd.GemmPanel).", name, mr, nr))
	a, as := Load(Param("a"), GP64()), Load(Param("astride"), GP64())
	b, bs := Load(Param("b"), GP64()), Load(Param("bstride"), GP64())
	k := Load(Param("k"), GP64())
	SHLQ(Imm(2), as)
	SHLQ(Imm(2), bs)
	// Rows 0-2 of a from a, rows 3-5 from a3 = a + 3*astride.
	var a3 Register
	if mr > 3 {
		a3 = GP64()
		LEAQ(Mem{Base: a, Index: as, Scale: 2}, a3)
		ADDQ(as, a3)
	}
	row := func(i, disp int) Mem {
		base := a
		if i >= 3 {
			base = a3
		}
		switch i % 3 {
		case 0:
			return Mem{Base: base, Disp: disp}
		case 1:
			return Mem{Base: base, Index: as, Scale: 1, Disp: disp}
		}
		return Mem{Base: base, Index: as, Scale: 2, Disp: disp}
	}
	acc := make([][]VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]VecVirtual, nv)
		for j := range acc[i] {
			acc[i][j] = YMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}
	// One step of the inner dimension: b's row at b, a's values at disp.
	step := func(disp int) {
		bv := make([]VecVirtual, nv)
		for j := range bv {
			bv[j] = YMM()
			VMOVUPS(Mem{Base: b, Disp: 32 * j}, bv[j])
		}
		for i := range mr {
			t := YMM()
			VBROADCASTSS(row(i, disp), t)
			for j := range bv {
				VFMADD231PS(bv[j], t, acc[i][j])
			}
		}
		ADDQ(bs, b)
	}
	const unroll = 4
	Label(name + "loop4")
	CMPQ(k, Imm(unroll))
	JL(LabelRef(name + "tail"))
	for u := range unroll {
		step(4 * u)
	}
	ADDQ(Imm(4*unroll), a)
	if mr > 3 {
		ADDQ(Imm(4*unroll), a3)
	}
	SUBQ(Imm(unroll), k)
	JMP(LabelRef(name + "loop4"))
	Label(name + "tail")
	TESTQ(k, k)
	JZ(LabelRef(name + "done"))
	step(0)
	ADDQ(Imm(4), a)
	if mr > 3 {
		ADDQ(Imm(4), a3)
	}
	DECQ(k)
	JMP(LabelRef(name + "tail"))
	Label(name + "done")
	c, cs := Load(Param("c"), GP64()), Load(Param("cstride"), GP64())
	SHLQ(Imm(2), cs)
	add := Load(Param("acc"), GP8())
	TESTB(add, add)
	JZ(LabelRef(name + "store"))
	p := GP64()
	MOVQ(c, p)
	for i := range mr {
		for j := range nv {
			VADDPS(Mem{Base: p, Disp: 32 * j}, acc[i][j], acc[i][j])
		}
		if i+1 < mr {
			ADDQ(cs, p)
		}
	}
	Label(name + "store")
	for i := range mr {
		for j := range nv {
			VMOVUPS(acc[i][j], Mem{Base: c, Disp: 32 * j})
		}
		if i+1 < mr {
			ADDQ(cs, c)
		}
	}
	VZEROUPPER()
	RET()
}

// rowMaxSum writes maxF32AVX2 and sumF64AVX2, softmax's passes over a row
// of scores (n a multiple of 16, at least 16): the largest value (four
// 8-lane VMAXPS accumulators, reduced), and the sum in float64 (lane j of
// accumulator a sums values 16i+4a+j, a < 4, j < 4; reduced as
// (a0+a1)+(a2+a3), then lanes (0+2)+(1+3)), the order simd.SumF64's Go
// form keeps.
func rowMaxSum() {
	TEXT("maxF32AVX2", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("maxF32AVX2 returns the largest of x[i] for i < n (a multiple of 16, at least 16; no NaNs).")
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	SHLQ(Imm(2), n)
	ADDQ(x, n) // end
	m0, m1 := YMM(), YMM()
	VMOVUPS(Mem{Base: x}, m0)
	VMOVUPS(Mem{Base: x, Disp: 32}, m1)
	ADDQ(Imm(64), x)
	Label("maxf32loop")
	CMPQ(x, n)
	JGE(LabelRef("maxf32done"))
	VMAXPS(Mem{Base: x}, m0, m0)
	VMAXPS(Mem{Base: x, Disp: 32}, m1, m1)
	ADDQ(Imm(64), x)
	JMP(LabelRef("maxf32loop"))
	Label("maxf32done")
	VMAXPS(m1, m0, m0)
	t := XMM()
	VEXTRACTF128(Imm(1), m0, t)
	VMAXPS(t, m0.AsX(), t)
	u := XMM()
	VMOVHLPS(t, t, u)
	VMAXPS(u, t, t)
	VMOVSHDUP(t, u)
	VMAXSS(u, t, t)
	Store(t, ReturnIndex(0))
	VZEROUPPER()
	RET()

	TEXT("sumF64AVX2", NOSPLIT, "func(x *float32, n int) float64")
	Pragma("noescape")
	Doc("sumF64AVX2 returns Σ x[i] for i < n (a multiple of 16, at least 16) in float64, in simd.SumF64's order.")
	x, n = Load(Param("x"), GP64()), Load(Param("n"), GP64())
	SHLQ(Imm(2), n)
	ADDQ(x, n)
	var acc [4]VecVirtual
	for a := range acc {
		acc[a] = YMM()
		VXORPD(acc[a], acc[a], acc[a])
	}
	Label("sumf64loop")
	CMPQ(x, n)
	JGE(LabelRef("sumf64done"))
	for a := range acc {
		v := YMM()
		VCVTPS2PD(Mem{Base: x, Disp: 16 * a}, v)
		VADDPD(v, acc[a], acc[a])
	}
	ADDQ(Imm(64), x)
	JMP(LabelRef("sumf64loop"))
	Label("sumf64done")
	VADDPD(acc[1], acc[0], acc[0])
	VADDPD(acc[3], acc[2], acc[2])
	VADDPD(acc[2], acc[0], acc[0])
	h := XMM()
	VEXTRACTF128(Imm(1), acc[0], h)
	VADDPD(h, acc[0].AsX(), h) // lanes 0+2, 1+3
	g := XMM()
	VPERMILPD(Imm(1), h, g)
	VADDSD(g, h, h)
	Store(h, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
