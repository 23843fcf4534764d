package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The K-quant prefill GEMM kernels (AVX-512 VNNI on 256-bit vectors): one
// packed group of 8 weight rows (gemmk.go's layout) times 1 to 4 tokens
// quantized by QuantizeQ8K. Each lane is one weight row: a sub-block's
// unsigned values meet four broadcast activations per VPDPBUSD, the
// sub-block sum is multiplied by the lane's scale (VPMULLD) into the
// block's exact int32 sum, and the mins (Q4_K, Q5_K) or the value offset
// of 32 (Q6_K) are taken through the activations' 16-value sums by
// VPDPWSSD (Q2_K and Q3_K likewise, over sub-blocks of 16). The block's
// float operations are kquant.go's blockSum, per lane, so each lane's
// result is DotK's bits for its row.

// Packed block offsets (bytes within one group's block; gemmk.go).
const (
	kq4D, kq4Min, kq4SM, kq4Q, kq4Bytes = 0, 16, 32, 128, 1152
	kq5QH, kq5Bytes                     = 1152, 1408
	kq6D, kq6Sc, kq6QL, kq6QH, kq6Bytes = 0, 32, 160, 1184, 1696
)

func gemmKKernels() {
	for t := 1; t <= 4; t++ {
		gemmQ45K(false, t)
		gemmQ45K(true, t)
		gemmQ6K(t)
		gemmQ23K(false, t)
		gemmQ23K(true, t)
	}
}

// kgemmArgs is a K-quant GEMM kernel's addressing: token t's activations
// at x + t*xstride, its scale at xd + t*xstride/64 bytes and its sums at
// xs + t*xstride/8 bytes.
type kgemmArgs struct {
	w, x, xd, xs, nb Register
	s, s3            Register // xstride, 3*xstride
	ds, ds3          Register // xstride/64 ...
	ss, ss3          Register // xstride/8 ...
}

func kgemmParams(tokens int) kgemmArgs {
	var a kgemmArgs
	a.w, a.x = Load(Param("w"), GP64()), Load(Param("x"), GP64())
	a.xd, a.xs = Load(Param("xd"), GP64()), Load(Param("xs"), GP64())
	a.nb, a.s = Load(Param("nb"), GP64()), Load(Param("xstride"), GP64())
	a.ds, a.ss = GP64(), GP64()
	MOVQ(a.s, a.ds)
	SHRQ(Imm(6), a.ds)
	MOVQ(a.s, a.ss)
	SHRQ(Imm(3), a.ss)
	if tokens == 4 {
		a.s3, a.ds3, a.ss3 = GP64(), GP64(), GP64()
		LEAQ(Mem{Base: a.s, Index: a.s, Scale: 2}, a.s3)
		LEAQ(Mem{Base: a.ds, Index: a.ds, Scale: 2}, a.ds3)
		LEAQ(Mem{Base: a.ss, Index: a.ss, Scale: 2}, a.ss3)
	}
	return a
}

// tokMem is token t's element at base + t*stride + disp.
func tokMem(base, str, str3 Register, t, disp int) Mem {
	switch t {
	case 0:
		return Mem{Base: base, Disp: disp}
	case 1:
		return Mem{Base: base, Index: str, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: base, Index: str, Scale: 2, Disp: disp}
	}
	return Mem{Base: base, Index: str3, Scale: 1, Disp: disp}
}

func (a kgemmArgs) xm(t, off int) Mem  { return tokMem(a.x, a.s, a.s3, t, off) }
func (a kgemmArgs) xdm(t int) Mem      { return tokMem(a.xd, a.ds, a.ds3, t, 0) }
func (a kgemmArgs) xsm(t, off int) Mem { return tokMem(a.xs, a.ss, a.ss3, t, off) }

// zeroVecs returns n zeroed vectors, copies of zero: avo takes VPXORD's
// inputs as read, so a register zeroed by VPXORD itself would be live from
// the function's entry (VPXOR, which avo knows, cannot reach Y16-Y31).
func zeroVecs(zero VecVirtual, n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for i := range v {
		v[i] = YMM()
		VMOVDQA32(zero, v[i])
	}
	return v
}

