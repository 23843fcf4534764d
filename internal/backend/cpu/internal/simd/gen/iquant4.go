package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The four-row AVX2 decode kernels of IQ4_XS and IQ3_S: four weight rows
// against one activation row at a time (k4Loop), so each activation
// vector is loaded once for four rows and the per-block float epilogue
// runs once for four rows on a vector of their sums (sum4), lane r the
// float32 s_r += float32(float32(d_r*dx)*float32(Σ_r)) of the one-row
// kernels (the same bits). The sub-block scales are kept per row in a
// stack table as dwords s | s<<16, each broadcast by a load
// (VPBROADCASTD) instead of a shuffle.

// iq4Rows4Table holds dotIQ4XSRows4's constants: at 0 the dwords 0 (low
// lane) and 4 (high lane), the VPSRLVD counts that leave a sub-block's low
// nibbles in the low lane and its high nibbles in the high lane of the
// 16 code bytes broadcast to both.
var iq4Rows4Table Mem

func iq4Rows4Consts() Mem {
	if iq4Rows4Table.Symbol.Name == "" {
		iq4Rows4Table = GLOBL("iq4rows4consts", RODATA|NOPTR)
		for i := range 8 {
			DATA(4*i, U32(uint32(4*(i/4))))
		}
	}
	return iq4Rows4Table
}

// iqNibblesX is iqNibbles in one xmm register (the eight words once).
func iqNibblesX(m Mem) VecVirtual {
	v, h := XMM(), XMM()
	VPBROADCASTD(m, v)
	VPSRLW(Imm(4), v, h)
	VPAND(iqScaleConsts(), v, v)
	VPAND(iqScaleConsts(), h, h)
	VPUNPCKLBW(h, v, v)
	VPMOVZXBW(v, v)
	return v
}

// scaleTable stores the eight int16 scales of sc8 (xmm) at t as dwords
// s | s<<16 (32 bytes), for VPBROADCASTD.
func scaleTable(sc8 VecVirtual, t Mem) {
	lo, hi := XMM(), XMM()
	VPUNPCKLWD(sc8, sc8, lo)
	VPUNPCKHWD(sc8, sc8, hi)
	VMOVDQU(lo, t)
	VMOVDQU(hi, t.Offset(16))
}

// rows4Epilogue adds to s (lanes 0..3, rows 0..3) the block's float terms
// float32(float32(d_r*dx)*float32(Σ_r)), Σ_r the sum of the eight int32
// lanes of acc[r] and d_r the f16 at offset 0 of row r's block.
func rows4Epilogue(a k4, acc [4]VecVirtual, xd Register, s VecVirtual) {
	sumi := sum4(acc)
	g, dm := GP32(), XMM()
	MOVWLZX(a.row(0, 0), g)
	VMOVD(g, dm)
	for r := 1; r < 4; r++ {
		VPINSRW(Imm(uint64(r)), a.row(r, 0), dm, dm)
	}
	dd, t, f := XMM(), XMM(), XMM()
	VCVTPH2PS(dm, dd)
	VBROADCASTSS(Mem{Base: xd}, t)
	VMULPS(t, dd, dd) // d*dx per row
	VCVTDQ2PS(sumi, f)
	VMULPS(f, dd, f)
	VADDPS(f, s.AsX(), s.AsX())
}

