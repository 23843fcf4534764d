package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmAVX2Kernels writes the prefill GEMM kernels for AVX2 without any
// VNNI: gemm.go's packed groups (8 weight rows, each lane one row) times 1
// to 4 tokens, as gemmKernels, with VPMADDUBSW (unsigned × signed bytes
// into saturating 16-bit pair sums) and VPMADDWD by ones (16-bit pairs into
// 32-bit sums) in place of VPDPBUSD. Every block's integer sum is exact, so
// the results are the VNNI kernels' (and gemmGo's) bits.
//
// Q4: the weights (0..15) times activations (|x| <= 128) give pair sums of
// at most 2·15·128 = 3840, so the 8 half-chunks of a block add up in 16
// bits (at most 30720) before one VPMADDWD; the block starts from
// 8·BlockSums as the VNNI kernel's.
//
// Q8: unsigned weights (w+128) times x would saturate, so each chunk is
// turned back to signed w (xor 0x80) and multiplied as |w| (unsigned, up
// to 128) times x·sign(w) (VPSIGNB; x in [-127, 127] as QuantizeQ8 makes
// it): pair sums of at most 2·128·127 = 32512, widened at once. That is
// Σ w·x directly, which equals the VNNI kernel's 128·BlockSums + Σ (w+128)·x.
func gemmAVX2Kernels() {
	for t := 1; t <= 4; t++ {
		gemmAVX2Q8(t)
		gemmAVX2Q4(t)
	}
}

// gemmAVX2Head loads the common arguments and zeroes the float
// accumulators.
type gemmAVX2Args struct {
	w, x, xd, xs, nb, s, s3, ds, ds3 Register
	accf                             []VecVirtual
}

func gemmAVX2Head(name, kind, isa string, tokens int) gemmAVX2Args {
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int32, nb, xstride int, out *float32, ostride int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s GEMM kernel for %d tokens on %s (simd.Impl.Gemm).", name, kind, tokens, isa))
	var a gemmAVX2Args
	a.w, a.x = Load(Param("w"), GP64()), Load(Param("x"), GP64())
	a.xd, a.xs = Load(Param("xd"), GP64()), Load(Param("xs"), GP64())
	a.nb, a.s = Load(Param("nb"), GP64()), Load(Param("xstride"), GP64())
	a.ds = GP64()
	MOVQ(a.s, a.ds)
	SHRQ(Imm(3), a.ds) // bytes between tokens' scales (and sums)
	a.s3, a.ds3 = GP64(), GP64()
	LEAQ(Mem{Base: a.s, Index: a.s, Scale: 2}, a.s3)
	LEAQ(Mem{Base: a.ds, Index: a.ds, Scale: 2}, a.ds3)
	a.accf = make([]VecVirtual, tokens)
	for t := range tokens {
		a.accf[t] = YMM()
		VXORPS(a.accf[t], a.accf[t], a.accf[t])
	}
	return a
}

// gemmAVX2Tail scales each token's block sum (int32 lanes in acci) into
// its float accumulator exactly as the VNNI kernels do, steps to the next
// block and, after the last, stores the rows.
func gemmAVX2Tail(name string, a gemmAVX2Args, acci []VecVirtual, blockBytes int) {
	dw := YMM()
	VCVTPH2PS(Mem{Base: a.w}, dw) // the rows' binary16 scales
	for t := range acci {
		sc := YMM()
		VCVTDQ2PS(acci[t], acci[t])
		VBROADCASTSS(tokMem(a.xd, a.ds, a.ds3, t, 0), sc)
		VMULPS(dw, sc, sc)
		VFMADD231PS(acci[t], sc, a.accf[t])
	}
	ADDQ(U32(uint32(blockBytes)), a.w)
	ADDQ(Imm(32), a.x)
	ADDQ(Imm(4), a.xd)
	ADDQ(Imm(4), a.xs)
	DECQ(a.nb)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	out, os := Load(Param("out"), GP64()), Load(Param("ostride"), GP64())
	SHLQ(Imm(2), os)
	os3 := GP64()
	LEAQ(Mem{Base: os, Index: os, Scale: 2}, os3)
	for t := range a.accf {
		VMOVUPS(a.accf[t], tokMem(out, os, os3, t, 0))
	}
	VZEROUPPER()
	RET()
}

