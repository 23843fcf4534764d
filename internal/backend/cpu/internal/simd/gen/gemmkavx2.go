package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The K-quant prefill GEMM kernels for AVX2 without VNNI: gemmk.go's
// packed groups (lane l = row l) times 1 to maxTokens tokens quantized by
// QuantizeQ8K (values in [-127, 127]), as gemmKKernels, with VPMADDUBSW
// (unsigned values × signed activations into 16-bit pair sums) in place
// of VPDPBUSD. The 16-bit sums run over as many chunks as cannot overflow
// (Q4_K: a whole sub-block of 32, at most 16·15·127; Q5_K: 4 chunks, at
// most 8·31·127; Q6_K: 2 chunks, at most 4·63·127; Q2_K, Q3_K: a whole
// sub-block of 16, at most 8·7·127) and are then widened by
// VPMADDWD against the lane's sub-block scale in both 16-bit halves, which
// also applies the scale (the VNNI kernels' VPMULLD). The mins and offsets
// meet the activations' 16-value sums through VPMADDWD (the VNNI kernels'
// VPDPWSSD). Every integer sum is exact and the block's float operations
// are the VNNI kernels', so each lane gets DotK's bits for its row. With 16
// vector registers a call takes at most 3 tokens (Q4_K; the others 2); the Go
// wrapper splits larger tiles.

func gemmKAVX2Kernels() {
	for t := 1; t <= 3; t++ {
		gemmQ45KAVX2(false, t)
	}
	for t := 1; t <= 2; t++ {
		gemmQ45KAVX2(true, t)
		gemmQ6KAVX2(t)
		gemmQ23KAVX2(false, t)
		gemmQ23KAVX2(true, t)
	}
}

// madd16 adds, per token, the unsigned bytes wv times the four activation
// bytes at xm(t) (broadcast) into the 16-bit sums p[t]; first sets them.
func madd16(wv VecVirtual, xm func(t int) Mem, p []VecVirtual, first bool) {
	for t := range p {
		xb := YMM()
		VPBROADCASTD(xm(t), xb)
		if first {
			VPMADDUBSW(xb, wv, p[t])
			continue
		}
		VPMADDUBSW(xb, wv, xb)
		VPADDW(xb, p[t], p[t])
	}
}

// widenScaled adds, per token, the 16-bit pair sums p[t] times the scale
// words of scw (the same scale in both halves of a lane) to sum[t].
func widenScaled(scw VecVirtual, p, sum []VecVirtual) {
	for t := range p {
		VPMADDWD(scw, p[t], p[t])
		VPADDD(p[t], sum[t], sum[t])
	}
}

// bothHalves makes y's 32-bit lanes (values below 2^16) hold their value
// in both 16-bit halves.
func bothHalves(y VecVirtual) {
	t := YMM()
	VPSLLD(Imm(16), y, t)
	VPOR(t, y, y)
}

// kgemmPrefetchBlocks is how many packed blocks ahead of the one in hand
// the one-token GEMM kernels (AVX2 and VNNI) prefetch. Decode reads every
// packed block once, straight from memory: without it the AVX2 one-token
// kernel ran at 9.8 (Q6_K) and 14 (Q4_K) GB/s from memory against 28 and
// 33 in L2. The several-token kernels (prefill) compute long enough per
// block for the hardware prefetcher and do without.
const kgemmPrefetchBlocks = 2

// kgemmPrefetch prefetches, in a one-token kernel, the packed block
// kgemmPrefetchBlocks ahead of the one at a.w (bytes long). Within a group
// the blocks follow each other and the next group follows the last block,
// so this runs on across the calls of a decode product; past the matrix's
// end it touches nothing (prefetches do not fault).
func kgemmPrefetch(a kgemmArgs, bytes, tokens int) {
	if tokens != 1 {
		return
	}
	for off := 0; off < bytes; off += 64 {
		PREFETCHT0(Mem{Base: a.w, Disp: kgemmPrefetchBlocks*bytes + off})
	}
}

