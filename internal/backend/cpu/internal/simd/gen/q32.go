package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/gpurun/gpurun/tensors"
)

// The kernels of the 32-value block types with offsets (Q4_1, Q5_0, Q5_1)
// against QuantizeQ8 activations in natural order: per block the nibbles
// (and fifth bits) become 32 unsigned bytes in element order, VPMADDUBSW
// and VPMADDWD give Σq·x in eight int32 lanes and, against ones, Σx; the
// block's float operations are kEpilogue's, as in the Go forms.

func q32Kernels() {
	dotQ32("dotQ4_1AVX2", "q41", 20, 4, -1, true, "Q4_1")
	dotQ32("dotQ5_0AVX2", "q50", 22, 6, 2, false, "Q5_0")
	dotQ32("dotQ5_1AVX2", "q51", 24, 8, 4, true, "Q5_1")
	dotQ8_0()
	dotMXFP4()
	dotIQ4NL()
}

// mxfp4Table holds the doubled E2M1 values of the 16 codes in both 128-bit
// lanes (the VPSHUFB table: llama.cpp's kvalues_mxfp4) and then, per E8M0
// byte e, half its scale as float32 bits (ggml_e8m0_to_fp32_half: exponent
// field e-1, the subnormals 2^-128 and 2^-127 for e < 2).
var mxfp4Table Mem

func mxfp4Consts() Mem {
	if mxfp4Table.Symbol.Name == "" {
		mxfp4Table = GLOBL("mxfp4consts", RODATA|NOPTR)
		fp4 := [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
		for l := range 32 {
			DATA(l, U8(uint8(fp4[l%16])))
		}
		for e := range 256 {
			bits := uint32(e-1) << 23
			if e < 2 {
				bits = 0x00200000 << e
			}
			DATA(32+4*e, U32(bits))
		}
	}
	return mxfp4Table
}

// dotMXFP4 writes the MXFP4 kernel, rows consecutive weight rows of nb
// blocks against one activation row, as dotQ8_0RowsAVX2 and llama.cpp's
// AVX2 ggml_vec_dot_mxfp4_q8_0 do: per block the 32 codes (low nibbles
// elements 0..15, high nibbles 16..31) become their doubled E2M1 values
// by VPSHUFB, meet the activations as signed bytes (VPSIGNB, VPABSB,
// VPMADDUBSW, VPMADDWD: |w| <= 12), and the eight int32 lanes are
// converted and added with VFMADD231PS, times float32(dx*h) (h from the
// table by e), into one of two vector accumulators, summed across lanes at
// the end of the row. The blocks' sums run in another order than the Go
// form's (agreeing within rounding), the same for one row or many.
func dotMXFP4() {
	const name = "dotMXFP4RowsAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, nb, rows int, out *float32)")
	Pragma("noescape")
	Doc(name + " sets out[i] to the dot product of MXFP4 weight row i (nb blocks, the rows consecutive at w) with QuantizeQ8 activations in natural order (x, xd), for i < rows.")
	w := Load(Param("w"), GP64())
	x0, xd0, nb0 := Load(Param("x"), GP64()), Load(Param("xd"), GP64()), Load(Param("nb"), GP64())
	nrows, out := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
	tab := GP64()
	LEAQ(mxfp4Consts(), tab)
	ones, mask, fp4 := YMM(), YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x0f, mask)
	VMOVDQU(Mem{Base: tab}, fp4)
	e := GP64()
	block := func(x, xd Register, j int, acc VecVirtual) {
		d := XMM()
		MOVBQZX(Mem{Base: w, Disp: 17 * j}, e)
		VMOVSS(Mem{Base: xd, Disp: 4 * j}, d)
		VMULSS(Mem{Base: tab, Index: e, Scale: 4, Disp: 32}, d, d) // float32(dx*h)
		dv := YMM()
		VBROADCASTSS(d, dv)
		b, h, u, q, sx := XMM(), XMM(), YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: 17*j + 1}, b)
		VPSRLW(Imm(4), b, h)
		VINSERTI128(Imm(1), h, b.AsY(), u)
		VPAND(mask, u, u)
		VPSHUFB(u, fp4, q) // doubled E2M1 values in element order
		VPABSB(q, u)
		VMOVDQU(Mem{Base: x, Disp: 32 * j}, sx)
		VPSIGNB(q, sx, sx)
		VPMADDUBSW(sx, u, u)
		VPMADDWD(ones, u, u)
		VCVTDQ2PS(u, u)
		VFMADD231PS(u, dv, acc)
	}
	blockRows("mx", 17, w, x0, xd0, nb0, nrows, out, func(x, xd Register, acc [2]VecVirtual) {
		for j := range 8 {
			block(x, xd, j, acc[j%2])
		}
	}, func(x, xd Register, acc VecVirtual) { block(x, xd, 0, acc) })
}

