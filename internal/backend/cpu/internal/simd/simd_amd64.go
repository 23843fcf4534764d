package simd

import (
	"math"

	"github.com/x448/float16"
	"golang.org/x/sys/cpu"
)

// AVX2 is the amd64 assembly implementation (AVX2, FMA, F16C; x/sys/cpu
// does not report F16C, which every AVX2 processor has).
var AVX2 = &Impl{
	Name:     "avx2",
	dotF32:   dotF32A,
	dotF32x4: dotF32x4A,
	dotF16:   dotF16A,
	dotBF16:  dotBF16A,
	dotI8:    dotI8A,
	dotI4:    dotI4A,
	dotQ8:    dotQ8A,
	dotQ4:    dotQ4A,
	dotQ4x4:  dotQ4x4A,
	dotQ8x4:  dotQ8x4A,
	wsumF32:  wsumF32A,
	wsumF16:  wsumF16A,

	gemmPanel: &gemmPanelAVX2,

	dotF32Rows: dotF32RowsA,
	dotQ8Rows:  dotQ8RowsA,
	dotQ4Rows:  dotQ4RowsA,
	expSub:     expSubA,
	swiglu:     swigluA,
	decayRank1: decayRank1A,
	quantQ8:    quantizeQ8A,
	quantQ8K:   quantizeQ8KA,
	dotK: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16) float32{
		Q4K: kernelK(dotQ4KAVX2), Q5K: kernelK(dotQ5KAVX2), Q6K: kernelK(dotQ6KAVX2),
		Q2K: kernelK(dotQ2KAVX2), Q3K: kernelK(dotQ3KAVX2), IQ4XS: kernelK(dotIQ4XSAVX2), IQ3S: kernelK(dotIQ3SAVX2), IQ3XXS: kernelK(dotIQ3XXSAVX2), IQ2XXS: kernelK(dotIQ2XXSAVX2),
	},
	dotKRows: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, out []float32){
		Q4K: kernelKRows(dotQ4KRowsAVX2), Q5K: kernelKRows(dotQ5KRowsAVX2), Q6K: kernelKRows(dotQ6KRowsAVX2),
		Q2K: kernelKRows(dotQ2KRowsAVX2), Q3K: kernelKRows(dotQ3KRowsAVX2), IQ4XS: kernelKRows4A(dotIQ4XSRows4AVX2, dotIQ4XSRowsAVX2), IQ3S: iq3sRowsA(), IQ3XXS: kernelKRows(dotIQ3XXSRowsAVX2), IQ2XXS: kernelKRows(dotIQ2XXSRowsAVX2),
	},
	dotKx4: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32){
		Q4K: kernelKx4(Q4K, dotQ4Kx4AVX2), Q5K: kernelKx4(Q5K, dotQ5Kx4AVX2), Q6K: kernelKx4(Q6K, dotQ6Kx4AVX2),
	},
	dotQ32: [NumQ32]func(w []byte, x []int8, xd []float32) float32{
		Q4_1: kernelQ32(dotQ4_1AVX2), Q5_0: kernelQ32(dotQ5_0AVX2), Q5_1: kernelQ32(dotQ5_1AVX2), Q8_0: q8_0A,
		MXFP4: mxfp4A, IQ4_NL: iq4nlA,
	},
	dotQ32Rows: [NumQ32]func(w []byte, x []int8, xd []float32, out []float32){Q8_0: q8_0RowsA, MXFP4: mxfp4RowsA, IQ4_NL: iq4nlRowsA},
	// The prefill GEMM with VPMADDUBSW and VPMADDWD (gen/gemmavx2.go): the
	// VNNI kernels' bits.
	gemm: [NumGemmKinds]gemmFunc{
		GemmQ8: gemmA([4]gemmKernel{gemmQ8T1AVX2, gemmQ8T2AVX2, gemmQ8T3AVX2, gemmQ8T4AVX2}),
		GemmQ4: gemmA([4]gemmKernel{gemmQ4T1AVX2, gemmQ4T2AVX2, gemmQ4T3AVX2, gemmQ4T4AVX2}),
	},
	// The K-quant GEMM (gen/gemmkavx2.go): DotK's bits.
	gemmK: [NumKQuant]gemmKFunc{
		Q4K: gemmKSplitA(gemmQ4KT1AVX2, gemmQ4KT2AVX2, gemmQ4KT3AVX2),
		Q5K: gemmKSplitA(gemmQ5KT1AVX2, gemmQ5KT2AVX2),
		Q6K: gemmKSplitA(gemmQ6KT1AVX2, gemmQ6KT2AVX2),
		Q2K: gemmKSplitA(gemmQ2KT1AVX2, gemmQ2KT2AVX2),
		Q3K: gemmKSplitA(gemmQ3KT1AVX2, gemmQ3KT2AVX2),
	},
}