// kq4Unpack unpacks the 6-bit scales and mins of the packed Q4_K/Q5_K
// block at w (simd's kq4ScaleMin layout) into the 128 bytes at tbl: the
// scales [8 sub-blocks][8 lanes], then the mins. Each 32-byte quarter k
// is the nibbles (low ones for k < 2, high ones after) of the 32 bytes at
// 32(k%2) with bit pair k of the high-bit bytes moved to bits 4-5. m0f
// holds 0x0f in every byte; 0x30 is read from memory (no register: the
// three-token kernel uses all sixteen). evex takes the AVX-512 forms (the
// VNNI kernels' registers reach Y16-Y31).
func kq4Unpack(w Register, tbl Mem, m0f VecVirtual, evex bool) {
	and := func(a, b, c Op) { VPAND(a, b, c) }
	or := func(a, b, c Op) { VPOR(a, b, c) }
	mov := func(a, b Op) { VMOVDQU(a, b) }
	if evex {
		and = func(a, b, c Op) { VPANDD(a, b, c) }
		or = func(a, b, c Op) { VPORD(a, b, c) }
		mov = func(a, b Op) { VMOVDQU32(a, b) }
	}
	m30 := kq4Mask30()
	h := YMM()
	mov(Mem{Base: w, Disp: kq4SM + 64}, h)
	for k := range 4 {
		lo, hb := YMM(), YMM()
		mov(Mem{Base: w, Disp: kq4SM + 32*(k%2)}, lo)
		if k >= 2 {
			VPSRLW(Imm(4), lo, lo)
		}
		and(m0f, lo, lo)
		switch k {
		case 0:
			VPSLLW(Imm(4), h, hb)
		case 1:
			VPSLLW(Imm(2), h, hb)
		case 3:
			VPSRLW(Imm(2), h, hb)
		}
		if k == 2 {
			and(m30, h, hb)
		} else {
			and(m30, hb, hb)
		}
		or(hb, lo, lo)
		mov(lo, tbl.Offset(32*k))
	}
}

// kq4M30 is 32 bytes of 0x30 (kq4Unpack's mask of bits 4-5).
var kq4M30 Mem

func kq4Mask30() Mem {
	if kq4M30.Symbol.Name == "" {
		kq4M30 = GLOBL("kq4mask30", RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(0x30))
		}
	}
	return kq4M30
}

func zeroed(n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for i := range v {
		v[i] = YMM()
		VPXOR(v[i], v[i], v[i])
	}
	return v
}