// dotQ8_0 writes the Q8_0 kernel, rows consecutive weight rows of nb
// blocks against one activation row, as dotQ8Q8BlocksRowsAVX2 computes
// int8 rows with separate scales: per eight blocks their f16 scales are
// gathered from the blocks (VPINSRW), converted and multiplied by the
// activation scales at once, and each block's Σq·x (|w| as unsigned bytes
// against x with w's sign: VPSIGNB, VPABSB, VPMADDUBSW, VPMADDWD) is
// converted and added with VFMADD231PS into one of two vector
// accumulators, summed across lanes at the end of the row. The blocks'
// sums run in another order than the Go form's (agreeing within
// rounding), the same for one row or many.
func dotQ8_0() {
	const name = "dotQ8_0RowsAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, nb, rows int, out *float32)")
	Pragma("noescape")
	Doc(name + " sets out[i] to the dot product of Q8_0 weight row i (nb blocks, the rows consecutive at w) with QuantizeQ8 activations in natural order (x, xd), for i < rows.")
	w := Load(Param("w"), GP64())
	x0, xd0, nb0 := Load(Param("x"), GP64()), Load(Param("xd"), GP64()), Load(Param("nb"), GP64())
	nrows, out := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
	ones := YMM()
	broadcastW(1, ones)
	scales := AllocLocal(32)
	block := func(x Register, j int, d VecVirtual, acc VecVirtual) {
		wv, u, sx := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: 34*j + 2}, wv)
		VPABSB(wv, u)
		VMOVDQU(Mem{Base: x, Disp: 32 * j}, sx)
		VPSIGNB(wv, sx, sx)
		VPMADDUBSW(sx, u, u)
		VPMADDWD(ones, u, u)
		VCVTDQ2PS(u, u)
		VFMADD231PS(u, d, acc)
	}
	blockRows("q80", 34, w, x0, xd0, nb0, nrows, out, func(x, xd Register, acc [2]VecVirtual) {
		sh, sv := XMM(), YMM()
		VPXOR(sh, sh, sh)
		for j := range 8 {
			VPINSRW(Imm(uint64(j)), Mem{Base: w, Disp: 34 * j}, sh, sh)
		}
		VCVTPH2PS(sh, sv)
		VMULPS(Mem{Base: xd}, sv, sv)
		VMOVUPS(sv, scales)
		for j := range 8 {
			d := YMM()
			VBROADCASTSS(scales.Offset(4*j), d)
			block(x, j, d, acc[j%2])
		}
	}, func(x, xd Register, acc VecVirtual) {
		dw, d := YMM(), YMM()
		halfScale(Mem{Base: w}, dw)
		VMULPS(Mem{Base: xd}, dw, d) // lane 0 only matters before the broadcast
		VBROADCASTSS(d.AsX(), d)
		block(x, 0, d, acc)
	})
}