// gemmKSplitA wraps K-quant GEMM kernels for 1 to len(ks) tokens (fewer
// than 4: 16 vector registers), splitting a larger call into even parts
// (GemmK checked the slices).
func gemmKSplitA(ks ...gemmKKernel) gemmKFunc {
	return func(w []byte, x []int8, xd []float32, xs []int16, nb, xstride, ntok int, out []float32, ostride int) {
		for t0 := 0; t0 < ntok; {
			n := min(len(ks), ntok-t0)
			if rest := ntok - t0; rest > len(ks) && rest <= 2*len(ks) {
				n = (rest + 1) / 2
			}
			k := t0 * xstride
			ks[n-1](&w[0], &x[k], &xd[k/QK], &xs[k/QKSum], nb, xstride, &out[t0*ostride], ostride)
			t0 += n
		}
	}
}

// kernelKRows4A wraps a four-row K-quant kernel, the rows past a multiple
// of four going to the several-rows kernel one.
func kernelKRows4A(four func(w *byte, x *int8, xd *float32, xs *int16, nb, groups int, out *float32),
	one func(w *byte, x *int8, xd *float32, xs *int16, nb, rows int, out *float32)) func(w []byte, x []int8, xd []float32, xs []int16, out []float32) {
	rest := kernelKRows(one)
	return func(w []byte, x []int8, xd []float32, xs []int16, out []float32) {
		g := len(out) / 4
		if g == 0 || len(xd) == 0 {
			rest(w, x, xd, xs, out)
			return
		}
		four(&w[0], &x[0], &xd[0], &xs[0], len(xd), g, &out[0])
		if n := 4 * g; n < len(out) {
			rb := len(w) / len(out)
			rest(w[n*rb:], x, xd, xs, out[n:])
		}
	}
}

// iq3sRowsA is the IQ3_S rows function: the four-row kernel, in its PDEP
// form where the CPU has BMI2 and a fast PDEP (fastPDEP), else in its
// AVX2 form.
func iq3sRowsA() func(w []byte, x []int8, xd []float32, xs []int16, out []float32) {
	if cpu.X86.HasBMI2 && fastPDEP() {
		return kernelKRows4A(dotIQ3SRows4BMI2, dotIQ3SRowsAVX2)
	}
	return kernelKRows4A(dotIQ3SRows4AVX2, dotIQ3SRowsAVX2)
}

// fastPDEP reports whether PDEP is a single fast instruction here: not on
// AMD's families 0x17 (Zen, Zen 2) and 0x18 (Hygon), which microcode it
// (tens to hundreds of cycles, by the mask's bits).
func fastPDEP() bool {
	f := cpuFamilyAMD64()
	return f != 0x17 && f != 0x18
}

// q8_0RowsA and q8_0A run the Q8_0 rows kernel (the slices already
// checked; q8_0A's with at least one block).
func q8_0RowsA(w []byte, x []int8, xd []float32, out []float32) {
	dotQ8_0RowsAVX2(&w[0], &x[0], &xd[0], len(xd), len(out), &out[0])
}

func q8_0A(w []byte, x []int8, xd []float32) float32 {
	if len(xd) == 0 {
		return 0
	}
	var out [1]float32
	dotQ8_0RowsAVX2(&w[0], &x[0], &xd[0], len(xd), 1, &out[0])
	return out[0]
}

// mxfp4RowsA and mxfp4A run the MXFP4 rows kernel (the slices already
// checked; mxfp4A's with at least one block).
func mxfp4RowsA(w []byte, x []int8, xd []float32, out []float32) {
	dotMXFP4RowsAVX2(&w[0], &x[0], &xd[0], len(xd), len(out), &out[0])
}

func mxfp4A(w []byte, x []int8, xd []float32) float32 {
	if len(xd) == 0 {
		return 0
	}
	var out [1]float32
	dotMXFP4RowsAVX2(&w[0], &x[0], &xd[0], len(xd), 1, &out[0])
	return out[0]
}