// dotIQ4XSRows4 writes the four-row IQ4_XS kernel (dotIQ4XSAVX2's bits):
// a sub-block's 16 code bytes are broadcast to both lanes (VBROADCASTI128,
// a load) and VPSRLVD by 0 / 4 per lane with the 0x0f mask leaves the low
// nibbles (elements 0..15) in the low lane and the high ones in the high
// lane, where dotIQ4XS shifts and inserts.
func dotIQ4XSRows4() {
	const name = "dotIQ4XSRows4AVX2"
	k4Text(name, "dotIQ4XSAVX2")
	tbl := AllocLocal(4 * 32)
	mask, kv, sh := YMM(), YMM(), YMM()
	broadcastB(0x0f, mask)
	tab := GP64()
	LEAQ(iq4nlConsts(), tab)
	VMOVDQU(Mem{Base: tab}, kv)
	VMOVDQU(iq4Rows4Consts(), sh)
	k4Loop(name, 136, func(a k4, x, xd, xs Register, s VecVirtual) {
		for r := range 4 {
			// dotIQ4XS's scales ls-32, in one xmm register
			sc8, hv := iqNibblesX(a.row(r, 4)), XMM()
			VPBROADCASTW(a.row(r, 2), hv)
			VPMULLW(iqScaleConsts().Offset(16), hv, hv)
			VPSRLW(Imm(10), hv, hv)
			VPAND(iqScaleConsts().Offset(48), hv, hv)
			VPOR(hv, sc8, sc8)
			VPSUBW(iqScaleConsts().Offset(80), sc8, sc8)
			scaleTable(sc8, tbl.Offset(32*r))
		}
		acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for _, v := range acc {
			VPXOR(v, v, v)
		}
		for ib := range 8 {
			xv := YMM()
			VMOVDQU(Mem{Base: x, Disp: 32 * ib}, xv)
			for r := range 4 {
				u, q, sx, sc := YMM(), YMM(), YMM(), YMM()
				VBROADCASTI128(a.row(r, 8+16*ib), u)
				VPSRLVD(sh, u, u)
				VPAND(mask, u, u)
				VPSHUFB(u, kv, q) // the values in element order
				VPABSB(q, u)
				VPSIGNB(q, xv, sx)
				VPMADDUBSW(sx, u, u)
				VPBROADCASTD(tbl.Offset(32*r+4*ib), sc)
				VPMADDWD(sc, u, u)
				VPADDD(u, acc[r], acc[r])
			}
		}
		rows4Epilogue(a, acc, xd, s)
	}, func(s VecVirtual, out Register) {
		VMOVUPS(s.AsX(), Mem{Base: out})
	})
}

// iq3sRows4Table holds dotIQ3SRows4's constants: at 0 llama.cpp's
// iq3s_grid (512 dwords), at 2048 the VPSHUFB control spreading byte i/8
// of a broadcast dword over byte i, at 2080 the bit 1<<(i%8) of byte i,
// at 2112 the byte 127 32 times, at 2144 for each qh byte h (256 entries
// of 16 bytes) the words ((h>>k)&1)<<8, the ninth bits of a sub-block's
// eight grid indices.
var iq3sRows4Table Mem

func iq3sRows4Consts() Mem {
	if iq3sRows4Table.Symbol.Name == "" {
		iq3sRows4Table = GLOBL("iq3srows4consts", RODATA|NOPTR)
		for i, v := range iqTable("iq3s_grid", 512) {
			DATA(4*i, U32(v))
		}
		for i := range 32 {
			DATA(2048+i, U8(uint8(i/8)))
		}
		for i := range 32 {
			DATA(2080+i, U8(uint8(1)<<(i%8)))
		}
		for i := range 32 {
			DATA(2112+i, U8(127))
		}
		for h := range 256 {
			for k := range 8 {
				DATA(2144+16*h+2*k, U16(uint16(h>>k&1)<<8))
			}
		}
	}
	return iq3sRows4Table
}