// blockRows writes the loop the rows kernels of interleaved 32-value
// blocks (bb bytes each, scale and values together, the rows consecutive
// at w) share: per row two vector accumulators are cleared, groups of
// eight blocks run eight (after prefetching their bytes some way ahead, as
// blockScaled does), the rest tail one block at a time, and the lanes' sum
// of the accumulators is stored to out. eight and tail add the blocks at
// w against the activations at x (32 per block) and their scales at xd.
func blockRows(label string, bb int, w, x0, xd0, nb0, nrows, out Register,
	eight func(x, xd Register, acc [2]VecVirtual), tail func(x, xd Register, acc VecVirtual)) {
	x, xd, nb := GP64(), GP64(), GP64()
	acc := [2]VecVirtual{YMM(), YMM()}
	Label(label + "row")
	TESTQ(nrows, nrows)
	JZ(LabelRef(label + "end"))
	MOVQ(x0, x)
	MOVQ(xd0, xd)
	MOVQ(nb0, nb)
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	Label(label + "eight")
	CMPQ(nb, Imm(8))
	JL(LabelRef(label + "tail"))
	for off := 0; off < 8*bb; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: blockPrefetch + off})
	}
	eight(x, xd, acc)
	ADDQ(U32(uint32(8*bb)), w)
	ADDQ(U32(256), x)
	ADDQ(Imm(32), xd)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(label + "eight"))
	Label(label + "tail")
	TESTQ(nb, nb)
	JZ(LabelRef(label + "done"))
	tail(x, xd, acc[0])
	ADDQ(Imm(uint64(bb)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	DECQ(nb)
	JMP(LabelRef(label + "tail"))
	Label(label + "done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0])
	VMOVSS(acc[0].AsX(), Mem{Base: out})
	ADDQ(Imm(4), out)
	DECQ(nrows)
	JMP(LabelRef(label + "row"))
	Label(label + "end")
	VZEROUPPER()
	RET()
}

// q5Table holds the VPSHUFB control that gives byte j of a broadcast
// 32-bit word to lanes 8j..8j+7, and the byte masks with every bit set but
// bit l%8 of lane l.
var q5Table Mem

func q5Const(i int) Mem {
	if q5Table.Symbol.Name == "" {
		q5Table = GLOBL("q5consts", RODATA|NOPTR)
		for l := range 32 {
			DATA(l, U8(uint8(l/8)))
		}
		for l := range 32 {
			DATA(32+l, U8(^uint8(1<<(l%8))))
		}
	}
	return q5Table.Offset(32 * i)
}

// dotQ32 writes one kernel: qs the offset of the nibbles, qh that of the
// fifth bits (-1: none), withMin whether the block has an f16 m after d
// (value d*q + m; without, d*(q-16)).
func dotQ32(name, label string, bytes, qs, qh int, withMin bool, what string) {
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, nb int) float32")
	Pragma("noescape")
	Doc(name + " returns the dot product of nb " + what + " blocks at w with QuantizeQ8 activations in natural order (x, xd).")
	w, x, xd, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("xd"), GP64()), Load(Param("nb"), GP64())
	mask, ones8, ones16 := YMM(), YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(1, ones8)
	broadcastW(1, ones16)
	var bit4, all YMMs
	if qh >= 0 {
		bit4, all = YMMs{YMM()}, YMMs{YMM()}
		broadcastB(0x10, bit4[0])
		VPCMPEQB(all[0], all[0], all[0])
	}
	s := XMM()
	VXORPS(s, s, s)
	Label(label + "block")
	TESTQ(nb, nb)
	JZ(LabelRef(label + "done"))
	PREFETCHT0(Mem{Base: w, Disp: blockPrefetch}) // see blockScaled
	b, h, u := XMM(), XMM(), YMM()
	VMOVDQU(Mem{Base: w, Disp: qs}, b)
	VPSRLW(Imm(4), b, h)
	VINSERTI128(Imm(1), h, b.AsY(), u)
	VPAND(mask, u, u)
	if qh >= 0 {
		// Bit l of the 32 high bits to bit 4 of lane l.
		hb := YMM()
		VPBROADCASTD(Mem{Base: w, Disp: qh}, hb)
		VPSHUFB(q5Const(0), hb, hb)
		VPOR(q5Const(1), hb, hb)
		VPCMPEQB(all[0], hb, hb)
		VPAND(bit4[0], hb, hb)
		VPOR(hb, u, u)
	}
	p, sx := YMM(), YMM()
	VPMADDUBSW(Mem{Base: x}, u, p)
	VPMADDWD(ones16, p, p)
	VPMADDUBSW(Mem{Base: x}, ones8, sx)
	VPMADDWD(ones16, sx, sx)
	if withMin {
		// The Go form's "- dmin*dx*(-Σx)": kEpilogue subtracts.
		z := YMM()
		VPXOR(z, z, z)
		VPSUBD(sx, z, sx)
		foldD(sx)
		kEpilogue(p, sx.AsX(), Mem{Base: w}, xd, s)
	} else {
		VPSLLD(Imm(4), sx, sx)
		VPSUBD(sx, p, p)
		kEpilogue(p, nil, Mem{Base: w}, xd, s)
	}
	ADDQ(Imm(uint64(bytes)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	DECQ(nb)
	JMP(LabelRef(label + "block"))
	Label(label + "done")
	VZEROUPPER()
	Store(s, ReturnIndex(0))
	RET()
}

// YMMs is a list of virtual vector registers (empty when unused).
type YMMs []VecVirtual

// iq4nlTable holds llama.cpp's IQ4_NL values (kvalues_iq4nl, as tensors
// generated them from its header) in both 128-bit lanes: the VPSHUFB table.
var iq4nlTable Mem

func iq4nlConsts() Mem {
	if iq4nlTable.Symbol.Name == "" {
		iq4nlTable = GLOBL("iq4nlconsts", RODATA|NOPTR)
		kv := tensors.IQ4NLValues()
		for l := range 32 {
			DATA(l, U8(uint8(kv[l%16])))
		}
	}
	return iq4nlTable
}

// dotIQ4NL writes the IQ4_NL kernel, rows consecutive weight rows of nb
// blocks against one activation row: per eight blocks their f16 scales are
// gathered (VPINSRW, as dotQ8_0 does), converted and multiplied by the
// activation scales at once; per block the 32 codes (low nibbles elements
// 0..15, high nibbles 16..31) become their values by VPSHUFB (as dotMXFP4
// does with its table) and meet the activations as signed bytes (|w| <=
// 127: VPMADDUBSW cannot saturate against |x| <= 127), and the eight int32
// lanes are converted and added with VFMADD231PS into one of two vector
// accumulators, summed across lanes at the end of the row. The blocks'
// sums run in another order than the Go form's (agreeing within
// rounding), the same for one row or many.
func dotIQ4NL() {
	const name = "dotIQ4NLRowsAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, nb, rows int, out *float32)")
	Pragma("noescape")
	Doc(name + " sets out[i] to the dot product of IQ4_NL weight row i (nb blocks, the rows consecutive at w) with QuantizeQ8 activations in natural order (x, xd), for i < rows.")
	w := Load(Param("w"), GP64())
	x0, xd0, nb0 := Load(Param("x"), GP64()), Load(Param("xd"), GP64()), Load(Param("nb"), GP64())
	nrows, out := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
	tab := GP64()
	LEAQ(iq4nlConsts(), tab)
	ones, mask, kv := YMM(), YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x0f, mask)
	VMOVDQU(Mem{Base: tab}, kv)
	scales := AllocLocal(32)
	block := func(x Register, j int, d VecVirtual, acc VecVirtual) {
		b, h, u, q, sx := XMM(), XMM(), YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: 18*j + 2}, b)
		VPSRLW(Imm(4), b, h)
		VINSERTI128(Imm(1), h, b.AsY(), u)
		VPAND(mask, u, u)
		VPSHUFB(u, kv, q) // the values in element order
		VPABSB(q, u)
		VMOVDQU(Mem{Base: x, Disp: 32 * j}, sx)
		VPSIGNB(q, sx, sx)
		VPMADDUBSW(sx, u, u)
		VPMADDWD(ones, u, u)
		VCVTDQ2PS(u, u)
		VFMADD231PS(u, d, acc)
	}
	blockRows("iq4nl", 18, w, x0, xd0, nb0, nrows, out, func(x, xd Register, acc [2]VecVirtual) {
		sh, sv := XMM(), YMM()
		VPXOR(sh, sh, sh)
		for j := range 8 {
			VPINSRW(Imm(uint64(j)), Mem{Base: w, Disp: 18 * j}, sh, sh)
		}
		VCVTPH2PS(sh, sv)
		VMULPS(Mem{Base: xd}, sv, sv)
		VMOVUPS(sv, scales)
		for j := range 8 {
			d := YMM()
			VBROADCASTSS(scales.Offset(4*j), d)
			block(x, j, d, acc[j%2])
		}
	}, func(x, xd Register, acc VecVirtual) {
		dw, d := YMM(), YMM()
		halfScale(Mem{Base: w}, dw)
		VMULPS(Mem{Base: xd}, dw, d) // lane 0 only matters before the broadcast
		VBROADCASTSS(d.AsX(), d)
		block(x, 0, d, acc)
	})
}
