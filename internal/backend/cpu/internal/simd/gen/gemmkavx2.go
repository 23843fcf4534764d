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
// most 8·31·127; Q6_K: 2 chunks, at most 4·63·127) and are then widened by
// VPMADDWD against the lane's sub-block scale in both 16-bit halves, which
// also applies the scale (the VNNI kernels' VPMULLD). The mins and offsets
// meet the activations' 16-value sums through VPMADDWD (the VNNI kernels'
// VPDPWSSD). Every integer sum is exact and the block's float operations
// are the VNNI kernels', so each lane gets DotK's bits for its row. With 16
// vector registers a call takes at most 3 tokens (Q5_K and Q6_K 2); the Go
// wrapper splits larger tiles.

func gemmKAVX2Kernels() {
	for t := 1; t <= 3; t++ {
		gemmQ45KAVX2(false, t)
	}
	for t := 1; t <= 2; t++ {
		gemmQ45KAVX2(true, t)
		gemmQ6KAVX2(t)
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
				VPMOVZXBD(Mem{Base: a.w, Disp: kq4Sc + 8*s}, sc)
				bothHalves(sc)
				widenScaled(sc, p, sumi)
			}
		}
		// The min, in both 16-bit halves, meets the sub-block's two sums.
		m := YMM()
		VPMOVZXBD(Mem{Base: a.w, Disp: kq4M + 8*s}, m)
		bothHalves(m)
		for t := range tokens {
			xb := YMM()
			VPBROADCASTD(a.xsm(t, 4*s), xb)
			VPMADDWD(xb, m, xb)
			VPADDD(xb, summ[t], summ[t])
		}
	}
	kgemmEndScaleMin(name, a, bytes, tokens, kq4D, kq4Min, sumi, summ, accf)
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
