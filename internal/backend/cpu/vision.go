package cpu

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// selfAttention runs a fusion.SelfAttnOp over the step's n rows (selfGemm).
func (p *program) selfAttention(out, q, k, v []float32, n int, op *fusion.SelfAttnOp) {
	a := &selfGemm{p: p, out: out, q: q, k: k, v: v, n: n, ld: selfStride(n), op: op,
		ap: attnParams{scale: op.Scale}, packing: true}
	p.pool.run(op.KVHeads, n*op.KVHeads*op.HeadDim, 1, a)
	a.packing = false
	tiles := (n + selfTile - 1) / selfTile
	p.pool.run(tiles*op.Heads, n*n*op.Heads*op.HeadDim*2, 1, a)
}

// selfTile is the number of query rows one job of selfAttnGemm takes: a
// multiple of simd.GemmF32Tokens and of four, so that the register tiles
// of the GEMM (and of DotF32x2x4) are full.
const selfTile = 4 * simd.GemmF32Tokens

// round16 rounds n up to a multiple of 16 (the f32 GEMM's vector run).
func round16(n int) int { return (n + 15) &^ 15 }

// selfAttnScratch is how many floats of a thread's scratch.scores
// selfGemm takes for n rows of head dim hd: a tile's scores, and its
// scaled queries (panelTile).
func selfAttnScratch(n, hd int) int { return selfTile * (selfStride(n) + hd) }

// selfStride is the row stride of the transposed keys and values of n
// rows: a multiple of 16 values, and not of 1024, whose rows a 4 KiB-way
// L1 would map to one set when the key product walks down a column.
func selfStride(n int) int { return round16(n) + 16 }

// selfAttnBufs is how many floats the program's packed keys and values
// (program.selfKV) take for op over n rows.
func selfAttnBufs(n int, op *fusion.SelfAttnOp) int {
	return op.KVHeads * 2 * op.HeadDim * selfStride(n)
}

// selfKeyRun is how many keys the key product takes at a time for every
// query row of a tile: their transposed block (head dim x selfKeyRun
// values) stays in L2 meanwhile.
const selfKeyRun = 256

// selfGemm is fusion.SelfAttnOp as SIMD products. The keys and values of
// each KV head are transposed first (a row per head-dim column, zeros
// after the n rows); then each job, a tile of selfTile query rows and a
// head, takes the scores of its rows with selfKeyRun keys at a time
// (simd.WeightedSum over the transposed keys, the query's values as the
// weights: each score summed over the head dim in order, as the scalar
// form sums it), turns each row into attention weights
// (attnParams.softmax: scaled, exponentiated against the row's maximum,
// normalized), and sums the values in a matrix product (mulRows: the
// transposed values as rows, the weights as tokens), written in place.
// The zero padding makes every value sum DotF32x4's, whichever kernel runs
// it.
type selfGemm struct {
	p            *program
	out, q, k, v []float32
	n, ld        int // rows; the stride of the transposed keys and values
	op           *fusion.SelfAttnOp
	ap           attnParams
	packing      bool // the jobs are KV heads to pack, else (tile, head)
}

func (a *selfGemm) run(wk, lo, hi int) {
	op := a.op
	hd, kc := op.HeadDim, op.KVHeads*op.HeadDim
	size := hd * a.ld
	for job := lo; job < hi; job++ {
		if a.packing && panelGemm() {
			a.panelPack(job)
			continue
		}
		if a.packing {
			kt := a.p.selfKV[2*job*size:][:size]
			vt := a.p.selfKV[(2*job+1)*size:][:size]
			for i := range hd {
				krow, vrow := kt[i*a.ld:(i+1)*a.ld], vt[i*a.ld:(i+1)*a.ld]
				for s := range a.n {
					krow[s] = a.k[s*kc+job*hd+i]
					vrow[s] = a.v[s*kc+job*hd+i]
				}
				clear(krow[a.n:])
				clear(vrow[a.n:])
			}
			continue
		}
		if panelGemm() {
			a.panelTile(wk, job/op.Heads*selfTile, job%op.Heads)
			continue
		}
		a.tile(wk, job/op.Heads*selfTile, job%op.Heads)
	}
}

