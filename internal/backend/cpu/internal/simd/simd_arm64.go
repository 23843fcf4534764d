package simd

import "golang.org/x/sys/cpu"

// NEON is the arm64 assembly implementation for every ARMv8-A core: f32,
// f16 and bf16 dot products, the attention sums, the dynamic-range integer
// kernels with SMULL/SMULL2 and SADALP, and the exponentials of softmax and
// SwiGLU (with the Go form's bits), and the exact path's int8/int4 dot
// products with f32 inputs.
var NEON = &Impl{
	Name:     "neon",
	dotF32:   dotF32N,
	dotF32x4: dotF32x4N,
	dotF16:   dotF16N,
	dotBF16:  dotBF16N,
	dotI8:    dotI8N,
	dotI4:    dotI4N,
	dotQ8:    neonQ.dotQ8,
	dotQ4:    neonQ.dotQ4,
	dotQ4x4:  neonQ.dotQ4x4,
	dotQ8x4:  neonQ.dotQ8x4,

	dotQ8Rows: neonQ.dotQ8Rows,
	dotQ4Rows: neonQ.dotQ4Rows,
	wsumF32:   wsumF32N,
	wsumF16:   wsumF16N,
	expSub:    expSubN,
	swiglu:    swigluN,
	dotK: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16) float32{
		Q4K: kernelK(dotQ4KNEON), Q5K: kernelK(dotQ5KNEON), Q6K: kernelK(dotQ6KNEON), Q2K: kernelK(dotQ2KNEON), Q3K: kernelK(dotQ3KNEON),
	},
	dotKx4: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32){
		Q4K: kernelKx4(Q4K, dotQ4Kx4NEON), Q5K: kernelKx4(Q5K, dotQ5Kx4NEON), Q6K: kernelKx4(Q6K, dotQ6Kx4NEON),
	},
	dotKRows: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, out []float32){
		Q4K: kernelKRows(dotQ4KRowsNEON), Q5K: kernelKRows(dotQ5KRowsNEON), Q6K: kernelKRows(dotQ6KRowsNEON), Q2K: kernelKRows(dotQ2KRowsNEON), Q3K: kernelKRows(dotQ3KRowsNEON),
	},
	dotQ32: [NumQ32]func(w []byte, x []int8, xd []float32) float32{Q4_1: kernelQ32(dotQ4_1NEON), Q5_0: kernelQ32(dotQ5_0NEON), Q5_1: kernelQ32(dotQ5_1NEON), Q8_0: kernelQ32(dotQ8_0NEON), MXFP4: kernelQ32(dotMXFP4NEON)},
}

// NEONDot is NEON with the integer kernels on SDOT, for cores with the
// dot product extension (ARMv8.2-A DotProd; x/sys/cpu's ASIMDDP).
var NEONDot = &Impl{
	Name:     "neon-sdot",
	dotF32:   dotF32N,
	dotF32x4: dotF32x4N,
	dotF16:   dotF16N,
	dotBF16:  dotBF16N,
	dotI8:    dotI8N,
	dotI4:    dotI4N,
	dotQ8:    sdotQ.dotQ8,
	dotQ4:    sdotQ.dotQ4,
	dotQ4x4:  sdotQ.dotQ4x4,
	dotQ8x4:  sdotQ.dotQ8x4,

	dotQ8Rows: sdotQ.dotQ8Rows,
	dotQ4Rows: sdotQ.dotQ4Rows,
	wsumF32:   wsumF32N,
	wsumF16:   wsumF16N,
	expSub:    expSubN,
	swiglu:    swigluN,
	dotK: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16) float32{
		Q4K: kernelK(dotQ4KSDOT), Q5K: kernelK(dotQ5KSDOT), Q6K: kernelK(dotQ6KSDOT), Q2K: kernelK(dotQ2KSDOT), Q3K: kernelK(dotQ3KSDOT),
	},
	dotKx4: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32){
		Q4K: kernelKx4(Q4K, dotQ4Kx4SDOT), Q5K: kernelKx4(Q5K, dotQ5Kx4SDOT), Q6K: kernelKx4(Q6K, dotQ6Kx4SDOT),
	},
	dotKRows: [NumKQuant]func(w []byte, x []int8, xd []float32, xs []int16, out []float32){
		Q4K: kernelKRows(dotQ4KRowsSDOT), Q5K: kernelKRows(dotQ5KRowsSDOT), Q6K: kernelKRows(dotQ6KRowsSDOT), Q2K: kernelKRows(dotQ2KRowsSDOT), Q3K: kernelKRows(dotQ3KRowsSDOT),
	},
	dotQ32: [NumQ32]func(w []byte, x []int8, xd []float32) float32{Q4_1: kernelQ32(dotQ4_1SDOT), Q5_0: kernelQ32(dotQ5_0SDOT), Q5_1: kernelQ32(dotQ5_1SDOT), Q8_0: kernelQ32(dotQ8_0SDOT), MXFP4: kernelQ32(dotMXFP4SDOT)},
	// The prefill GEMM with SDOT by element (genarm64/gemm.go): gemmGo's
	// bits.
	gemm: [NumGemmKinds]gemmFunc{
		GemmQ8: gemmN([4]gemmKernel{gemmQ8T1SDOT, gemmQ8T2SDOT, gemmQ8T3SDOT, gemmQ8T4SDOT}),
		GemmQ4: gemmN([4]gemmKernel{gemmQ4T1SDOT, gemmQ4T2SDOT, gemmQ4T3SDOT, gemmQ4T4SDOT}),
	},
}