// iq4nlRowsA and iq4nlA run the IQ4_NL rows kernel (the slices already
// checked; iq4nlA's with at least one block).
func iq4nlRowsA(w []byte, x []int8, xd []float32, out []float32) {
	dotIQ4NLRowsAVX2(&w[0], &x[0], &xd[0], len(xd), len(out), &out[0])
}

func iq4nlA(w []byte, x []int8, xd []float32) float32 {
	if len(xd) == 0 {
		return 0
	}
	var out [1]float32
	dotIQ4NLRowsAVX2(&w[0], &x[0], &xd[0], len(xd), 1, &out[0])
	return out[0]
}

// VNNI is AVX2 with the prefill GEMM kernels of AVX-512 VNNI (on 256-bit
// vectors, which need AVX512VL) and its four-row decode kernels for Q4_K,
// Q5_K and Q6_K (same bits as AVX2's).
var VNNI = func() *Impl {
	k := *AVX2
	k.Name = "avx512vnni"
	k.dotF32x2x4 = dotF32x2x4A
	k.dotKRows[Q4K] = kernelKRows4A(dotQ4KRows4VNNI, dotQ4KRowsAVX2)
	k.dotKRows[Q5K] = kernelKRows4A(dotQ5KRows4VNNI, dotQ5KRowsAVX2)
	k.dotKRows[Q6K] = kernelKRows4A(dotQ6KRows4VNNI, dotQ6KRowsAVX2)
	k.dotF32Rows = dotF32Rows8A
	k.gemmF32 = &[GemmF32Tokens]gemmF32Kernel{gemmF32T1AVX512, gemmF32T2AVX512, gemmF32T3AVX512, gemmF32T4AVX512, gemmF32T5AVX512, gemmF32T6AVX512}
	k.gemm = [NumGemmKinds]gemmFunc{
		GemmQ8: gemmA([4]gemmKernel{gemmQ8T1VNNI, gemmQ8T2VNNI, gemmQ8T3VNNI, gemmQ8T4VNNI}),
		GemmQ4: gemmA([4]gemmKernel{gemmQ4T1VNNI, gemmQ4T2VNNI, gemmQ4T3VNNI, gemmQ4T4VNNI}),
	}
	k.gemmK = [NumKQuant]gemmKFunc{
		Q4K: gemmKA([4]gemmKKernel{gemmQ4KT1VNNI, gemmQ4KT2VNNI, gemmQ4KT3VNNI, gemmQ4KT4VNNI}),
		Q5K: gemmKA([4]gemmKKernel{gemmQ5KT1VNNI, gemmQ5KT2VNNI, gemmQ5KT3VNNI, gemmQ5KT4VNNI}),
		Q6K: gemmKA([4]gemmKKernel{gemmQ6KT1VNNI, gemmQ6KT2VNNI, gemmQ6KT3VNNI, gemmQ6KT4VNNI}),
		Q2K: gemmKA([4]gemmKKernel{gemmQ2KT1VNNI, gemmQ2KT2VNNI, gemmQ2KT3VNNI, gemmQ2KT4VNNI}),
		Q3K: gemmKA([4]gemmKKernel{gemmQ3KT1VNNI, gemmQ3KT2VNNI, gemmQ3KT3VNNI, gemmQ3KT4VNNI}),
	}
	return &k
}()

// AVXVNNI is AVX2 with the prefill GEMM kernels of AVX-VNNI (VEX
// VPDPBUSD, gen/gemmavxvnni.go: the same bits), for CPUs that have it
// without AVX-512 (Intel's Alder Lake and later desktop chips); the
// K-quant GEMMs stay AVX2's.
var AVXVNNI = func() *Impl {
	k := *AVX2
	k.Name = "avxvnni"
	k.gemm = [NumGemmKinds]gemmFunc{
		GemmQ8: gemmA([4]gemmKernel{gemmQ8T1AVXVNNI, gemmQ8T2AVXVNNI, gemmQ8T3AVXVNNI, gemmQ8T4AVXVNNI}),
		GemmQ4: gemmA([4]gemmKernel{gemmQ4T1AVXVNNI, gemmQ4T2AVXVNNI, gemmQ4T3AVXVNNI, gemmQ4T4AVXVNNI}),
	}
	return &k
}()

type gemmKernel func(w *byte, x *int8, xd *float32, xs *int32, nb, xstride int, out *float32, ostride int)

