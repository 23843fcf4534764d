package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
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
}

// dotQ8_0 writes the Q8_0 kernel: per block the 32 signed weights meet
// the activations through VPSIGNB (|w| as unsigned bytes against x with
// w's sign, exact: |w|·|x| <= 128·128 and a pair sum fits int16), then
// VPMADDUBSW and VPMADDWD give Σq·x in eight int32 lanes, and the block's
// float operations are kEpilogue's.
func dotQ8_0() {
	const name = "dotQ8_0AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, nb int) float32")
	Pragma("noescape")
	Doc(name + " returns the dot product of nb Q8_0 blocks at w with QuantizeQ8 activations in natural order (x, xd).")
	w, x, xd, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("xd"), GP64()), Load(Param("nb"), GP64())
	ones16 := YMM()
	broadcastW(1, ones16)
	s := XMM()
	VXORPS(s, s, s)
	Label("q80block")
	TESTQ(nb, nb)
	JZ(LabelRef("q80done"))
	PREFETCHT0(Mem{Base: w, Disp: blockPrefetch}) // see blockScaled
	q, xv, p := YMM(), YMM(), YMM()
	VMOVDQU(Mem{Base: w, Disp: 2}, q)
	VMOVDQU(Mem{Base: x}, xv)
	VPSIGNB(q, xv, xv) // x with w's sign (0 where w is 0)
	VPABSB(q, q)
	VPMADDUBSW(xv, q, p)
	VPMADDWD(ones16, p, p)
	kEpilogue(p, nil, Mem{Base: w}, xd, s)
	ADDQ(Imm(34), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	DECQ(nb)
	JMP(LabelRef("q80block"))
	Label("q80done")
	VZEROUPPER()
	Store(s, ReturnIndex(0))
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
