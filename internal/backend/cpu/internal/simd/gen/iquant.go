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
// it from ggml-common.h), at 2112 the words 256>>k, at 2128 the word 256
// eight times, at 2144 the dwords 8-k, at 2176 the dword 256 eight times.
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
		for k := range 8 {
			DATA(2112+2*k, U16(uint16(256)>>k))
		}
		for k := range 8 {
			DATA(2128+2*k, U16(256))
		}
		for k := range 8 {
			DATA(2144+4*k, U32(uint32(8-k)))
		}
		for k := range 8 {
			DATA(2176+4*k, U32(256))
		}
	}
	return iq3sTable
}

// dotIQ3S writes the IQ3_S kernel against QuantizeQ8K activations: per
// block the eight sub-block scales 2s+1 are made as words in a vector
// (iqNibbles) and each broadcast by VPSHUFB; per sub-block of 32 the eight
// grid indices (qs | the ninth bit from qh) are made as dwords in a vector
// (VPSLLVD moves the qh byte's bits into place) and their grid entries
// gathered (VPGATHERDD: 1.2x the VMOVD/VPINSRD loads from the indices
// stored, on Zen 3), the 32 sign bits become byte masks
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
		// the sub-block scales 2s+1 as words, in both lanes
		sc8 := iqNibbles(Mem{Base: w, Disp: 106})
		VPADDW(sc8, sc8, sc8)
		VPOR(iqScaleConsts().Offset(112), sc8, sc8)
		for ib := range 8 {
			// the eight indices as dwords, qs | (h << (8-k)) & 256 (h the
			// dword from qh's byte ib: bit 8 is bit k of that byte), and
			// their grid entries gathered
			idx, hv := YMM(), YMM()
			VPMOVZXBD(Mem{Base: w, Disp: 2 + 8*ib}, idx)
			VPBROADCASTD(Mem{Base: w, Disp: 66 + ib}, hv)
			VPSLLVD(Mem{Base: tab, Disp: 2144}, hv, hv)
			VPAND(Mem{Base: tab, Disp: 2176}, hv, hv)
			VPOR(hv, idx, idx)
			mask, g := YMM(), YMM()
			VPCMPEQD(mask, mask, mask)
			VPXOR(g, g, g)
			VPGATHERDD(mask, Mem{Base: tab, Index: idx, Scale: 4, Disp: 64}, g)
			sg, sx := YMM(), YMM()
			VPBROADCASTD(Mem{Base: w, Disp: 74 + 4*ib}, sg)
			VPSHUFB(shuf, sg, sg)
			VPAND(bits, sg, sg)
			VPCMPEQB(bits, sg, sg) // 0xff where the value is negative
			VPXOR(Mem{Base: x, Disp: 32 * ib}, sg, sx)
			VPSUBB(sg, sx, sx)
			VPMADDUBSW(sx, g, g)
			sc := YMM()
			VPSHUFB(kWordMask(ib), sc8, sc)
			VPMADDWD(sc, g, g)
			VPADDD(g, acc, acc)
		}
		kEpilogue(acc, nil, Mem{Base: w}, xd, s)
	})
}

// iq3xxsTable holds the IQ3_XXS kernel's constants: the VPSHUFB control
// and bits of iq3sConsts at 0 and 32, llama.cpp's iq3xxs_grid (256 dwords)
// at 64, its ksigns_iq2xs (128 bytes) at 1088.
var iq3xxsTable Mem

func iq3xxsConsts() Mem {
	if iq3xxsTable.Symbol.Name == "" {
		iq3xxsTable = GLOBL("iq3xxsconsts", RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(uint8(i/8)))
		}
		for i := range 32 {
			DATA(32+i, U8(uint8(1)<<(i%8)))
		}
		grid, signs := iqTable("iq3xxs_grid", 256), iqTable("ksigns_iq2xs", 32)
		for i, v := range grid {
			DATA(64+4*i, U32(v))
		}
		for i, v := range signs {
			DATA(1088+4*i, U32(v))
		}
	}
	return iq3xxsTable
}

// iqTable is tensors' table name, n words.
func iqTable(name string, n int) []uint32 {
	for _, t := range tensors.IQGrids() {
		if t.Name == name && len(t.Words) == n {
			return t.Words
		}
	}
	panic(name + ": no table of that size")
}