// gemmA wraps the GEMM kernels for 1 to 4 tokens (Gemm checked the
// slices).
func gemmA(ks [4]gemmKernel) gemmFunc {
	return func(w []byte, x []int8, xd []float32, xs []int32, nb, xstride, ntok int, out []float32, ostride int) {
		ks[ntok-1](&w[0], &x[0], &xd[0], &xs[0], nb, xstride, &out[0], ostride)
	}
}

type gemmKKernel func(w *byte, x *int8, xd *float32, xs *int16, nb, xstride int, out *float32, ostride int)

// gemmKA wraps the K-quant GEMM kernels for 1 to 4 tokens (GemmK checked
// the slices).
func gemmKA(ks [4]gemmKKernel) gemmKFunc {
	return func(w []byte, x []int8, xd []float32, xs []int16, nb, xstride, ntok int, out []float32, ostride int) {
		ks[ntok-1](&w[0], &x[0], &xd[0], &xs[0], nb, xstride, &out[0], ostride)
	}
}

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		impls = append(impls, AVX2)
		if cpu.X86.HasAVXVNNI {
			impls = append(impls, AVXVNNI)
		}
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI {
			impls = append(impls, VNNI)
		}
	}
	best = Best()
}

// The wrappers run the assembly on whole vectors and finish in Go.

func dotF32A(a, x []float32) float32 { return dotF32Vec(dotF32AVX2, 8, a, x) }

func dotF32x4A(a, x []float32, stride int, out *[4]float32) {
	dotF32x4Vec(dotF32x4AVX2, 8, a, x, stride, out)
}

func dotF32x2x4A(a0, a1, x []float32, stride int, out *[8]float32) {
	n := len(a0) &^ 7
	if n == 0 {
		dotF32x4Go(a0, x, stride, (*[4]float32)(out[:4]))
		dotF32x4Go(a1, x, stride, (*[4]float32)(out[4:]))
		return
	}
	dotF32x2x4AVX512(&a0[0], &a1[0], &x[0], stride, n, &out[0])
	for r, a := range [2][]float32{a0, a1} {
		for j := range 4 {
			xj := x[j*stride:]
			for i := n; i < len(a); i++ {
				out[4*r+j] += a[i] * xj[i]
			}
		}
	}
}

func dotF16A(a []uint16, x []float32) float32 { return dotF16Vec(dotF16AVX2, a, x) }

func dotBF16A(a []uint16, x []float32) float32 { return dotBF16Vec(dotBF16AVX2, a, x) }

func dotI8A(q []int8, sc []float32, block int, x []float32) float32 {
	return dotI8Vec(dotI8F32AVX2, 8, q, sc, block, x)
}

func dotI4A(q []byte, sc []float32, block int, x []float32) float32 {
	return dotI4Vec(dotI4F32AVX2, 32, q, sc, block, x)
}

func dotQ8A(w []int8, ws []uint16, per int, x []int8, xd []float32) float32 {
	if len(ws) == 0 || per <= 0 {
		return 0
	}
	if per == 1 {
		return dotQ8Q8BlocksAVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws))
	}
	return dotQ8Q8AVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), per)
}

func dotQ4A(w []byte, ws []uint16, per int, x []int8, xd []float32) float32 {
	if len(ws) == 0 || per <= 0 {
		return 0
	}
	if per == 1 {
		return dotQ4Q8BlocksAVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws))
	}
	return dotQ4Q8AVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), per)
}

func dotF32RowsA(a, x, out []float32) {
	n := len(x)
	if n%8 != 0 || n == 0 || len(out) == 0 {
		for i := range out {
			out[i] = dotF32A(a[i*n:(i+1)*n], x)
		}
		return
	}
	dotF32RowsAVX2(&a[0], &x[0], n, len(out), &out[0])
}

func dotQ8RowsA(w []int8, ws []uint16, x []int8, xd []float32, out []float32, wsStride int) {
	dotQ8Q8BlocksRowsAVX2(&w[0], &ws[0], &x[0], &xd[0], len(xd), len(out), &out[0], 2*wsStride)
}

func dotQ4RowsA(w []byte, ws []uint16, x []int8, xd []float32, out []float32, wsStride int) {
	dotQ4Q8BlocksRowsAVX2(&w[0], &ws[0], &x[0], &xd[0], len(xd), len(out), &out[0], 2*wsStride)
}

func expSubA(out, in []float32, sub float32) { expSubVec(expSubF32AVX2, out, in, sub) }

func swigluA(out, g, u []float32) { swigluVec(swigluF32AVX2, out, g, u) }

func decayRank1A(s, k, delta []float32, gamma float32) {
	decayRank1F32AVX2(&s[0], &k[0], &delta[0], gamma, len(k), len(delta))
}