func init() {
	if cpu.ARM64.HasASIMD {
		impls = append(impls, NEON)
		if cpu.ARM64.HasASIMDDP {
			impls = append(impls, NEONDot)
		}
	}
	best = Best()
}

// The wrappers run the assembly on whole vectors and finish in Go.

func dotF32N(a, x []float32) float32 { return dotF32Vec(dotF32NEON, 4, a, x) }

func dotF32x4N(a, x []float32, stride int, out *[4]float32) {
	dotF32x4Vec(dotF32x4NEON, 4, a, x, stride, out)
}

func dotF16N(a []uint16, x []float32) float32 { return dotF16Vec(dotF16NEON, a, x) }

func dotBF16N(a []uint16, x []float32) float32 { return dotBF16Vec(dotBF16NEON, a, x) }

func dotI8N(q []int8, sc []float32, block int, x []float32) float32 {
	return dotI8Vec(dotI8F32NEON, 16, q, sc, block, x)
}

func dotI4N(q []byte, sc []float32, block int, x []float32) float32 {
	return dotI4Vec(dotI4F32NEON, 32, q, sc, block, x)
}

func expSubN(out, in []float32, sub float32) { expSubVec(expSubF32NEON, out, in, sub) }

func swigluN(out, g, u []float32) { swigluVec(swigluF32NEON, out, g, u) }

func wsumF32N(out, v []float32, stride int, w []float32) {
	wsumF32Vec(weightedSumF32NEON, 4, out, v, stride, w)
}

func wsumF16N(out []float32, v []uint16, stride int, w []float32) {
	wsumF16Vec(weightedSumF16NEON, out, v, stride, w)
}

// qKernels selects one variant's integer kernels, each over a whole
// number of groups of four blocks with one weight scale per block. The
// kernels are called directly (not through function values) so that
// escape analysis sees their //go:noescape and the scale buffers below
// stay on the stack: a decode step allocates nothing.
type qKernels struct{ sdot bool }

var (
	neonQ = &qKernels{sdot: false}
	sdotQ = &qKernels{sdot: true}
)

func (k *qKernels) q8(w *int8, ws *uint16, x *int8, xd *float32, nb int) float32 {
	if k.sdot {
		return dotQ8Q8BlocksSDOT(w, ws, x, xd, nb)
	}
	return dotQ8Q8BlocksNEON(w, ws, x, xd, nb)
}

func (k *qKernels) q4(w *byte, ws *uint16, x *int8, xd *float32, nb int) float32 {
	if k.sdot {
		return dotQ4Q8BlocksSDOT(w, ws, x, xd, nb)
	}
	return dotQ4Q8BlocksNEON(w, ws, x, xd, nb)
}

func (k *qKernels) q8x4(w *int8, ws *uint16, x *int8, xd *float32, nb, xstride, dstride int, out *float32) {
	if k.sdot {
		dotQ8Q8x4BlocksSDOT(w, ws, x, xd, nb, xstride, dstride, out)
		return
	}
	dotQ8Q8x4BlocksNEON(w, ws, x, xd, nb, xstride, dstride, out)
}