// dotIQ3XXS writes the IQ3_XXS kernel against QuantizeQ8K activations:
// dotIQ3S's with the grid indices eight bits wide and the 32 sign bits of
// a sub-block gathered from the ksigns_iq2xs bytes of its four 7-bit
// indices; the scale is 2s+1 from the word's top four bits, and the row's
// sum is multiplied by 0.25 at the end as the Go form does (the same bits).
func dotIQ3XXS(rows bool) {
	kText("dotIQ3XXS", "returns the dot product of nb IQ3_XXS blocks at w with QuantizeQ8K activations: iq3xxs_grid values with their ksigns_iq2xs signs times the sub-block scales 2s+1, a quarter of the sum.", rows)
	w, x, xd, xs, nb := kParams(rows)
	tab := GP64()
	LEAQ(iq3xxsConsts(), tab)
	shuf, bits := YMM(), YMM()
	VMOVDQU(Mem{Base: tab}, shuf)
	VMOVDQU(Mem{Base: tab, Disp: 32}, bits)
	kLoopFin("iq3xxs", 98, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		acc := YMM()
		VPXOR(acc, acc, acc)
		for ib := range 8 {
			var half [2]VecVirtual
			for hh := range 2 {
				v := XMM()
				for kk := range 4 {
					idx := GP64()
					MOVBQZX(Mem{Base: w, Disp: 2 + 8*ib + 4*hh + kk}, idx)
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
			aux, sw := GP64(), GP64()
			MOVLQZX(Mem{Base: w, Disp: 66 + 4*ib}, aux)
			XORQ(sw, sw)
			for l := range 4 {
				t := GP64()
				MOVQ(aux, t)
				if l > 0 {
					SHRQ(Imm(uint64(7*l)), t)
				}
				ANDQ(Imm(127), t)
				MOVBQZX(Mem{Base: tab, Index: t, Scale: 1, Disp: 1088}, t)
				if l > 0 {
					SHLQ(Imm(uint64(8*l)), t)
				}
				ORQ(t, sw)
			}
			sg, sx := YMM(), YMM()
			VMOVD(sw.As32(), sg.AsX())
			VPBROADCASTD(sg.AsX(), sg)
			VPSHUFB(shuf, sg, sg)
			VPAND(bits, sg, sg)
			VPCMPEQB(bits, sg, sg) // 0xff where the value is negative
			VPXOR(Mem{Base: x, Disp: 32 * ib}, sg, sx)
			VPSUBB(sg, sx, sx)
			VPMADDUBSW(sx, g, g)
			SHRQ(Imm(28), aux)
			LEAQ(Mem{Base: aux, Index: aux, Scale: 1, Disp: 1}, aux)
			sc := YMM()
			VMOVD(aux.As32(), sc.AsX())
			VPBROADCASTW(sc.AsX(), sc)
			VPMADDWD(sc, g, g)
			VPADDD(g, acc, acc)
		}
		kEpilogue(acc, nil, Mem{Base: w}, xd, s)
	}, func(s VecVirtual) {
		q, f := GP32(), XMM()
		MOVL(U32(0x3e800000), q) // 0.25
		VMOVD(q, f)
		VMULSS(f, s, s)
	})
}

// iq2xxsTable holds the IQ2_XXS kernel's constants: the VPSHUFB control
// and bits of iq3sConsts at 0 and 32, llama.cpp's iq2xxs_grid (256
// qwords) at 64, its ksigns_iq2xs (128 bytes) at 2112.
var iq2xxsTable Mem

func iq2xxsConsts() Mem {
	if iq2xxsTable.Symbol.Name == "" {
		iq2xxsTable = GLOBL("iq2xxsconsts", RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(uint8(i/8)))
		}
		for i := range 32 {
			DATA(32+i, U8(uint8(1)<<(i%8)))
		}
		grid, signs := iqTable("iq2xxs_grid", 512), iqTable("ksigns_iq2xs", 32)
		for i, v := range grid {
			DATA(64+4*i, U32(v))
		}
		for i, v := range signs {
			DATA(2112+4*i, U32(v))
		}
	}
	return iq2xxsTable
}