// newZero returns a zeroed vector, live from the function's entry.
func newZero() VecVirtual {
	z := YMM()
	VPXORD(z, z, z)
	return z
}

// kgemmEnd advances to the next block and, after the last, stores the
// accumulators.
func kgemmEnd(name string, a kgemmArgs, blockBytes int, accf []VecVirtual) {
	ADDQ(U32(uint32(blockBytes)), a.w)
	ADDQ(U32(256), a.x)
	ADDQ(Imm(4), a.xd)
	ADDQ(Imm(32), a.xs)
	DECQ(a.nb)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	out, os := Load(Param("out"), GP64()), Load(Param("ostride"), GP64())
	SHLQ(Imm(2), os)
	os3 := GP64()
	LEAQ(Mem{Base: os, Index: os, Scale: 2}, os3)
	for t := range accf {
		VMOVUPS(accf[t], tokMem(out, os, os3, t, 0))
	}
	VZEROUPPER()
	RET()
}

// addScaled adds each token's sums p, times the signed 16-bit scale u of
// every 32-bit lane of sv (u 0 the low half, 1 the high), to its sumi.
func addScaled(sv VecVirtual, u int, p, sumi []VecVirtual) {
	sc := YMM()
	if u == 0 {
		VPSLLD(Imm(16), sv, sc)
		VPSRAD(Imm(16), sc, sc)
	} else {
		VPSRAD(Imm(16), sv, sc)
	}
	for t := range p {
		VPMULLD(sc, p[t], p[t])
		VPADDD(p[t], sumi[t], sumi[t])
	}
}

// kgemmEndScaleMin ends a block of a type with scales and mins (Q4_K,
// Q5_K, Q2_K): per token, accf += dx·d·sumi - dx·dmin·summ, with d and dmin
// the group's eight rows' f32 values at offsets dOff and minOff, then
// kgemmEnd.
func kgemmEndScaleMin(name string, a kgemmArgs, bytes, tokens, dOff, minOff int, f16 bool, sumi, summ, accf []VecVirtual) {
	dw, dm := YMM(), YMM()
	if f16 { // binary16 d and dmin (Q4_K, Q5_K): exact in f32
		VCVTPH2PS(Mem{Base: a.w, Disp: dOff}, dw)
		VCVTPH2PS(Mem{Base: a.w, Disp: minOff}, dm)
	} else {
		VMOVUPS(Mem{Base: a.w, Disp: dOff}, dw)
		VMOVUPS(Mem{Base: a.w, Disp: minOff}, dm)
	}
	for t := range tokens {
		dx, d, dmin := YMM(), YMM(), YMM()
		VBROADCASTSS(a.xdm(t), dx)
		VMULPS(dx, dw, d)
		VMULPS(dx, dm, dmin)
		VCVTDQ2PS(sumi[t], sumi[t])
		VCVTDQ2PS(summ[t], summ[t])
		VMULPS(sumi[t], d, d)
		VMULPS(summ[t], dmin, dmin)
		VSUBPS(dmin, d, d)
		VADDPS(d, accf[t], accf[t])
	}
	kgemmEnd(name, a, bytes, accf)
}

// shiftTo4 moves bit b of every byte of v to bit 4 (other bits left as
// they come).
func shiftTo4(v VecVirtual, b int) {
	switch {
	case b < 4:
		VPSLLW(Imm(uint64(4-b)), v, v)
	case b > 4:
		VPSRLW(Imm(uint64(b-4)), v, v)
	}
}

const kgemmSig = "func(w *byte, x *int8, xd *float32, xs *int16, nb, xstride int, out *float32, ostride int)"