// gemmQ45KAVX2 writes gemmQ4KT<tokens>AVX2 (gemmQ5KT... with q5).
func gemmQ45KAVX2(q5 bool, tokens int) {
	kind, bytes, widen := "Q4K", kq4Bytes, 8
	if q5 {
		kind, bytes, widen = "Q5K", kq5Bytes, 4
	}
	name := fmt.Sprintf("gemm%sT%dAVX2", kind, tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens on AVX2 (simd.Impl.GemmK).", name, kind, tokens))
	a := kgemmParams(tokens)
	mask, bit4 := YMM(), YMM()
	broadcastB(0x0f, mask)
	if q5 {
		broadcastB(0x10, bit4)
	}
	accf := make([]VecVirtual, tokens)
	for t := range accf {
		accf[t] = YMM()
		VXORPS(accf[t], accf[t], accf[t])
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, bytes, tokens)
	tbl := AllocLocal(128)
	kq4Unpack(a.w, tbl, mask, false)
	sumi, summ := zeroed(tokens), zeroed(tokens)
	for s := range 8 {
		g, hi := s/2, s%2
		p := make([]VecVirtual, tokens)
		for t := range p {
			p[t] = YMM()
		}
		for j := range 8 {
			wv := YMM()
			if hi == 1 {
				VMOVDQU(Mem{Base: a.w, Disp: kq4Q + 32*(8*g+j)}, wv)
				VPSRLW(Imm(4), wv, wv)
				VPAND(mask, wv, wv)
			} else {
				VPAND(Mem{Base: a.w, Disp: kq4Q + 32*(8*g+j)}, mask, wv)
			}
			if q5 {
				h := YMM()
				VMOVDQU(Mem{Base: a.w, Disp: kq5QH + 32*j}, h)
				shiftTo4(h, s)
				VPAND(bit4, h, h)
				VPOR(h, wv, wv)
			}
			madd16(wv, func(t int) Mem { return a.xm(t, 32*s+4*j) }, p, j%widen == 0)
			if (j+1)%widen == 0 {
				sc := YMM()
				VPMOVZXBD(tbl.Offset(8*s), sc)
				bothHalves(sc)
				widenScaled(sc, p, sumi)
			}
		}
		// The min, in both 16-bit halves, meets the sub-block's two sums.
		m := YMM()
		VPMOVZXBD(tbl.Offset(64+8*s), m)
		bothHalves(m)
		for t := range tokens {
			xb := YMM()
			VPBROADCASTD(a.xsm(t, 4*s), xb)
			VPMADDWD(xb, m, xb)
			VPADDD(xb, summ[t], summ[t])
		}
	}
	kgemmEndScaleMin(name, a, bytes, tokens, kq4D, kq4Min, true, sumi, summ, accf)
}

// gemmQ6KAVX2 writes gemmQ6KT<tokens>AVX2: values unsigned (0..63), the
// offset of 32 removed as 32·Σ_s sc_s·xs_s.
func gemmQ6KAVX2(tokens int) {
	name := fmt.Sprintf("gemmQ6KT%dAVX2", tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the Q6K GEMM kernel for %d tokens on AVX2 (simd.Impl.GemmK).", name, tokens))
	a := kgemmParams(tokens)
	mask, m30 := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(0x30, m30)
	accf := make([]VecVirtual, tokens)
	for t := range accf {
		accf[t] = YMM()
		VXORPS(accf[t], accf[t], accf[t])
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, kq6Bytes, tokens)
	sumi, osum := zeroed(tokens), zeroed(tokens)
	for h := range 2 {
		for q := range 4 {
			k := 4*h + q // the pair of sub-blocks 2k, 2k+1
			scm := Mem{Base: a.w, Disp: kq6Sc + 16*k}
			pv := YMM()
			VPMOVSXBW(scm, pv)
			for t := range tokens {
				xb := YMM()
				VPBROADCASTD(a.xsm(t, 4*k), xb)
				VPMADDWD(xb, pv, xb)
				VPADDD(xb, osum[t], osum[t])
			}
			for u := range 2 {
				p := make([]VecVirtual, tokens)
				for t := range p {
					p[t] = YMM()
				}
				for j := 4 * u; j < 4*u+4; j++ {
					wv, hb := YMM(), YMM()
					ql := Mem{Base: a.w, Disp: kq6QL + 32*(16*h+8*(q%2)+j)}
					if q >= 2 {
						VMOVDQU(ql, wv)
						VPSRLW(Imm(4), wv, wv)
						VPAND(mask, wv, wv)
					} else {
						VPAND(ql, mask, wv)
					}
					VMOVDQU(Mem{Base: a.w, Disp: kq6QH + 32*(8*h+j)}, hb)
					switch {
					case q < 2:
						VPSLLW(Imm(uint64(4-2*q)), hb, hb)
					case q == 3:
						VPSRLW(Imm(2), hb, hb)
					}
					VPAND(m30, hb, hb)
					VPOR(hb, wv, wv)
					madd16(wv, func(t int) Mem { return a.xm(t, 128*h+32*q+4*j) }, p, j%2 == 0)
					if j%2 == 1 {
						// Sub-block 2k+u's scale (signed) in both halves.
						sc := YMM()
						VPMOVSXBW(scm, sc)
						imm := uint64(0xa0) // words 0, 0, 2, 2
						if u == 1 {
							imm = 0xf5 // words 1, 1, 3, 3
						}
						VPSHUFLW(Imm(imm), sc, sc)
						VPSHUFHW(Imm(imm), sc, sc)
						widenScaled(sc, p, sumi)
					}
				}
			}
		}
	}
	dw := YMM()
	VMOVUPS(Mem{Base: a.w, Disp: kq6D}, dw)
	for t := range tokens {
		dx := YMM()
		VPSLLD(Imm(5), osum[t], osum[t])
		VPSUBD(osum[t], sumi[t], sumi[t])
		VCVTDQ2PS(sumi[t], sumi[t])
		VBROADCASTSS(a.xdm(t), dx)
		VMULPS(dx, dw, dx)
		VMULPS(sumi[t], dx, dx)
		VADDPS(dx, accf[t], accf[t])
	}
	kgemmEnd(name, a, kq6Bytes, accf)
}

// gemmQ23KAVX2 writes gemmQ2KT<tokens>AVX2 (gemmQ3KT... with q3), as
// gemmQ23K: 2-bit values (Q3_K: with the high bit, 0..7, the offset of 4
// removed as 4·Σ_s sc_s·xs_s), sub-blocks of 16 whose scales (Q2_K: and
// mins) come in pairs per lane. A sub-block's 16-bit sums (4 chunks, at
// most 8·7·127) are widened once, against its scale.
func gemmQ23KAVX2(q3 bool, tokens int) {
	kind, bytes := "Q2K", kq2Bytes
	if q3 {
		kind, bytes = "Q3K", kq3Bytes
	}
	name := fmt.Sprintf("gemm%sT%dAVX2", kind, tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens on AVX2 (simd.Impl.GemmK).", name, kind, tokens))
	a := kgemmParams(tokens)
	m03, m4f := YMM(), YMM() // m4f: 0x04 (Q3_K's high bit) or 0x0f (Q2_K's scale nibble)
	broadcastB(0x03, m03)
	if q3 {
		broadcastB(0x04, m4f)
	} else {
		broadcastB(0x0f, m4f)
	}
	accf := make([]VecVirtual, tokens)
	for t := range accf {
		accf[t] = YMM()
		VXORPS(accf[t], accf[t], accf[t])
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, bytes, tokens)
	sumi, other := zeroed(tokens), zeroed(tokens) // other: Σm·xs (Q2_K), Σsc·xs (Q3_K)
	scOff, qOff := kq2Sc, kq2Q
	if q3 {
		scOff, qOff = kq3Sc, kq3Q
	}
	for h := range 2 {
		for j := range 4 {
			k := 4*h + j // the pair of sub-blocks 2k, 2k+1
			scm := Mem{Base: a.w, Disp: scOff + 16*k}
			pv := YMM()
			if q3 {
				VPMOVSXBW(scm, pv)
			} else {
				VPMOVZXBW(scm, pv)
				VPSRLW(Imm(4), pv, pv) // the mins
			}
			for t := range tokens {
				xb := YMM()
				VPBROADCASTD(a.xsm(t, 4*k), xb)
				VPMADDWD(xb, pv, xb)
				VPADDD(xb, other[t], other[t])
			}
			for u := range 2 {
				p := make([]VecVirtual, tokens)
				for t := range p {
					p[t] = YMM()
				}
				for c := 4 * u; c < 4*u+4; c++ {
					wv := YMM()
					VMOVDQU(Mem{Base: a.w, Disp: qOff + 32*(8*h+c)}, wv)
					if j > 0 {
						VPSRLW(Imm(uint64(2*j)), wv, wv)
					}
					VPAND(m03, wv, wv)
					if q3 {
						hb := YMM()
						VMOVDQU(Mem{Base: a.w, Disp: kq3H + 32*c}, hb)
						switch b := 4*h + j; {
						case b < 2:
							VPSLLW(Imm(uint64(2-b)), hb, hb)
						case b > 2:
							VPSRLW(Imm(uint64(b-2)), hb, hb)
						}
						VPAND(m4f, hb, hb)
						VPOR(hb, wv, wv)
					}
					madd16(wv, func(t int) Mem { return a.xm(t, 128*h+32*j+4*c) }, p, c == 4*u)
				}
				// Sub-block 2k+u's scale in both halves of each lane.
				sc := YMM()
				if q3 {
					VPMOVSXBW(scm, sc)
				} else {
					VPMOVZXBW(scm, sc)
					VPAND(m4f, sc, sc)
				}
				imm := uint64(0xa0) // words 0, 0, 2, 2
				if u == 1 {
					imm = 0xf5 // words 1, 1, 3, 3
				}
				VPSHUFLW(Imm(imm), sc, sc)
				VPSHUFHW(Imm(imm), sc, sc)
				widenScaled(sc, p, sumi)
			}
		}
	}
	if q3 {
		dw := YMM()
		VMOVUPS(Mem{Base: a.w, Disp: kq3D}, dw)
		for t := range tokens {
			dx := YMM()
			VPSLLD(Imm(2), other[t], other[t])
			VPSUBD(other[t], sumi[t], sumi[t])
			VCVTDQ2PS(sumi[t], sumi[t])
			VBROADCASTSS(a.xdm(t), dx)
			VMULPS(dx, dw, dx)
			VMULPS(sumi[t], dx, dx)
			VADDPS(dx, accf[t], accf[t])
		}
		kgemmEnd(name, a, bytes, accf)
		return
	}
	kgemmEndScaleMin(name, a, bytes, tokens, kq2D, kq2Min, false, sumi, other, accf)
}