// dotIQ3SRows4 writes the four-row IQ3_S kernel (dotIQ3SAVX2's bits),
// dotIQ3SRows4AVX2 or, with pdep, dotIQ3SRows4BMI2. A sub-block's eight
// grid indices qs_k | (bit k of qh)<<8 are made as words in two general
// registers, and its grid entries loaded one by one (VMOVD, VPINSRD,
// VINSERTI128) where dotIQ3S gathers (VPGATHERDD, which held Zen 3's
// vector pipes: thread CPU per 2048-wide row in L2 291 ns gathering, 218
// with PDEP, 243 with the vector form; with one to three of the four rows
// gathering 233 to 254). The words: AVX2 widens the qs bytes in a vector
// (VPMOVZXBW), ORs the ninth bits from a table by the qh byte and moves
// the vector out (VMOVQ, VPEXTRQ); BMI2 deposits the qs bytes and the qh
// bits (two PDEPs and an OR per four words), for CPUs whose PDEP is fast
// (not AMD's before Zen 3, where it is microcoded). The signs are made as
// bytes (b & bit) + 127, negative where the bit is set and never zero,
// which VPSIGNB applies to the activations where dotIQ3S compares, XORs
// and subtracts (the same values).
func dotIQ3SRows4(pdep bool) {
	name := "dotIQ3SRows4AVX2"
	if pdep {
		name = "dotIQ3SRows4BMI2"
	}
	k4Text(name, "dotIQ3SAVX2")
	tbl := AllocLocal(4 * 32)
	tab := GP64()
	LEAQ(iq3sRows4Consts(), tab)
	var mBytes, mBit8 GPVirtual
	if pdep {
		mBytes, mBit8 = GP64(), GP64()
		MOVQ(U64(0x00ff00ff00ff00ff), mBytes)
		MOVQ(U64(0x0100010001000100), mBit8)
	}
	shuf, bits := YMM(), YMM()
	VMOVDQU(Mem{Base: tab, Disp: 2048}, shuf)
	VMOVDQU(Mem{Base: tab, Disp: 2080}, bits)
	k4Loop(name, 110, func(a k4, x, xd, xs Register, s VecVirtual) {
		for r := range 4 {
			// the sub-block scales 2s+1
			sc8 := iqNibblesX(a.row(r, 106))
			VPADDW(sc8, sc8, sc8)
			VPOR(iqScaleConsts().Offset(112), sc8, sc8)
			scaleTable(sc8, tbl.Offset(32*r))
		}
		acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for _, v := range acc {
			VPXOR(v, v, v)
		}
		for ib := range 8 {
			xv := YMM()
			VMOVDQU(Mem{Base: x, Disp: 32 * ib}, xv)
			for r := range 4 {
				g := YMM()
				w0, w1, h := GP64(), GP64(), GP64()
				MOVBQZX(a.row(r, 66+ib), h)
				if pdep {
					q, t := GP64(), GP64()
					MOVQ(a.row(r, 2+8*ib), q)
					PDEPQ(mBytes, q, w0)
					PDEPQ(mBit8, h, t)
					ORQ(t, w0)
					SHRQ(Imm(32), q)
					SHRQ(Imm(4), h)
					PDEPQ(mBytes, q, w1)
					PDEPQ(mBit8, h, t)
					ORQ(t, w1)
				} else {
					iw := XMM()
					VPMOVZXBW(a.row(r, 2+8*ib), iw)
					SHLQ(Imm(4), h)
					VPOR(Mem{Base: tab, Index: h, Scale: 1, Disp: 2144}, iw, iw)
					VMOVQ(iw, w0)
					VPEXTRQ(Imm(1), iw, w1)
				}
				var half [2]VecVirtual
				for hh, wv := range []GPVirtual{w0, w1} {
					v := XMM()
					for kk := range 4 {
						i := GP64()
						MOVWQZX(wv.As16(), i)
						if kk < 3 {
							SHRQ(Imm(16), wv)
						}
						m := Mem{Base: tab, Index: i, Scale: 4}
						if kk == 0 {
							VMOVD(m, v)
						} else {
							VPINSRD(Imm(uint64(kk)), m, v, v)
						}
					}
					half[hh] = v
				}
				VINSERTI128(Imm(1), half[1], half[0].AsY(), g)
				sg, sx := YMM(), YMM()
				VPBROADCASTD(a.row(r, 74+4*ib), sg)
				VPSHUFB(shuf, sg, sg)
				VPAND(bits, sg, sg)
				VPADDB(Mem{Base: tab, Disp: 2112}, sg, sg) // < 0 where the value is negative
				VPSIGNB(sg, xv, sx)
				VPMADDUBSW(sx, g, g)
				sc := YMM()
				VPBROADCASTD(tbl.Offset(32*r+4*ib), sc)
				VPMADDWD(sc, g, g)
				VPADDD(g, acc[r], acc[r])
			}
		}
		rows4Epilogue(a, acc, xd, s)
	}, func(s VecVirtual, out Register) {
		VMOVUPS(s.AsX(), Mem{Base: out})
	})
}

// cpuFamily writes cpuFamilyAMD64, the CPU's display family (CPUID leaf
// 1: the base family, plus the extended family where the base is 0xf).
func cpuFamily() {
	TEXT("cpuFamilyAMD64", NOSPLIT, "func() uint32")
	Doc("cpuFamilyAMD64 returns the CPU's display family from CPUID leaf 1.")
	MOVL(U32(1), EAX)
	XORL(ECX, ECX)
	CPUID()
	f, e := GP32(), GP32()
	MOVL(EAX, f)
	SHRL(Imm(8), f)
	ANDL(U32(0xf), f)
	MOVL(EAX, e)
	SHRL(Imm(20), e)
	ANDL(U32(0xff), e)
	CMPL(f, U32(0xf))
	JNE(LabelRef("cpufamilydone"))
	ADDL(e, f)
	Label("cpufamilydone")
	Store(f, ReturnIndex(0))
	RET()
}