func (k *qKernels) q4x4(w *byte, ws *uint16, x *int8, xd *float32, nb, xstride, dstride int, out *float32) {
	if k.sdot {
		dotQ4Q8x4BlocksSDOT(w, ws, x, xd, nb, xstride, dstride, out)
		return
	}
	dotQ4Q8x4BlocksNEON(w, ws, x, xd, nb, xstride, dstride, out)
}

// scaleChunk is the number of blocks whose weight scales are spread to
// one per block at a time when several blocks share a scale (per > 1), so
// that the one-scale-per-block kernels serve every grouping.
const scaleChunk = 64

// spread sets buf[i] = ws[(b0+i)/per] for i < m.
func spread(buf *[scaleChunk]uint16, ws []uint16, per, b0, m int) []uint16 {
	for i := range m {
		buf[i] = ws[(b0+i)/per]
	}
	return buf[:m]
}

// blocks8 is DotQ8 with one scale per block (len(ws) blocks): the
// assembly on the whole groups of four, Go on the rest.
func (k *qKernels) blocks8(w []int8, ws []uint16, x []int8, xd []float32) float32 {
	nb := len(ws)
	n4 := nb &^ 3
	var s float32
	if n4 > 0 {
		s = k.q8(&w[0], &ws[0], &x[0], &xd[0], n4)
	}
	if n4 < nb {
		s += dotQ8Go(w[n4*QBlock:nb*QBlock], ws[n4:], 1, x[n4*QBlock:nb*QBlock], xd[n4:nb])
	}
	return s
}

func (k *qKernels) blocks4(w []byte, ws []uint16, x []int8, xd []float32) float32 {
	nb := len(ws)
	n4 := nb &^ 3
	var s float32
	if n4 > 0 {
		s = k.q4(&w[0], &ws[0], &x[0], &xd[0], n4)
	}
	if n4 < nb {
		s += dotQ4Go(w[n4*QBlock/2:nb*QBlock/2], ws[n4:], 1, x[n4*QBlock:nb*QBlock], xd[n4:nb])
	}
	return s
}

func (k *qKernels) dotQ8(w []int8, ws []uint16, per int, x []int8, xd []float32) float32 {
	if len(ws) == 0 || per <= 0 {
		return 0
	}
	if per == 1 {
		return k.blocks8(w, ws, x, xd)
	}
	var buf [scaleChunk]uint16
	nb := len(ws) * per
	var s float32
	for b0 := 0; b0 < nb; b0 += scaleChunk {
		m := min(scaleChunk, nb-b0)
		s += k.blocks8(w[b0*QBlock:(b0+m)*QBlock], spread(&buf, ws, per, b0, m), x[b0*QBlock:(b0+m)*QBlock], xd[b0:b0+m])
	}
	return s
}

func (k *qKernels) dotQ4(w []byte, ws []uint16, per int, x []int8, xd []float32) float32 {
	if len(ws) == 0 || per <= 0 {
		return 0
	}
	if per == 1 {
		return k.blocks4(w, ws, x, xd)
	}
	var buf [scaleChunk]uint16
	nb := len(ws) * per
	var s float32
	for b0 := 0; b0 < nb; b0 += scaleChunk {
		m := min(scaleChunk, nb-b0)
		s += k.blocks4(w[b0*QBlock/2:(b0+m)*QBlock/2], spread(&buf, ws, per, b0, m), x[b0*QBlock:(b0+m)*QBlock], xd[b0:b0+m])
	}
	return s
}

// blocks8x4 is blocks8 for four token rows; out[j] gets the bits blocks8
// gives for row j.
func (k *qKernels) blocks8x4(w []int8, ws []uint16, x []int8, xd []float32, xstride int, out *[4]float32) {
	nb, ds := len(ws), xstride/QBlock
	n4 := nb &^ 3
	*out = [4]float32{}
	if n4 > 0 {
		k.q8x4(&w[0], &ws[0], &x[0], &xd[0], n4, xstride, ds, &out[0])
	}
	if n4 < nb {
		for j := range out {
			out[j] += dotQ8Go(w[n4*QBlock:nb*QBlock], ws[n4:], 1, x[j*xstride+n4*QBlock:], xd[j*ds+n4:])
		}
	}
}