func gemmAVX2Q8(tokens int) {
	name := fmt.Sprintf("gemmQ8T%dAVX2", tokens)
	a := gemmAVX2Head(name, "Q8", "AVX2", tokens)
	ones, m80 := YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x80, m80)
	acci := make([]VecVirtual, tokens)
	for t := range tokens {
		acci[t] = YMM()
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	gemmPrefetch(a.w, 16+256, tokens)
	for j := range 8 {
		ws, wa := YMM(), YMM()
		VPXOR(Mem{Base: a.w, Disp: 16 + 32*j}, m80, ws) // signed weights
		VPABSB(ws, wa)
		for t := range tokens {
			xb := YMM()
			VPBROADCASTD(tokMem(a.x, a.s, a.s3, t, 4*j), xb)
			VPSIGNB(ws, xb, xb)
			VPMADDUBSW(xb, wa, xb)
			if j == 0 {
				VPMADDWD(ones, xb, acci[t])
				continue
			}
			VPMADDWD(ones, xb, xb)
			VPADDD(xb, acci[t], acci[t])
		}
	}
	gemmAVX2Tail(name, a, acci, 16+256)
}

func gemmAVX2Q4(tokens int) {
	name := fmt.Sprintf("gemmQ4T%dAVX2", tokens)
	a := gemmAVX2Head(name, "Q4", "AVX2", tokens)
	ones, mask := YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x0f, mask)
	acc := make([]VecVirtual, tokens)
	for t := range tokens {
		acc[t] = YMM()
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	gemmPrefetch(a.w, 16+128, tokens)
	first := true
	step := func(wv VecVirtual, xoff int) {
		for t := range tokens {
			xb := YMM()
			VPBROADCASTD(tokMem(a.x, a.s, a.s3, t, xoff), xb)
			if first {
				VPMADDUBSW(xb, wv, acc[t])
				continue
			}
			VPMADDUBSW(xb, wv, xb)
			VPADDW(xb, acc[t], acc[t])
		}
		first = false
	}
	for j := range 4 {
		raw, lo := YMM(), YMM()
		VMOVDQU(Mem{Base: a.w, Disp: 16 + 32*j}, raw)
		VPAND(mask, raw, lo)
		step(lo, 4*j)
		VPSRLW(Imm(4), raw, raw)
		VPAND(mask, raw, raw)
		step(raw, 16+4*j)
	}
	for t := range tokens {
		base := YMM()
		VPMADDWD(ones, acc[t], acc[t])
		VPBROADCASTD(tokMem(a.xs, a.ds, a.ds3, t, 0), base)
		VPSLLD(Imm(3), base, base)
		VPADDD(base, acc[t], acc[t])
	}
	gemmAVX2Tail(name, a, acc, 16+128)
}

// gemmPrefetchBytes is how far ahead of the packed block in hand the
// one-token Q8_0/Q4_0 GEMM kernels (AVX2, AVX-VNNI, AVX-512 VNNI)
// prefetch. Decode streams each packed block once from memory, where the
// AVX2 one-token kernel on 768-wide rows (BenchmarkQDecode, medians of 6
// alternated runs on a loaded 2-core EPYC) read 12.0 (Q4_0) and 12.6
// (Q8_0) GGUF-GB/s per CPU second without it, 14.8 and 14.7 with it
// (1024 bytes ahead gave the same, 512 less). The several-token kernels
// (prefill) compute long enough per block for the hardware prefetcher.
const gemmPrefetchBytes = 2048

// gemmPrefetch prefetches, in a one-token kernel, every 64-byte line of
// the packed block gemmPrefetchBytes ahead of w (bytes long: consecutive
// blocks' prefetches are at most 64 bytes apart, so none is skipped).
// Groups follow each other, so this runs on across the calls of a decode
// product; past the matrix's end it touches nothing (prefetches do not
// fault).
func gemmPrefetch(w Register, bytes, tokens int) {
	if tokens != 1 {
		return
	}
	for off := 0; off < bytes; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: gemmPrefetchBytes + off})
	}
}