// tile is the job of query rows t0.. and head h.
func (a *selfGemm) tile(wk, t0, h int) {
	op := a.op
	hd, qc := op.HeadDim, op.Heads*op.HeadDim
	kvh := h / (op.Heads / op.KVHeads)
	size := hd * a.ld
	kt := a.p.selfKV[2*kvh*size:][:size]
	vt := a.p.selfKV[(2*kvh+1)*size:][:size]
	nt := min(selfTile, a.n-t0)
	np := round16(a.n)
	sc := a.p.scratch[wk].scores[:selfTile*np]
	for c0 := 0; c0 < a.n; c0 += selfKeyRun {
		c1 := min(c0+selfKeyRun, a.n)
		for t := range nt {
			q := a.q[(t0+t)*qc+h*hd : (t0+t)*qc+(h+1)*hd]
			simd.WeightedSum(sc[t*np+c0:t*np+c1], kt[c0:], a.ld, q)
		}
	}
	for t := range nt {
		row := sc[t*np : (t+1)*np]
		a.ap.softmax(row[:a.n], h)
		clear(row[a.n:])
	}
	mulRows(vt, a.ld, hd, sc, np, nt, np, a.out[t0*qc+h*hd:], qc)
}

// avgPool runs fusion.AvgPoolOp: the step must have Side*Side rows.
func avgPool(out, in []float32, cols, n int, op *fusion.AvgPoolOp) error {
	if n != op.Side*op.Side {
		return fmt.Errorf("%w: avg_pool of a %dx%d grid in a step of %d rows", gpu.ErrStep, op.Side, op.Side, n)
	}
	m, k := op.Side/op.Kernel, op.Kernel
	inv := 1 / float32(k*k)
	clear(out[:n*cols])
	for t := range m * m {
		o := out[t*cols : (t+1)*cols]
		r0, c0 := t/m*k, t%m*k
		for i := range k {
			for j := range k {
				x := in[((r0+i)*op.Side+c0+j)*cols:]
				for c := range o {
					o[c] += x[c]
				}
			}
		}
		for c := range o {
			o[c] *= inv
		}
	}
	return nil
}

// mulRows sets out[t*ostride+r] = Σ_{i<n} w[r*wstride+i]·x[t*xstride+i]
// for r < rows and t < ntok: through the f32 GEMM where the CPU has it,
// else two rows at a time (each pair met by the tokens four at a time,
// DotF32x2x4, while it is in L1). For n a multiple of 16 and ntok of four
// both give DotF32x4's bits.
func mulRows(w []float32, wstride, rows int, x []float32, xstride, ntok, n int, out []float32, ostride int) {
	if simd.HasGemmF32() {
		simd.GemmF32(w, wstride, rows, x, xstride, ntok, n, out, ostride)
		return
	}
	var d8 [8]float32
	var d4 [4]float32
	row := func(r int) []float32 { return w[r*wstride : r*wstride+n] }
	r := 0
	for ; r+2 <= rows; r += 2 {
		w0, w1 := row(r), row(r+1)
		t := 0
		for ; t+4 <= ntok; t += 4 {
			simd.DotF32x2x4(w0, w1, x[t*xstride:], xstride, &d8)
			for j := range 4 {
				out[(t+j)*ostride+r], out[(t+j)*ostride+r+1] = d8[j], d8[4+j]
			}
		}
		for ; t < ntok; t++ {
			out[t*ostride+r], out[t*ostride+r+1] = simd.DotF32(w0, x[t*xstride:]), simd.DotF32(w1, x[t*xstride:])
		}
	}
	for ; r < rows; r++ {
		w0 := row(r)
		t := 0
		for ; t+4 <= ntok; t += 4 {
			simd.DotF32x4(w0, x[t*xstride:], xstride, &d4)
			for j := range 4 {
				out[(t+j)*ostride+r] = d4[j]
			}
		}
		for ; t < ntok; t++ {
			out[t*ostride+r] = simd.DotF32(w0, x[t*xstride:])
		}
	}
}
