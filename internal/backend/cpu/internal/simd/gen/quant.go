package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// quantKernels writes the two passes of QuantizeQ8's natural order: each
// block's largest magnitude, then (with the scales Go derives from it) the
// rounded int8 values.
func quantKernels() {
	absMaxBlocks()
	quantQ8Blocks()
}

func absMaxBlocks() {
	TEXT("absMaxBlocksAVX2", NOSPLIT, "func(x *float32, nb int, amax *float32)")
	Pragma("noescape")
	Doc("absMaxBlocksAVX2 sets amax[b] = max |x[32b+i]| over i < 32 for b < nb (nb >= 1; finite x).")
	x, nb, out := Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("amax"), GP64())
	mask := YMM()
	broadcastD(0x7fffffff, mask)
	Label("amaxloop")
	v := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for i := range v {
		VANDPS(Mem{Base: x, Disp: 32 * i}, mask, v[i])
	}
	VMAXPS(v[1], v[0], v[0])
	VMAXPS(v[3], v[2], v[2])
	VMAXPS(v[2], v[0], v[0])
	lo, t := v[0].AsX(), XMM()
	VEXTRACTF128(Imm(1), v[0], t)
	VMAXPS(t, lo, lo)
	VMOVHLPS(lo, lo, t)
	VMAXPS(t, lo, lo)
	VMOVSHDUP(lo, t)
	VMAXSS(t, lo, lo)
	VMOVSS(lo, Mem{Base: out})
	ADDQ(Imm(128), x)
	ADDQ(Imm(4), out)
	DECQ(nb)
	JNZ(LabelRef("amaxloop"))
	VZEROUPPER()
	RET()
}

func quantQ8Blocks() {
	TEXT("quantQ8BlocksAVX2", NOSPLIT, "func(x *float32, id *float32, q *int8, nb int)")
	Pragma("noescape")
	Doc("quantQ8BlocksAVX2 sets q[32b+i] = round-half-even(clamp(x[32b+i]*id[b], ±127)) for i < 32, b < nb (nb >= 1; finite products).")
	x, id, q, nb := Load(Param("x"), GP64()), Load(Param("id"), GP64()), Load(Param("q"), GP64()), Load(Param("nb"), GP64())
	hi, lo, perm := YMM(), YMM(), YMM()
	broadcastD(0x42fe0000, hi) // 127.0
	broadcastD(0xc2fe0000, lo) // -127.0
	// VPACKSSDW and VPACKSSWB work within 128-bit lanes: the dwords of
	// four bytes come out as a0 b0 c0 d0 | a1 b1 c1 d1 (a0: values 0-3,
	// a1: values 4-7 of the first vector); VPERMD by this table puts
	// them back in order.
	table := GLOBL("q8perm", RODATA|NOPTR)
	for i, k := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(k))
	}
	VMOVDQU(table, perm)
	Label("quantloop")
	s := YMM()
	VBROADCASTSS(Mem{Base: id}, s)
	v := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for i := range v {
		VMULPS(Mem{Base: x, Disp: 32 * i}, s, v[i])
		VMINPS(hi, v[i], v[i])
		VMAXPS(lo, v[i], v[i])
		VCVTPS2DQ(v[i], v[i])
	}
	VPACKSSDW(v[1], v[0], v[0])
	VPACKSSDW(v[3], v[2], v[2])
	VPACKSSWB(v[2], v[0], v[0])
	VPERMD(v[0], perm, v[0])
	VMOVDQU(v[0], Mem{Base: q})
	ADDQ(Imm(128), x)
	ADDQ(Imm(4), id)
	ADDQ(Imm(32), q)
	DECQ(nb)
	JNZ(LabelRef("quantloop"))
	VZEROUPPER()
	RET()
}