// gemmQ45K writes gemmQ4KT<tokens>VNNI (gemmQ5KT... with q5).
func gemmQ45K(q5 bool, tokens int) {
	kind, bytes := "Q4K", kq4Bytes
	if q5 {
		kind, bytes = "Q5K", kq5Bytes
	}
	name := fmt.Sprintf("gemm%sT%dVNNI", kind, tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens (simd.Impl.GemmK).", name, kind, tokens))
	a := kgemmParams(tokens)
	z := newZero()
	mask, bit4 := YMM(), YMM()
	broadcastB(0x0f, mask)
	if q5 {
		broadcastB(0x10, bit4)
	}
	accf := zeroVecs(z, tokens)
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, bytes, tokens)
	tbl := AllocLocal(128)
	kq4Unpack(a.w, tbl, mask, true)
	sumi, summ := zeroVecs(z, tokens), zeroVecs(z, tokens)
	// Sub-blocks 2g (low nibbles) and 2g+1 (high ones) share each load.
	for g := range 4 {
		p := [2][]VecVirtual{zeroVecs(z, tokens), zeroVecs(z, tokens)}
		for j := range 8 {
			raw, lo, hi := YMM(), YMM(), YMM()
			VMOVDQU32(Mem{Base: a.w, Disp: kq4Q + 32*(8*g+j)}, raw)
			VPANDD(mask, raw, lo)
			VPSRLW(Imm(4), raw, hi)
			VPANDD(mask, hi, hi)
			for i, wv := range []VecVirtual{lo, hi} {
				s := 2*g + i
				if q5 {
					h := YMM()
					VMOVDQU32(Mem{Base: a.w, Disp: kq5QH + 32*j}, h)
					shiftTo4(h, s)
					VPANDD(bit4, h, h)
					VPORD(h, wv, wv)
				}
				for t := range tokens {
					VPDPBUSD_BCST(a.xm(t, 32*s+4*j), wv, p[i][t])
				}
			}
		}
		for i := range 2 {
			s := 2*g + i
			sc := YMM()
			VPMOVZXBD(tbl.Offset(8*s), sc)
			for t := range tokens {
				VPMULLD(sc, p[i][t], p[i][t])
				VPADDD(p[i][t], sumi[t], sumi[t])
			}
			// The min, in both 16-bit halves, meets the sub-block's two sums.
			m, m2 := YMM(), YMM()
			VPMOVZXBD(tbl.Offset(64+8*s), m)
			VPSLLD(Imm(16), m, m2)
			VPORD(m2, m, m)
			for t := range tokens {
				VPDPWSSD_BCST(a.xsm(t, 4*s), m, summ[t])
			}
		}
	}
	kgemmEndScaleMin(name, a, bytes, tokens, kq4D, kq4Min, true, sumi, summ, accf)
}

