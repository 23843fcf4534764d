package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/gpurun/gpurun/tensors"
)

// iq3sTable holds the IQ3_S kernel's constants: at 0 the VPSHUFB control
// spreading byte i/8 of a broadcast dword over byte i, at 32 the bit 1<<(i%8)
// of byte i, at 64 llama.cpp's iq3s_grid (512 dwords, as tensors generated
// it from ggml-common.h).
var iq3sTable Mem

func iq3sConsts() Mem {
	if iq3sTable.Symbol.Name == "" {
		iq3sTable = GLOBL("iq3sconsts", RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(uint8(i/8)))
		}
		for i := range 32 {
			DATA(32+i, U8(uint8(1)<<(i%8)))
		}
		var grid []uint32
		for _, t := range tensors.IQGrids() {
			if t.Name == "iq3s_grid" {
				grid = t.Words
			}
		}
		if len(grid) != 512 {
			panic("iq3s_grid: not 512 entries")
		}
		for i, v := range grid {
			DATA(64+4*i, U32(v))
		}
	}
	return iq3sTable
}

// dotIQ3S writes the IQ3_S kernel against QuantizeQ8K activations: per
// sub-block of 32 the eight grid entries (index qs | the ninth bit from qh)
// are loaded as dwords (VMOVD, VPINSRD), the 32 sign bits become byte masks
// (VPBROADCASTD, VPSHUFB, VPAND, VPCMPEQB) that negate the activations
// ((x^m)-m), VPMADDUBSW multiplies the unsigned grid values (<= 15) with
// them and VPMADDWD applies the sub-block scale 2s+1: the block's exact
// integer sum, to which kEpilogue applies float32(d*dx*Σ) as the Go form
// does (the same bits).
func dotIQ3S(rows bool) {
	kText("dotIQ3S", "returns the dot product of nb IQ3_S blocks at w with QuantizeQ8K activations: iq3s_grid values with their signs times the sub-block scales 2s+1.", rows)
	w, x, xd, xs, nb := kParams(rows)
	tab := GP64()
	LEAQ(iq3sConsts(), tab)
	shuf, bits := YMM(), YMM()
	VMOVDQU(Mem{Base: tab}, shuf)
	VMOVDQU(Mem{Base: tab, Disp: 32}, bits)
	kLoop("iq3s", 110, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		acc := YMM()
		VPXOR(acc, acc, acc)
		for ib := range 8 {
			h := GP64()
			MOVBQZX(Mem{Base: w, Disp: 66 + ib}, h)
			var half [2]VecVirtual
			for hh := range 2 {
				v := XMM()
				for kk := range 4 {
					k := 4*hh + kk
					idx, t := GP64(), GP64()
					MOVBQZX(Mem{Base: w, Disp: 2 + 8*ib + k}, idx)
					MOVQ(h, t)
					SHLQ(Imm(uint64(8-k)), t)
					ANDQ(U32(256), t)
					ORQ(t, idx)
					m := Mem{Base: tab, Index: idx, Scale: 4, Disp: 64}
					if kk == 0 {
						VMOVD(m, v)
					} else {
						VPINSRD(Imm(uint64(kk)), m, v, v)
					}
				}
				half[hh] = v
			}
			g := YMM()
			VINSERTI128(Imm(1), half[1], half[0].AsY(), g)
			sg, sx := YMM(), YMM()
			VPBROADCASTD(Mem{Base: w, Disp: 74 + 4*ib}, sg)
			VPSHUFB(shuf, sg, sg)
			VPAND(bits, sg, sg)
			VPCMPEQB(bits, sg, sg) // 0xff where the value is negative
			VPXOR(Mem{Base: x, Disp: 32 * ib}, sg, sx)
			VPSUBB(sg, sx, sx)
			VPMADDUBSW(sx, g, g)
			ls := GP32()
			MOVBLZX(Mem{Base: w, Disp: 106 + ib/2}, ls)
			if ib%2 == 1 {
				SHRL(Imm(4), ls)
			}
			ANDL(Imm(0xf), ls)
			LEAL(Mem{Base: ls, Index: ls, Scale: 1, Disp: 1}, ls)
			sc := YMM()
			VMOVD(ls, sc.AsX())
			VPBROADCASTW(sc.AsX(), sc)
			VPMADDWD(sc, g, g)
			VPADDD(g, acc, acc)
		}
		kEpilogue(acc, nil, Mem{Base: w}, xd, s)
	})
}