func dotQ4x4A(w []byte, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	if len(ws) == 0 || per <= 0 {
		*out = [4]float32{}
		return
	}
	if per == 1 {
		dotQ4Q8x4BlocksAVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), xstride, xstride/QBlock, &out[0])
		return
	}
	dotQ4Q8x4AVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), per, xstride, xstride/QBlock, &out[0])
}

func dotQ8x4A(w []int8, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	if len(ws) == 0 || per <= 0 {
		*out = [4]float32{}
		return
	}
	if per == 1 {
		dotQ8Q8x4BlocksAVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), xstride, xstride/QBlock, &out[0])
		return
	}
	dotQ8Q8x4AVX2(&w[0], &ws[0], &x[0], &xd[0], len(ws), per, xstride, xstride/QBlock, &out[0])
}

func wsumF32A(out, v []float32, stride int, w []float32) {
	wsumF32Vec(weightedSumF32AVX2, 8, out, v, stride, w)
}

func wsumF16A(out []float32, v []uint16, stride int, w []float32) {
	wsumF16Vec(weightedSumF16AVX2, out, v, stride, w)
}

// quantizeQ8A is QuantizeQ8 in natural order with the AVX2 passes:
// the largest magnitudes, the scales (d as binary16, id = 127/amax) here,
// then the values, 64 blocks at a time. A block whose id overflows (amax
// below about 4e-37) goes through the Go form, so the bits are the same
// as its (the vector rounding saturates infinities differently from q8).
// Inputs are finite: a NaN may give other values than the Go form's.
// The arrays stay on the stack: the kernels are called directly.
func quantizeQ8A(q []int8, d []float32, x []float32) {
	nb := len(d)
	var amax, ids [64]float32
	for b0 := 0; b0 < nb; b0 += len(ids) {
		b1 := min(b0+len(ids), nb)
		xs := x[b0*QBlock : b1*QBlock]
		absMaxBlocksAVX2(&xs[0], b1-b0, &amax[0])
		special := false
		for b := b0; b < b1; b++ {
			a := amax[b-b0]
			var id float32
			if a != 0 {
				id = 127 / a
			}
			if math.IsInf(float64(id), 0) {
				special, id = true, 0
			}
			ids[b-b0] = id
			d[b] = float16.Fromfloat32(a / 127).Float32()
		}
		_ = q[b1*QBlock-1]
		quantQ8BlocksAVX2(&xs[0], &ids[0], &q[b0*QBlock], b1-b0)
		if special {
			for b := b0; b < b1; b++ {
				if ids[b-b0] == 0 && amax[b-b0] != 0 {
					quantizeQ8Block(q[b*QBlock:], &d[b], x[b*QBlock:], false)
				}
			}
		}
	}
}

// quantizeQ8KA is QuantizeQ8K with the AVX2 passes of QuantizeQ8 per block
// of QK: the largest magnitude of each 32 values, the first value of the
// block's largest magnitude found from it (the Go form keeps the first),
// then the values scaled by one inverse scale, clamped and rounded as q8
// does. A block whose inverse scale overflows goes through the Go form.
// Inputs are finite, as for quantizeQ8A.
func quantizeQ8KA(q []int8, d []float32, sums []int16, x []float32) {
	const per = QK / QBlock
	var amax, ids [per]float32
	for b := range d {
		xb := (*[QK]float32)(x[b*QK:])
		absMaxBlocksAVX2(&xb[0], per, &amax[0])
		m := amax[0]
		for _, a := range amax[1:] {
			m = max(m, a)
		}
		if m == 0 {
			quantizeQ8KBlock(q[b*QK:], &d[b], sums[b*QK/QKSum:], xb[:])
			continue
		}
		var vmax float32
		for _, v := range xb {
			if abs32(v) == m {
				vmax = v
				break
			}
		}
		iscale := -127 / vmax
		if math.IsInf(float64(iscale), 0) {
			quantizeQ8KBlock(q[b*QK:], &d[b], sums[b*QK/QKSum:], xb[:])
			continue
		}
		for i := range ids {
			ids[i] = iscale
		}
		qb := (*[QK]int8)(q[b*QK:])
		quantQ8BlocksAVX2(&xb[0], &ids[0], &qb[0], per)
		d[b] = 1 / iscale
		blockSums16((*[QK / QKSum]int16)(sums[b*QK/QKSum:]), qb)
	}
}
