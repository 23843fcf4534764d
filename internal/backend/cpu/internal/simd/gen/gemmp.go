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