func (k *qKernels) blocks4x4(w []byte, ws []uint16, x []int8, xd []float32, xstride int, out *[4]float32) {
	nb, ds := len(ws), xstride/QBlock
	n4 := nb &^ 3
	*out = [4]float32{}
	if n4 > 0 {
		k.q4x4(&w[0], &ws[0], &x[0], &xd[0], n4, xstride, ds, &out[0])
	}
	if n4 < nb {
		for j := range out {
			out[j] += dotQ4Go(w[n4*QBlock/2:nb*QBlock/2], ws[n4:], 1, x[j*xstride+n4*QBlock:], xd[j*ds+n4:])
		}
	}
}

func (k *qKernels) dotQ8x4(w []int8, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	if len(ws) == 0 || per <= 0 {
		*out = [4]float32{}
		return
	}
	if per == 1 {
		k.blocks8x4(w, ws, x, xd, xstride, out)
		return
	}
	var buf [scaleChunk]uint16
	var part, sum [4]float32
	nb := len(ws) * per
	for b0 := 0; b0 < nb; b0 += scaleChunk {
		m := min(scaleChunk, nb-b0)
		k.blocks8x4(w[b0*QBlock:(b0+m)*QBlock], spread(&buf, ws, per, b0, m), x[b0*QBlock:], xd[b0:], xstride, &part)
		for j := range sum {
			sum[j] += part[j]
		}
	}
	*out = sum
}

func (k *qKernels) dotQ4x4(w []byte, ws []uint16, per int, x []int8, xd []float32, xstride int, out *[4]float32) {
	if len(ws) == 0 || per <= 0 {
		*out = [4]float32{}
		return
	}
	if per == 1 {
		k.blocks4x4(w, ws, x, xd, xstride, out)
		return
	}
	var buf [scaleChunk]uint16
	var part, sum [4]float32
	nb := len(ws) * per
	for b0 := 0; b0 < nb; b0 += scaleChunk {
		m := min(scaleChunk, nb-b0)
		k.blocks4x4(w[b0*QBlock/2:(b0+m)*QBlock/2], spread(&buf, ws, per, b0, m), x[b0*QBlock:], xd[b0:], xstride, &part)
		for j := range sum {
			sum[j] += part[j]
		}
	}
	*out = sum
}

// dotQ8Rows runs the rows kernel when the rows are whole groups of four
// blocks (each result then has the one-row kernel's bits, as DotQ8Rows
// promises), and loops over dotQ8 otherwise.
func (k *qKernels) dotQ8Rows(w []int8, ws []uint16, x []int8, xd []float32, out []float32, wsStride int) {
	nb := len(xd)
	if nb%4 != 0 {
		n := nb * QBlock
		for i := range out {
			out[i] = k.dotQ8(w[i*n:(i+1)*n], ws[i*wsStride:i*wsStride+nb], 1, x, xd)
		}
		return
	}
	if k.sdot {
		dotQ8Q8BlocksRowsSDOT(&w[0], &ws[0], &x[0], &xd[0], nb, len(out), &out[0], 2*wsStride)
		return
	}
	dotQ8Q8BlocksRowsNEON(&w[0], &ws[0], &x[0], &xd[0], nb, len(out), &out[0], 2*wsStride)
}

func (k *qKernels) dotQ4Rows(w []byte, ws []uint16, x []int8, xd []float32, out []float32, wsStride int) {
	nb := len(xd)
	if nb%4 != 0 {
		n := nb * QBlock
		for i := range out {
			out[i] = k.dotQ4(w[i*n/2:(i+1)*n/2], ws[i*wsStride:i*wsStride+nb], 1, x, xd)
		}
		return
	}
	if k.sdot {
		dotQ4Q8BlocksRowsSDOT(&w[0], &ws[0], &x[0], &xd[0], nb, len(out), &out[0], 2*wsStride)
		return
	}
	dotQ4Q8BlocksRowsNEON(&w[0], &ws[0], &x[0], &xd[0], nb, len(out), &out[0], 2*wsStride)
}

type gemmKernel func(w *byte, x *int8, xd *float32, xs *int32, nb, xstride int, out *float32, ostride int)

// gemmN wraps the GEMM kernels for 1 to 4 tokens (Gemm checked the
// slices).
func gemmN(ks [4]gemmKernel) gemmFunc {
	return func(w []byte, x []int8, xd []float32, xs []int32, nb, xstride, ntok int, out []float32, ostride int) {
		ks[ntok-1](&w[0], &x[0], &xd[0], &xs[0], nb, xstride, &out[0], ostride)
	}
}
