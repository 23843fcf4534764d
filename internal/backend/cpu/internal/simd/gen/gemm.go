package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmKernels writes the prefill GEMM kernels (AVX-512 VNNI on 256-bit
// vectors): one packed group of 8 weight rows (gemm.go's layout) times 1
// to 4 tokens, one float accumulator and one integer sum per token, each
// lane one weight row, so no horizontal sums.
func gemmKernels() {
	for t := 1; t <= 4; t++ {
		gemm("Q8", t, 16+256, 7, func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int)) {
			for j := range 8 {
				wv := YMM()
				VMOVDQU(Mem{Base: w, Disp: 16 + 32*j}, wv)
				step(wv, 4*j)
			}
		})
		gemm("Q4", t, 16+128, 3, func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int)) {
			for j := range 4 {
				raw, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(Mem{Base: w, Disp: 16 + 32*j}, raw)
				VPAND(mask, raw, lo)
				VPSRLW(Imm(4), raw, hi)
				VPAND(mask, hi, hi)
				step(lo, 4*j)
				step(hi, 16+4*j)
			}
		})
	}
}

// gemm writes gemm<kind>T<tokens>VNNI. shift is log2 of the weights'
// offset (128 or 8); blocks emits one block's chunks through step (the
// unsigned weights of 8 rows, four per lane, and the offset in the block
// of the four activations they meet).
func gemm(kind string, tokens, blockBytes, shift int, blocks func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int))) {
	name := fmt.Sprintf("gemm%sT%dVNNI", kind, tokens)
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int32, nb, xstride int, out *float32, ostride int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens (simd.Impl.Gemm).", name, kind, tokens))
	w, x := Load(Param("w"), GP64()), Load(Param("x"), GP64())
	xd, xs := Load(Param("xd"), GP64()), Load(Param("xs"), GP64())
	nb, s := Load(Param("nb"), GP64()), Load(Param("xstride"), GP64())
	ds := GP64()
	MOVQ(s, ds)
	SHRQ(Imm(3), ds) // bytes between tokens' scales (and sums)
	s3, ds3 := GP64(), GP64()
	LEAQ(Mem{Base: s, Index: s, Scale: 2}, s3)
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, ds3)
	var mask VecVirtual
	if kind == "Q4" {
		mask = YMM()
		broadcastB(0x0f, mask)
	}
	accf, acci := make([]VecVirtual, tokens), make([]VecVirtual, tokens)
	for t := range tokens {
		accf[t], acci[t] = YMM(), YMM()
		VXORPS(accf[t], accf[t], accf[t])
	}
	Label(name + "block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "done"))
	gemmPrefetch(w, blockBytes, tokens)
	for t := range tokens {
		VPBROADCASTD(tokMem(xs, ds, ds3, t, 0), acci[t])
		VPSLLD(Imm(uint64(shift)), acci[t], acci[t])
	}
	blocks(w, mask, func(wv VecVirtual, xoff int) {
		for t := range tokens {
			VPDPBUSD_BCST(tokMem(x, s, s3, t, xoff), wv, acci[t])
		}
	})
	dw := YMM()
	VCVTPH2PS(Mem{Base: w}, dw) // the rows' binary16 scales
	for t := range tokens {
		sc := YMM()
		VCVTDQ2PS(acci[t], acci[t])
		VBROADCASTSS(tokMem(xd, ds, ds3, t, 0), sc)
		VMULPS(dw, sc, sc)
		VFMADD231PS(acci[t], sc, accf[t])
	}
	ADDQ(U32(uint32(blockBytes)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	ADDQ(Imm(4), xs)
	DECQ(nb)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	out, os := Load(Param("out"), GP64()), Load(Param("ostride"), GP64())
	SHLQ(Imm(2), os)
	os3 := GP64()
	LEAQ(Mem{Base: os, Index: os, Scale: 2}, os3)
	for t := range tokens {
		VMOVUPS(accf[t], tokMem(out, os, os3, t, 0))
	}
	VZEROUPPER()
	RET()
}

// dotF32x2x4 is dotF32x4 for two weight rows at once (32 vector
// registers: AVX-512VL encodings): each x vector is loaded once for both
// rows, and each (row, token) keeps dotF32x4AVX2's two accumulators and
// order of operations, so the results are its bits.
func dotF32x2x4() {
	TEXT("dotF32x2x4AVX512", NOSPLIT, "func(a0, a1, x *float32, stride, n int, out *float32)")
	Pragma("noescape")
	Doc("dotF32x2x4AVX512 sets out[4r+j] = dotF32x4AVX2(a_r, x, stride, n)[j] for rows r < 2, bit for bit.")
	a := [2]Register{Load(Param("a0"), GP64()), Load(Param("a1"), GP64())}
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	stride := Load(Param("stride"), GP64())
	SHLQ(Imm(2), stride)
	x1, x2, x3 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: x, Index: stride, Scale: 1}, x1)
	LEAQ(Mem{Base: x1, Index: stride, Scale: 1}, x2)
	LEAQ(Mem{Base: x2, Index: stride, Scale: 1}, x3)
	xs := []Register{x, x1, x2, x3}
	var acc [2][8]VecVirtual
	for r := range acc {
		for i := range acc[r] {
			acc[r][i] = YMM()
			VXORPS(acc[r][i], acc[r][i], acc[r][i])
		}
	}
	i := GP64()
	XORQ(i, i)
	Label("f32x2x4loop16")
	t := GP64()
	MOVQ(i, t)
	ADDQ(Imm(16), t)
	CMPQ(t, n)
	JG(LabelRef("f32x2x4loop8"))
	for h := range 2 {
		var xv [4]VecVirtual
		for j, xp := range xs {
			xv[j] = YMM()
			VMOVUPS(Mem{Base: xp, Index: i, Scale: 4, Disp: 32 * h}, xv[j])
		}
		for r := range 2 {
			w := YMM()
			VMOVUPS(Mem{Base: a[r], Index: i, Scale: 4, Disp: 32 * h}, w)
			for j := range 4 {
				VFMADD231PS(xv[j], w, acc[r][j+4*h])
			}
		}
	}
	ADDQ(Imm(16), i)
	JMP(LabelRef("f32x2x4loop16"))
	Label("f32x2x4loop8")
	CMPQ(i, n)
	JGE(LabelRef("f32x2x4done"))
	for r := range 2 {
		w := YMM()
		VMOVUPS(Mem{Base: a[r], Index: i, Scale: 4}, w)
		for j, xp := range xs {
			VFMADD231PS(Mem{Base: xp, Index: i, Scale: 4}, w, acc[r][j])
		}
	}
	ADDQ(Imm(8), i)
	JMP(LabelRef("f32x2x4loop8"))
	Label("f32x2x4done")
	out := Load(Param("out"), GP64())
	for r := range 2 {
		for j := range 4 {
			VADDPS(acc[r][j+4], acc[r][j], acc[r][j])
			hsum(acc[r][j])
			VMOVSS(acc[r][j].AsX(), Mem{Base: out, Disp: 4 * (4*r + j)})
		}
	}
	VZEROUPPER()
	RET()
}