// dotIQ2XXS writes the IQ2_XXS kernel against QuantizeQ8K activations:
// dotIQ3XXS's with four 8-byte grid entries per sub-block (VMOVQ,
// VPINSRQ), the signs and the scale 2s+1 from the sub-block's second word,
// and an eighth of the row's sum at the end as the Go form does (the same
// bits).
func dotIQ2XXS(rows bool) {
	kText("dotIQ2XXS", "returns the dot product of nb IQ2_XXS blocks at w with QuantizeQ8K activations: iq2xxs_grid values with their ksigns_iq2xs signs times the sub-block scales 2s+1, an eighth of the sum.", rows)
	w, x, xd, xs, nb := kParams(rows)
	tab := GP64()
	LEAQ(iq2xxsConsts(), tab)
	shuf, bits := YMM(), YMM()
	VMOVDQU(Mem{Base: tab}, shuf)
	VMOVDQU(Mem{Base: tab, Disp: 32}, bits)
	kLoopFin("iq2xxs", 66, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		acc := YMM()
		VPXOR(acc, acc, acc)
		for ib := range 8 {
			var half [2]VecVirtual
			for hh := range 2 {
				v := XMM()
				for kk := range 2 {
					idx := GP64()
					MOVBQZX(Mem{Base: w, Disp: 2 + 8*ib + 2*hh + kk}, idx)
					m := Mem{Base: tab, Index: idx, Scale: 8, Disp: 64}
					if kk == 0 {
						VMOVQ(m, v)
					} else {
						VPINSRQ(Imm(1), m, v, v)
					}
				}
				half[hh] = v
			}
			g := YMM()
			VINSERTI128(Imm(1), half[1], half[0].AsY(), g)
			aux, sw := GP64(), GP64()
			MOVLQZX(Mem{Base: w, Disp: 6 + 8*ib}, aux)
			XORQ(sw, sw)
			for l := range 4 {
				t := GP64()
				MOVQ(aux, t)
				if l > 0 {
					SHRQ(Imm(uint64(7*l)), t)
				}
				ANDQ(Imm(127), t)
				MOVBQZX(Mem{Base: tab, Index: t, Scale: 1, Disp: 2112}, t)
				if l > 0 {
					SHLQ(Imm(uint64(8*l)), t)
				}
				ORQ(t, sw)
			}
			sg, sx := YMM(), YMM()
			VMOVD(sw.As32(), sg.AsX())
			VPBROADCASTD(sg.AsX(), sg)
			VPSHUFB(shuf, sg, sg)
			VPAND(bits, sg, sg)
			VPCMPEQB(bits, sg, sg) // 0xff where the value is negative
			VPXOR(Mem{Base: x, Disp: 32 * ib}, sg, sx)
			VPSUBB(sg, sx, sx)
			VPMADDUBSW(sx, g, g)
			SHRQ(Imm(28), aux)
			LEAQ(Mem{Base: aux, Index: aux, Scale: 1, Disp: 1}, aux)
			sc := YMM()
			VMOVD(aux.As32(), sc.AsX())
			VPBROADCASTW(sc.AsX(), sc)
			VPMADDWD(sc, g, g)
			VPADDD(g, acc, acc)
		}
		kEpilogue(acc, nil, Mem{Base: w}, xd, s)
	}, func(s VecVirtual) {
		q, f := GP32(), XMM()
		MOVL(U32(0x3e000000), q) // 0.125
		VMOVD(q, f)
		VMULSS(f, s, s)
	})
}

// iqScaleTable holds the constants of the I-quant scale vectors: at 0 the
// byte 0x0f sixteen times, at 16 the words 1<<(14-2j) (j = 0..7, both
// lanes), at 48 the word 0x30, at 80 the word 32 and at 112 the word 1,
// sixteen times each.
var iqScaleTable Mem

func iqScaleConsts() Mem {
	if iqScaleTable.Symbol.Name == "" {
		iqScaleTable = GLOBL("iqscaleconsts", RODATA|NOPTR)
		for i := range 16 {
			DATA(i, U8(0x0f))
		}
		for j := range 16 {
			DATA(16+2*j, U16(uint16(1)<<(14-2*(j%8))))
		}
		for i, v := range []uint16{0x30, 32, 1} {
			for j := range 16 {
				DATA(48+32*i+2*j, U16(v))
			}
		}
	}
	return iqScaleTable
}

// iqNibbles returns the eight 4-bit fields of the four bytes at m as
// int16 words in both lanes, in llama.cpp's sub-block order: word 2i the
// low nibble of byte i, word 2i+1 its high nibble (the 4-bit sub-block
// scales of IQ3_S and the low bits of IQ4_XS's). kWordMask(j) broadcasts
// word j.
func iqNibbles(m Mem) VecVirtual {
	v, h := XMM(), XMM()
	VPBROADCASTD(m, v)
	VPSRLW(Imm(4), v, h)
	VPAND(iqScaleConsts(), v, v)
	VPAND(iqScaleConsts(), h, h)
	VPUNPCKLBW(h, v, v) // the nibbles in order, bytes 0..7 and again 8..15
	y := YMM()
	VPMOVZXBW(v, y)
	return y
}