// gemmQ6K writes gemmQ6KT<tokens>VNNI: values unsigned (0..63), the offset
// of 32 removed as 32·Σ_s sc_s·xs_s.
func gemmQ6K(tokens int) {
	name := fmt.Sprintf("gemmQ6KT%dVNNI", tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the Q6K GEMM kernel for %d tokens (simd.Impl.GemmK).", name, tokens))
	a := kgemmParams(tokens)
	z := newZero()
	mask, m30 := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(0x30, m30)
	accf := zeroVecs(z, tokens)
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, kq6Bytes, tokens)
	sumi, osum := zeroVecs(z, tokens), zeroVecs(z, tokens)
	for h := range 2 {
		for q := range 4 {
			k := 4*h + q // the pair of sub-blocks 2k, 2k+1
			pv := YMM()
			VPMOVSXBW(Mem{Base: a.w, Disp: kq6Sc + 16*k}, pv)
			for t := range tokens {
				VPDPWSSD_BCST(a.xsm(t, 4*k), pv, osum[t])
			}
			for u := range 2 {
				p := zeroVecs(z, tokens)
				for j := 4 * u; j < 4*u+4; j++ {
					wv, hb := YMM(), YMM()
					ql := Mem{Base: a.w, Disp: kq6QL + 32*(16*h+8*(q%2)+j)}
					if q >= 2 {
						VMOVDQU32(ql, wv)
						VPSRLW(Imm(4), wv, wv)
						VPANDD(mask, wv, wv)
					} else {
						VPANDD(ql, mask, wv)
					}
					VMOVDQU32(Mem{Base: a.w, Disp: kq6QH + 32*(8*h+j)}, hb)
					switch {
					case q < 2:
						VPSLLW(Imm(uint64(4-2*q)), hb, hb)
					case q == 3:
						VPSRLW(Imm(2), hb, hb)
					}
					VPANDD(m30, hb, hb)
					VPORD(hb, wv, wv)
					for t := range tokens {
						VPDPBUSD_BCST(a.xm(t, 128*h+32*q+4*j), wv, p[t])
					}
				}
				addScaled(pv, u, p, sumi)
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

// Packed block offsets of Q2_K and Q3_K (gemmk.go).
const (
	kq2D, kq2Min, kq2Sc, kq2Q, kq2Bytes = 0, 32, 64, 192, 704
	kq3D, kq3Sc, kq3Q, kq3H, kq3Bytes   = 0, 32, 160, 672, 928
)

// gemmQ23K writes gemmQ2KT<tokens>VNNI (gemmQ3KT... with q3): 2-bit
// values (Q3_K: plus the high bit, 0..7, the offset of 4 removed as
// 4·Σ_s sc_s·xs_s), sub-blocks of 16 whose scales (Q2_K: and mins) come
// in pairs per lane.
func gemmQ23K(q3 bool, tokens int) {
	kind, bytes := "Q2K", kq2Bytes
	if q3 {
		kind, bytes = "Q3K", kq3Bytes
	}
	name := fmt.Sprintf("gemm%sT%dVNNI", kind, tokens)
	TEXT(name, NOSPLIT, kgemmSig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens (simd.Impl.GemmK).", name, kind, tokens))
	a := kgemmParams(tokens)
	z := newZero()
	m03, m04, m0f := YMM(), YMM(), YMM()
	broadcastB(0x03, m03)
	if q3 {
		broadcastB(0x04, m04)
	} else {
		broadcastB(0x0f, m0f)
	}
	accf := zeroVecs(z, tokens)
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	kgemmPrefetch(a, bytes, tokens)
	sumi, other := zeroVecs(z, tokens), zeroVecs(z, tokens) // other: Σm·xs (Q2_K), Σsc·xs (Q3_K)
	scOff, qOff := kq2Sc, kq2Q
	if q3 {
		scOff, qOff = kq3Sc, kq3Q
	}
	for h := range 2 {
		for j := range 4 {
			k := 4*h + j // the pair of sub-blocks 2k, 2k+1
			pv, sv := YMM(), YMM()
			if q3 {
				VPMOVSXBW(Mem{Base: a.w, Disp: scOff + 16*k}, pv)
				for t := range tokens {
					VPDPWSSD_BCST(a.xsm(t, 4*k), pv, other[t])
				}
				sv = pv
			} else {
				VPMOVZXBW(Mem{Base: a.w, Disp: scOff + 16*k}, pv)
				mins := YMM()
				VPSRLW(Imm(4), pv, mins)
				for t := range tokens {
					VPDPWSSD_BCST(a.xsm(t, 4*k), mins, other[t])
				}
				VPANDD(m0f, pv, sv)
			}
			for u := range 2 {
				p := zeroVecs(z, tokens)
				for c := 4 * u; c < 4*u+4; c++ {
					wv := YMM()
					VMOVDQU32(Mem{Base: a.w, Disp: qOff + 32*(8*h+c)}, wv)
					if j > 0 {
						VPSRLW(Imm(uint64(2*j)), wv, wv)
					}
					VPANDD(m03, wv, wv)
					if q3 {
						hb := YMM()
						VMOVDQU32(Mem{Base: a.w, Disp: kq3H + 32*c}, hb)
						switch b := 4*h + j; {
						case b < 2:
							VPSLLW(Imm(uint64(2-b)), hb, hb)
						case b > 2:
							VPSRLW(Imm(uint64(b-2)), hb, hb)
						}
						VPANDD(m04, hb, hb)
						VPORD(hb, wv, wv)
					}
					for t := range tokens {
						VPDPBUSD_BCST(a.xm(t, 128*h+32*j+4*c), wv, p[t])
					}
				}
				addScaled(sv, u, p, sumi)
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
