package cpu

import (
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/tensors"
)

// Matrix products. out[t] = W · in[t] (+ bias) for the step's n token rows,
// W [rows, cols] in its stored type, with three epilogues: store,
// accumulate into out (MatMul with Accumulate: the same additions in the
// same order as a store followed by Add), and the gated unit of MatMulGLU
// (act(G·x + b) * (U·x + ub), each factor computed exactly as MatMul
// computes it, so fused and unfused graphs agree bitwise).
//
// Output rows are split across the pool's threads. Decode (n < 4) is
// bandwidth-bound: each weight row is read once and dotted with the few
// token rows by the SIMD kernels, the weights decoded inside the dot
// product. Prefill is a blocked product: tiles of rowTile weight rows by
// tokTile tokens, each weight row of a tile unpacked once (dequantized to
// f32 in exact math; kept packed and decoded in registers once per four
// tokens in dynamic math) and used for every token of the tile.
// With weights repacked for the GEMM (matrix.gemm, or matrix.kgemm for
// K-quants, which decode also reads, one token per call), a tile runs
// groups of simd.GemmRows interleaved rows over four tokens at a time
// instead; f32 rows go two at a time through a kernel that keeps
// DotF32x4's bits, or, where the CPU has it, through the f32 GEMM
// (simd.GemmF32: register tiles of 4 rows by 6 tokens, with the same bits).
const (
	rowTile    = 16
	tokTile    = 64
	prefillMin = 4
	// rowRun is the number of weight rows of one scale per block (GGUF
	// Q8_0 and Q4_0, int8/int4 in blocks of 32) a decode kernel call
	// covers: the call and slicing cost is paid once per run, not per row.
	rowRun = 64
)

// mmTask is one matrix product, reused by every MatMul-like step of a
// program (the fields are set before each dispatch).
type mmTask struct {
	p       *program
	out     []float32
	outCols int
	in      []float32
	inCols  int
	n       int
	w, up   *matrix
	bias    []float32
	upBias  []float32
	act     func(float32) float32
	silu    bool                       // act is silu (the SwiGLU kernel gives its bits)
	acc     bool                       // Accumulate
	glu     bool                       // MatMulGLU: w is the gate, up the up projection
	glu2    func(g, u float32) float32 // with glu: the gated unit in place of act(g) * u (nil: that)
	// Dynamic math: the n input rows quantized in w's layout (nil when
	// w is used exactly), with the per-16 sums of layoutQ8K.
	q  []int8
	d  []float32
	qs []int16
	xs []int32 // the block sums of q for the GEMM (gemmOK)
}

// matMul dispatches the product described by m (m.n rows of input).
func (p *program) matMul(m *mmTask) {
	factor := 1
	if m.glu {
		factor = 2
	}
	grain := 1
	switch {
	case !m.rowwise():
		grain = rowTile
	case m.w.kgemm != nil || m.w.gemm != nil && m.xs != nil:
		grain = simd.GemmRows // whole packed groups (dotRows)
	}
	p.pool.run(m.w.rows, factor*m.w.rows*m.w.cols*m.n, grain, m)
}

func (m *mmTask) run(wk, lo, hi int) {
	s := &m.p.scratch[wk]
	if m.rowwise() {
		if m.w.colsT != nil && !m.glu && m.q == nil {
			m.runCols(s, lo, hi)
			return
		}
		if m.rowsOK() {
			m.runRows(s, lo, hi)
			return
		}
		for r := lo; r < hi; r++ {
			for t := range m.n {
				g := m.dot(s, m.w, r, t)
				var u float32
				if m.glu {
					u = m.dot(s, m.up, r, t)
				}
				m.store(r, t, g, u)
			}
		}
		return
	}
	if m.panelOK() {
		m.runPanels(s, lo, hi)
		return
	}
	if m.gemmF32InPlace() {
		// Token blocks outside the row tiles: a block's inputs stay in L2
		// while the weights stream past once per block.
		for t0 := 0; t0 < m.n; t0 += tokTile {
			for r0 := lo; r0 < hi; r0 += rowTile {
				m.tileGemmF32(s, r0, min(r0+rowTile, hi), t0, min(t0+tokTile, m.n))
			}
		}
		return
	}
	if m.unpackedRuns() {
		m.runUnpacked(s, lo, hi)
		return
	}
	for r0 := lo; r0 < hi; r0 += rowTile {
		m.tile(s, r0, min(r0+rowTile, hi))
	}
}

// gemmF32OK reports whether m's prefill tiles take the f32 GEMM: weights
// used as f32 rows, of a multiple of 16 values (where the GEMM gives
// DotF32x4's bits, as the two-row kernels do), where the CPU has it.
func (m *mmTask) gemmF32OK() bool {
	return m.q == nil && m.w.cols%16 == 0 && simd.HasGemmF32()
}

// gemmF32InPlace reports whether m takes the f32 GEMM on f32 weights in
// place (nothing to unpack per tile).
func (m *mmTask) gemmF32InPlace() bool {
	return m.gemmF32OK() && m.w.dtype == tensors.F32 && (!m.glu || m.up.dtype == tensors.F32)
}

// rowsOK reports whether runRows can take m: f32 weights used exactly, or
// weights of one scale per 32-value block in dynamic math.
func (m *mmTask) rowsOK() bool {
	if m.q != nil {
		if m.w.kq >= 0 {
			return !m.glu || m.up.kq == m.w.kq
		}
		if m.w.q32 >= 0 {
			return !m.glu || m.up.q32 == m.w.q32
		}
		return m.w.blockRows() && (!m.glu || m.up.blockRows())
	}
	return m.w.dtype == tensors.F32 && (!m.glu || m.up.dtype == tensors.F32)
}

// dotRows sets out[i] = W[r0+i] · in[t] for rows [r0, r1) of w (rowsOK).
func (m *mmTask) dotRows(s *scratch, w *matrix, r0, r1, t int, out []float32) {
	k := t * m.inCols
	if m.q != nil {
		if w.kq >= 0 {
			x, xd, xs := m.kInput(w, t)
			if w.kgemm != nil && r0%simd.GemmRows == 0 && cap(out) >= (r1-r0+simd.GemmRows-1)/simd.GemmRows*simd.GemmRows {
				// The packed groups, one token at a time (DotKRows'
				// bits); a last partial group writes past len(out).
				gb := w.kq.GemmGroupBytes(w.cols)
				for g0 := r0; g0 < r1; g0 += simd.GemmRows {
					g := g0 / simd.GemmRows
					simd.GemmK(w.kq, w.kgemm[g*gb:(g+1)*gb], x, xd, xs, w.cols, 1, out[g0-r0:g0-r0+simd.GemmRows], simd.GemmRows)
				}
				return
			}
			simd.DotKRows(w.kq, w.blk[r0*w.rowBytes():r1*w.rowBytes()], x, xd, xs, out)
			return
		}
		if w.q32 >= 0 {
			simd.DotQ32Rows(w.q32, w.blk[r0*w.rowBytes():r1*w.rowBytes()], m.q[k:k+w.cols], m.d[k/simd.QBlock:(k+w.cols)/simd.QBlock], out)
			return
		}
		if w.gemm != nil && m.xs != nil {
			m.gemmRows(s, w, r0, r1, t, out)
			return
		}
		w.qdotRows(r0, r1, m.q[k:k+w.cols], m.d[k/simd.QBlock:], out)
		return
	}
	simd.DotF32Rows(w.f32[r0*w.cols:r1*w.cols], m.in[k:k+w.cols], out)
}

// gemmRows is dotRows for int4 weights repacked for the GEMM (decodeGemm):
// the one-token GEMM over the packed groups that hold rows [r0, r1), on
// the input quantized in natural order with its block sums.
func (m *mmTask) gemmRows(s *scratch, w *matrix, r0, r1, t int, out []float32) {
	k := t * m.inCols
	x, xd, xs := m.q[k:k+w.cols], m.d[k/simd.QBlock:(k+w.cols)/simd.QBlock], m.xs[k/simd.QBlock:(k+w.cols)/simd.QBlock]
	gb := w.gk.GroupBytes(w.cols)
	tmp := &s.gr
	for g := r0 / simd.GemmRows; g*simd.GemmRows < r1; g++ {
		lo, hi := g*simd.GemmRows, (g+1)*simd.GemmRows
		dst := tmp[:]
		direct := lo >= r0 && hi <= r1
		if direct {
			dst = out[lo-r0 : hi-r0]
		}
		simd.Gemm(w.gk, w.gemm[g*gb:(g+1)*gb], x, xd, xs, w.cols, 1, dst, simd.GemmRows)
		if !direct {
			copy(out[max(lo, r0)-r0:min(hi, r1)-r0], tmp[max(lo, r0)-lo:min(hi, r1)-lo])
		}
	}
	w.rowScaled(out[:r1-r0], r0)
}

// rowwise reports whether m runs as decode does, token by token over runs
// of rows: steps of fewer than prefillMin tokens, and every step of a
// batched program, whose rows are tokens of different sequences that must
// each get the values of that sequence's step alone.
func (m *mmTask) rowwise() bool { return m.n < prefillMin || m.p.seqs != nil }

// decodeGemm reports whether m's decode reads the packed copy: int4
// weights only. The one-token GEMM measured 2x DotQ4Rows in L2 and 1.6x
// from memory, and m110 Q4_0 tg128 went from 187 to 241 tok/s (medians of
// four alternated rounds); for int8 it is 2x in L2 but no faster from
// memory, and m110 Q8_0 tg128 measured slower (101-151 against 150-186
// tok/s), so int8 decode keeps the row kernels.
//
// Only for matrices decode runs through dotRows (blockRows): the others
// (int4 with one binary16 scale per row) decode through dot, whose row
// kernels need the input in their own order, not the GEMM's.
func (m *mmTask) decodeGemm() bool {
	return m.gemmOK() && m.w.gk == simd.GemmQ4 && m.w.blockRows() && (!m.glu || m.up.blockRows())
}

// runRows is the decode form for f32 weights and for weights of one scale
// per 32-value block: runs of rowRun rows per kernel call, then the
// epilogue over the run.
func (m *mmTask) runRows(s *scratch, lo, hi int) {
	for t := range m.n {
		for r0 := lo; r0 < hi; r0 += rowRun {
			r1 := min(r0+rowRun, hi)
			g, u := s.rg[:r1-r0], s.ru[:r1-r0]
			m.dotRows(s, m.w, r0, r1, t, g)
			if m.glu {
				m.dotRows(s, m.up, r0, r1, t, u)
			}
			m.storeRun(t, r0, g, u)
		}
	}
}

// runCols is the decode form of a narrow matrix kept transposed (colsT):
// outputs [lo, hi) of each token as the weighted sum of w's columns by the
// token's inputs, in runs of rowRun outputs, then the epilogue over the
// run.
func (m *mmTask) runCols(s *scratch, lo, hi int) {
	w := m.w
	for t := range m.n {
		x := m.in[t*m.inCols : t*m.inCols+w.cols]
		for r0 := lo; r0 < hi; r0 += rowRun {
			g := s.rg[:min(r0+rowRun, hi)-r0]
			simd.WeightedSumF16(g, w.colsT[r0:], w.rows, x)
			m.storeRun(t, r0, g, nil)
		}
	}
}

// storeRun applies the epilogue to outputs (t, r0+i) given the products
// g[i] (and u[i] for a gated product): over the whole run for the common
// epilogues (SwiGLU, bias, accumulate, store), else element by element.
func (m *mmTask) storeRun(t, r0 int, g, u []float32) {
	o := m.out[t*m.outCols+r0 : t*m.outCols+r0+len(g)]
	switch {
	case m.glu:
		if m.silu && m.bias == nil && m.upBias == nil {
			simd.SwiGLU(o, g, u)
			return
		}
	case m.bias != nil:
		b := m.bias[r0 : r0+len(g)] // store's arithmetic, run by run
		if m.acc {
			for i, v := range g {
				o[i] += v + b[i]
			}
			return
		}
		for i, v := range g {
			o[i] = v + b[i]
		}
		return
	case m.acc:
		for i, v := range g {
			o[i] += v
		}
		return
	default:
		copy(o, g)
		return
	}
	for i, v := range g {
		m.store(r0+i, t, v, u[i])
	}
}

// store applies the epilogue to output (t, r) given W[r]·x[t] = g (and
// U[r]·x[t] = u for a gated product).
func (m *mmTask) store(r, t int, g, u float32) {
	if m.bias != nil {
		g += m.bias[r]
	}
	i := t*m.outCols + r
	switch {
	case m.glu:
		if m.upBias != nil {
			u += m.upBias[r]
		}
		if m.glu2 != nil {
			m.out[i] = m.glu2(g, u)
			break
		}
		m.out[i] = m.act(g) * u
	case m.acc:
		m.out[i] += g
	default:
		m.out[i] = g
	}
}

// dot is W[r] · in[t], the decode form.
func (m *mmTask) dot(s *scratch, w *matrix, r, t int) float32 {
	if m.q != nil {
		if w.kq >= 0 {
			x, xd, xs := m.kInput(w, t)
			rb := w.rowBytes()
			return simd.DotK(w.kq, w.blk[r*rb:(r+1)*rb], x, xd, xs)
		}
		k := t * m.inCols
		if w.q32 >= 0 {
			rb := w.rowBytes()
			return simd.DotQ32(w.q32, w.blk[r*rb:(r+1)*rb], m.q[k:k+w.cols], m.d[k/simd.QBlock:(k+w.cols)/simd.QBlock])
		}
		return w.qdot(r, m.q[k:k+w.cols], m.d[k/simd.QBlock:])
	}
	x := m.in[t*m.inCols : t*m.inCols+w.cols]
	base := r * w.cols
	switch w.dtype {
	case tensors.F32:
		return simd.DotF32(w.f32[base:base+w.cols], x)
	case tensors.F16:
		return simd.DotF16(w.u16[base:base+w.cols], x)
	case tensors.BF16:
		return simd.DotBF16(w.u16[base:base+w.cols], x)
	case tensors.I8:
		return simd.DotI8(w.i8[base:base+w.cols], w.rowScales(r, s.sc), w.block, x)
	case tensors.I4:
		return simd.DotI4(w.u8[base/2:(base+w.cols)/2], w.rowScales(r, s.sc), w.block, x)
	}
	if w.dtype.Block() {
		// llama.cpp's block types: the row decoded to f32 and dotted as
		// an f32 row, so a quantized GGUF gives exactly the results of
		// the F32 file llama.cpp dequantizes it to.
		row := s.row[:w.cols]
		w.row(r, row)
		return simd.DotF32(row, x)
	}
	panic("cpu: matrix of unknown type") // newMatrix admits no other
}

// tile computes rows [r0, r1) (at most rowTile) for every token.
func (m *mmTask) tile(s *scratch, r0, r1 int) {
	if m.q != nil {
		if m.gemmOK() {
			m.tileGemm(s, r0, r1)
			return
		}
		if m.gemmKOK() {
			m.tileGemmK(s, r0, r1)
			return
		}
		if m.w.kq >= 0 && !simd.HasKx4(m.w.kq) && simd.HasKRows(m.w.kq) && (!m.glu || m.up.kq == m.w.kq) {
			m.tileKRows(s, r0, r1)
			return
		}
		m.tileDynamic(s, r0, r1)
		return
	}
	// Unpack the tile's rows once (f32 weights are used in place).
	g := tileRows(m.w, r0, r1, s.rows, s.rowViews[:0])
	var u [][]float32
	if m.glu {
		u = tileRows(m.up, r0, r1, s.upRows, s.upViews[:0])
	}
	if m.gemmF32OK() {
		for t0 := 0; t0 < m.n; t0 += tokTile {
			m.gemmF32(s, g, u, r0, r1, t0, min(t0+tokTile, m.n))
		}
		return
	}
	for t0 := 0; t0 < m.n; t0 += tokTile {
		m.tileF32(s, g, u, r0, r1, t0, min(t0+tokTile, m.n))
	}
}

// tileF32 computes tokens [t0, t1) (at most tokTile) of the tile of rows
// [r0, r1) given as f32 rows g and u, two rows at a time (DotF32x2x4) or
// one (DotF32x4), and applies the epilogue.
func (m *mmTask) tileF32(s *scratch, g, u [][]float32, r0, r1, t0, t1 int) {
	gs, us := &s.gs, &s.us // in scratch: a local would escape through the kernels
	g2 := &s.g2
	tg, tu := &s.tg, &s.tu // the tile's products, token-major
	i := 0
	for ; i+2 <= len(g) && !m.glu; i += 2 {
		// Two rows at a time: each input vector loaded once for both.
		t := t0
		for ; t+4 <= t1; t += 4 {
			simd.DotF32x2x4(g[i], g[i+1], m.in[t*m.inCols:], m.inCols, g2)
			for j := range 4 {
				tg[(t-t0+j)*rowTile+i], tg[(t-t0+j)*rowTile+i+1] = g2[j], g2[4+j]
			}
		}
		for ; t < t1; t++ {
			x := m.in[t*m.inCols:]
			tg[(t-t0)*rowTile+i], tg[(t-t0)*rowTile+i+1] = simd.DotF32(g[i], x), simd.DotF32(g[i+1], x)
		}
	}
	for ; i < len(g); i++ {
		row := g[i]
		t := t0
		for ; t+4 <= t1; t += 4 {
			simd.DotF32x4(row, m.in[t*m.inCols:], m.inCols, gs)
			if m.glu {
				simd.DotF32x4(u[i], m.in[t*m.inCols:], m.inCols, us)
			}
			for j := range 4 {
				tg[(t-t0+j)*rowTile+i], tu[(t-t0+j)*rowTile+i] = gs[j], us[j]
			}
		}
		for ; t < t1; t++ {
			x := m.in[t*m.inCols:]
			tg[(t-t0)*rowTile+i] = simd.DotF32(row, x)
			if m.glu {
				tu[(t-t0)*rowTile+i] = simd.DotF32(u[i], x)
			}
		}
	}
	m.storeTile(tg, tu, t0, t1, r0, r1)
}

// unpackedChunk is how many f32 values of weight rows (per matrix) a
// thread unpacks at a time for runUnpacked: 4 MiB, in L3.
const unpackedChunk = 1 << 20

// unpackedRuns reports whether m's prefill takes runUnpacked: weights used
// as f32 rows that are stored otherwise (f16, bf16, exact-math blocks),
// where the CPU has no f32 GEMM, for a step of enough tokens that
// streaming its whole input once per row tile (tile's order) would cost
// more than unpacking the rows into a larger buffer.
func (m *mmTask) unpackedRuns() bool {
	return m.q == nil && !m.gemmF32OK() && m.n >= 4*tokTile && m.w.dtype != tensors.F32 &&
		(!m.glu || m.up.dtype != tensors.F32)
}

// runUnpacked is run for unpackedRuns: the rows [lo, hi) are unpacked to
// f32 a chunk at a time (unpackedChunk values), and each chunk meets the
// tokens a block (tokTile) at a time, the block's inputs staying in L2
// while the chunk's rows stream past, row tile by row tile as tile
// computes them (the same products, the same bits).
func (m *mmTask) runUnpacked(s *scratch, lo, hi int) {
	cols := m.w.cols
	per := max(rowTile, unpackedChunk/cols/rowTile*rowTile)
	need := min(per, hi-lo) * cols
	if len(s.wide) < need {
		s.wide = make([]float32, need)
	}
	if m.glu && len(s.wideUp) < need {
		s.wideUp = make([]float32, need)
	}
	for c0 := lo; c0 < hi; c0 += per {
		c1 := min(c0+per, hi)
		for r := c0; r < c1; r++ {
			m.w.row(r, s.wide[(r-c0)*cols:(r-c0+1)*cols])
			if m.glu {
				m.up.row(r, s.wideUp[(r-c0)*cols:(r-c0+1)*cols])
			}
		}
		for t0 := 0; t0 < m.n; t0 += tokTile {
			t1 := min(t0+tokTile, m.n)
			for r0 := c0; r0 < c1; r0 += rowTile {
				r1 := min(r0+rowTile, c1)
				g := s.rowViews[:0]
				for r := r0; r < r1; r++ {
					g = append(g, s.wide[(r-c0)*cols:(r-c0+1)*cols])
				}
				var u [][]float32
				if m.glu {
					u = s.upViews[:0]
					for r := r0; r < r1; r++ {
						u = append(u, s.wideUp[(r-c0)*cols:(r-c0+1)*cols])
					}
				}
				m.tileF32(s, g, u, r0, r1, t0, t1)
			}
		}
	}
}

// tileGemmF32 is gemmF32 for rows [r0, r1) of f32 weights, in place.
func (m *mmTask) tileGemmF32(s *scratch, r0, r1, t0, t1 int) {
	g := tileRows(m.w, r0, r1, nil, s.rowViews[:0])
	var u [][]float32
	if m.glu {
		u = tileRows(m.up, r0, r1, nil, s.upViews[:0])
	}
	m.gemmF32(s, g, u, r0, r1, t0, t1)
}

// gemmF32 computes tokens [t0, t1) (at most tokTile) of the tile of rows
// [r0, r1) given as f32 rows g and u (as tileRows gives them) with
// simd.GemmF32, which gives the bits of the two-row kernels: DotF32x4's
// for tokens in fours, DotF32's for the last tokens of a block short of
// four (as tile computes them).
func (m *mmTask) gemmF32(s *scratch, g, u [][]float32, r0, r1, t0, t1 int) {
	tg, tu := &s.tg, &s.tu
	x := m.in[t0*m.inCols:]
	n4 := (t1 - t0) &^ 3
	simd.GemmF32(contiguous(g, m.w.cols), m.w.cols, r1-r0, x, m.inCols, n4, m.w.cols, tg[:], rowTile)
	if m.glu {
		simd.GemmF32(contiguous(u, m.up.cols), m.up.cols, r1-r0, x, m.inCols, n4, m.up.cols, tu[:], rowTile)
	}
	for t := t0 + n4; t < t1; t++ {
		xt := m.in[t*m.inCols:]
		for i := range g {
			tg[(t-t0)*rowTile+i] = simd.DotF32(g[i], xt)
			if m.glu {
				tu[(t-t0)*rowTile+i] = simd.DotF32(u[i], xt)
			}
		}
	}
	m.storeTile(tg, tu, t0, t1, r0, r1)
}

// contiguous returns the rows of views (each cols long, one after another
// in memory, as tileRows gives them) as one slice.
func contiguous(views [][]float32, cols int) []float32 {
	return views[0][: len(views)*cols : len(views)*cols]
}

// storeTile applies the epilogue to a tile's products (token-major, rowTile
// per token) for tokens [t0, t1) and rows [r0, r1).
func (m *mmTask) storeTile(tg, tu *[tokTile * rowTile]float32, t0, t1, r0, r1 int) {
	for t := t0; t < t1; t++ {
		k := (t - t0) * rowTile
		m.storeRun(t, r0, tg[k:k+r1-r0], tu[k:k+r1-r0])
	}
}

// gemmOK reports whether m's prefill runs the GEMM over packed weights.
func (m *mmTask) gemmOK() bool {
	return m.w.gemm != nil && (!m.glu || m.up.gemm != nil && m.up.gk == m.w.gk)
}

// tileGemm is tile for packed weights (gemmOK): each group of
// simd.GemmRows rows meets the tokens four at a time, the group's packed
// bytes (a few KiB) staying in L1 across a token tile.
func (m *mmTask) tileGemm(s *scratch, r0, r1 int) {
	tg, tu := &s.tg, &s.tu
	gb := m.w.gk.GroupBytes(m.w.cols)
	for t0 := 0; t0 < m.n; t0 += tokTile {
		t1 := min(t0+tokTile, m.n)
		for g0 := r0; g0 < r1; g0 += simd.GemmRows {
			g := g0 / simd.GemmRows
			i := g0 - r0
			for t := t0; t < t1; t += 4 {
				nt := min(4, t1-t)
				k := t * m.inCols
				x, xd, xs := m.q[k:], m.d[k/simd.QBlock:], m.xs[k/simd.QBlock:]
				o := (t-t0)*rowTile + i
				simd.Gemm(m.w.gk, m.w.gemm[g*gb:(g+1)*gb], x, xd, xs, m.inCols, nt, tg[o:], rowTile)
				if m.glu {
					simd.Gemm(m.up.gk, m.up.gemm[g*gb:(g+1)*gb], x, xd, xs, m.inCols, nt, tu[o:], rowTile)
				}
			}
		}
		for t := t0; t < t1; t++ {
			o := (t - t0) * rowTile
			m.w.rowScaled(tg[o:o+r1-r0], r0)
			if m.glu {
				m.up.rowScaled(tu[o:o+r1-r0], r0)
			}
		}
		m.storeTile(tg, tu, t0, t1, r0, r1)
	}
}

// gemmKOK reports whether m's prefill runs the K-quant GEMM over packed
// weights.
func (m *mmTask) gemmKOK() bool {
	return m.w.kgemm != nil && (!m.glu || m.up.kgemm != nil && m.up.kq == m.w.kq)
}

// tileGemmK is tileGemm for K-quant weights (gemmKOK), over the input
// quantized by simd.QuantizeQ8K; it gives DotKx4's bits.
func (m *mmTask) tileGemmK(s *scratch, r0, r1 int) {
	tg, tu := &s.tg, &s.tu
	kq := m.w.kq
	gb := kq.GemmGroupBytes(m.w.cols)
	for t0 := 0; t0 < m.n; t0 += tokTile {
		t1 := min(t0+tokTile, m.n)
		for g0 := r0; g0 < r1; g0 += simd.GemmRows {
			g := g0 / simd.GemmRows
			i := g0 - r0
			for t := t0; t < t1; t += 4 {
				nt := min(4, t1-t)
				k := t * m.inCols
				x, xd, xs := m.q[k:], m.d[k/simd.QK:], m.qs[k/simd.QKSum:]
				o := (t-t0)*rowTile + i
				simd.GemmK(kq, m.w.kgemm[g*gb:(g+1)*gb], x, xd, xs, m.inCols, nt, tg[o:], rowTile)
				if m.glu {
					simd.GemmK(kq, m.up.kgemm[g*gb:(g+1)*gb], x, xd, xs, m.inCols, nt, tu[o:], rowTile)
				}
			}
		}
		m.storeTile(tg, tu, t0, t1, r0, r1)
	}
}

// tileRows returns rows [r0, r1) of w as f32: views of f32 weights, else
// the rows dequantized into buf.
func tileRows(w *matrix, r0, r1 int, buf []float32, views [][]float32) [][]float32 {
	for r := r0; r < r1; r++ {
		if w.dtype == tensors.F32 {
			views = append(views, w.f32[r*w.cols:(r+1)*w.cols])
			continue
		}
		d := buf[(r-r0)*w.cols : (r-r0+1)*w.cols]
		w.row(r, d)
		views = append(views, d)
	}
	return views
}

// tileKRows is tile for K-quant weights with a several-rows kernel but no
// four-token one (IQ4_XS, dynamicPrefill): per token, the tile's rows by
// DotKRows, the weights staying in L1 while the tokens pass (DotK's bits,
// as decode). On m110 IQ4_XS, one thread, 4.1 ms of CPU per prompt token
// against the exact path's 4.7 ms and its dequantization per prompt (0.05
// s); IQ3_S's grid lookups make it 10.6 ms there against 4.7 ms and 0.47
// s, so IQ3_S and the other I-quants keep the exact path.
func (m *mmTask) tileKRows(s *scratch, r0, r1 int) {
	tg, tu := &s.tg, &s.tu
	for t0 := 0; t0 < m.n; t0 += tokTile {
		t1 := min(t0+tokTile, m.n)
		for t := t0; t < t1; t++ {
			o := (t - t0) * rowTile
			m.dotRows(s, m.w, r0, r1, t, tg[o:o+r1-r0])
			if m.glu {
				m.dotRows(s, m.up, r0, r1, t, tu[o:o+r1-r0])
			}
		}
		m.storeTile(tg, tu, t0, t1, r0, r1)
	}
}

// tileDynamic is tile for quantized inputs: each weight row meets four
// tokens at a time, each block decoded once for the four.
func (m *mmTask) tileDynamic(s *scratch, r0, r1 int) {
	gs, us := &s.gs, &s.us // in scratch: a local would escape through the kernels
	tg, tu := &s.tg, &s.tu
	for t0 := 0; t0 < m.n; t0 += tokTile {
		t1 := min(t0+tokTile, m.n)
		for r := r0; r < r1; r++ {
			i := r - r0
			t := t0
			for ; t+4 <= t1; t += 4 {
				m.qdot4(m.w, r, t, gs)
				if m.glu {
					m.qdot4(m.up, r, t, us)
				}
				for j := range 4 {
					tg[(t-t0+j)*rowTile+i], tu[(t-t0+j)*rowTile+i] = gs[j], us[j]
				}
			}
			for ; t < t1; t++ {
				tg[(t-t0)*rowTile+i] = m.dot(s, m.w, r, t)
				if m.glu {
					tu[(t-t0)*rowTile+i] = m.dot(s, m.up, r, t)
				}
			}
		}
		m.storeTile(tg, tu, t0, t1, r0, r1)
	}
}

// unitScale is binary16 1.0: the group scale of per-channel weights in the
// dynamic kernels, whose row scale is applied afterwards.
var unitScale = []uint16{0x3c00}

// layout is the form in which a dynamic kernel takes its input.
type layout int

const (
	layoutExact   layout = iota - 1 // no dynamic kernel: the f32 input
	layoutQ8                        // simd.QuantizeQ8, natural order (int8)
	layoutQ8Evens                   // simd.QuantizeQ8, evens first (int4)
	layoutQ8K                       // simd.QuantizeQ8K (K-quant blocks)
	numLayouts
)

// layout returns the input layout of m's dynamic kernel: int8 or int4 rows
// and blocks of whole 32-value activation blocks with block scales in
// binary16 unless there is one scale per row, Q4_1, Q5_0, Q5_1, Q8_0 or MXFP4 blocks,
// or K-quant blocks; layoutExact for every other matrix.
func (m *matrix) layout() layout {
	switch {
	case m.kq >= 0:
		return layoutQ8K
	case m.q32 >= 0:
		return layoutQ8
	case (m.dtype == tensors.I8 || m.dtype == tensors.I4) && m.cols%simd.QBlock == 0 &&
		m.block%simd.QBlock == 0 && (m.scalesF16 != nil || m.block == m.cols):
		if m.dtype == tensors.I4 {
			return layoutQ8Evens
		}
		return layoutQ8
	}
	return layoutExact
}

// dynamicPrefill reports whether prefill tiles take m's dynamic kernel:
// int8 and int4 weights, the K-quant types with a four-token kernel on
// this CPU, and IQ4_XS where it has a rows kernel (tileKRows). The others (Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, and K-quant types whose
// four-token form would be four one-token calls) run their prefill tiles
// exactly, each row dequantized once per tile: for them that is faster
// (about twice, measured on Q5_0) than four one-token products.
func (m *matrix) dynamicPrefill() bool {
	switch {
	case m.kq >= 0:
		return simd.HasKx4(m.kq) || m.kgemm != nil || m.kq == simd.IQ4XS && simd.HasKRows(m.kq)
	case m.q32 >= 0:
		return false
	}
	return true
}

// rowBytes is the size of one row of a block-type matrix.
func (m *matrix) rowBytes() int { return m.dtype.ByteSize(m.cols) }

// kInput returns token t's input quantized by simd.QuantizeQ8K for w.
func (m *mmTask) kInput(w *matrix, t int) ([]int8, []float32, []int16) {
	k := t * m.inCols
	return m.q[k : k+w.cols], m.d[k/simd.QK : (k+w.cols)/simd.QK], m.qs[k/simd.QKSum : (k+w.cols)/simd.QKSum]
}

// qdot4 sets out[j] = W[r] · in[t+j] for j < 4 in dynamic math.
func (m *mmTask) qdot4(w *matrix, r, t int, out *[4]float32) {
	if w.kq >= 0 {
		k, rb := t*m.inCols, w.rowBytes()
		simd.DotKx4(w.kq, w.blk[r*rb:(r+1)*rb], m.q[k:], m.d[k/simd.QK:], m.qs[k/simd.QKSum:], m.inCols, out)
		return
	}
	if w.q32 >= 0 {
		k, rb := t*m.inCols, w.rowBytes()
		simd.DotQ32x4(w.q32, w.blk[r*rb:(r+1)*rb], m.q[k:], m.d[k/simd.QBlock:], m.inCols, out)
		return
	}
	w.qdot4(r, m.q, m.d, t, m.inCols, out)
}

// groups returns the scales DotQ8/DotQ4 apply to row r and the number of
// activation blocks per scale; with a per-row f32 scale it returns unit
// scales and that scale as post: units, one per block, where set, so that
// the four-token prefill kernels take their one-scale-per-block form
// (1.3x faster than one scale over the row, measured on AVX2), else
// unitScale over the whole row.
func (m *matrix) groups(r int) (ws []uint16, per int, post float32) {
	if m.block == m.cols && m.scalesF16 == nil {
		if m.units != nil {
			return m.units, 1, m.scalesF32[r]
		}
		return unitScale, m.cols / simd.QBlock, m.scalesF32[r]
	}
	nb := m.cols / m.block
	return m.scalesF16[r*nb : (r+1)*nb], m.block / simd.QBlock, 1
}

// qdot is W[r] · x for input x quantized by simd.QuantizeQ8 (scales d).
func (m *matrix) qdot(r int, x []int8, d []float32) float32 {
	ws, per, post := m.groups(r)
	var v float32
	if m.dtype == tensors.I4 {
		v = simd.DotQ4(m.u8[r*m.cols/2:(r+1)*m.cols/2], ws, per, x, d)
	} else {
		v = simd.DotQ8(m.i8[r*m.cols:(r+1)*m.cols], ws, per, x, d)
	}
	if post != 1 {
		v *= post
	}
	return v
}

// blockRows reports whether qdotRows can take m: int8 or int4 weights in
// the dynamic kernels with one binary16 scale per 32-value block or one f32
// scale per row.
func (m *matrix) blockRows() bool {
	return m.layout() >= layoutQ8 && m.layout() <= layoutQ8Evens && (m.block == simd.QBlock && m.scalesF16 != nil || m.units != nil)
}

// qdotRows sets out[i] = qdot(r0+i, x, d) for rows [r0, r1) of a matrix
// for which blockRows holds.
func (m *matrix) qdotRows(r0, r1 int, x []int8, d []float32, out []float32) {
	nb := m.cols / simd.QBlock
	ws := m.units
	if ws == nil {
		ws = m.scalesF16[r0*nb : r1*nb]
	}
	if m.dtype == tensors.I4 {
		simd.DotQ4Rows(m.u8[r0*m.cols/2:r1*m.cols/2], ws, x, d, out)
	} else {
		simd.DotQ8Rows(m.i8[r0*m.cols:r1*m.cols], ws, x, d, out)
	}
	if m.units != nil {
		for i, s := range m.scalesF32[r0:r1] {
			out[i] *= s
		}
	}
}

// qdot4 sets out[j] = W[r] · x[t+j] for j < 4, x the quantized input rows
// (stride cols values).
func (m *matrix) qdot4(r int, q []int8, d []float32, t, stride int, out *[4]float32) {
	ws, per, post := m.groups(r)
	k := t * stride
	if m.dtype == tensors.I4 {
		simd.DotQ4x4(m.u8[r*m.cols/2:(r+1)*m.cols/2], ws, per, q[k:], d[k/simd.QBlock:], stride, out)
	} else {
		simd.DotQ8x4(m.i8[r*m.cols:(r+1)*m.cols], ws, per, q[k:], d[k/simd.QBlock:], stride, out)
	}
	if post != 1 {
		for j := range out {
			out[j] *= post
		}
	}
}

// quantTask quantizes input rows for the dynamic kernels.
type quantTask struct {
	in   []float32
	cols int
	q    []int8
	d    []float32
	s    []int16
	xs   []int32 // when set, simd.BlockSums of q
	l    layout
}

func (qt *quantTask) run(_, lo, hi int) {
	for t := lo; t < hi; t++ {
		k := t * qt.cols
		if qt.l == layoutQ8K {
			simd.QuantizeQ8K(qt.q[k:k+qt.cols], qt.d[k/simd.QK:(k+qt.cols)/simd.QK], qt.s[k/simd.QKSum:(k+qt.cols)/simd.QKSum], qt.in[k:k+qt.cols])
			continue
		}
		simd.QuantizeQ8(qt.q[k:k+qt.cols], qt.d[k/simd.QBlock:(k+qt.cols)/simd.QBlock], qt.in[k:k+qt.cols], qt.l == layoutQ8Evens)
		if qt.xs != nil {
			simd.BlockSums(qt.xs[k/simd.QBlock:(k+qt.cols)/simd.QBlock], qt.q[k:k+qt.cols])
		}
	}
}

// quantize sets m's quantized input (q, d, qs) for the step's input (n
// rows of cols) in the layout m.w needs, or leaves it nil when m.w is used
// exactly (also in prefill unless dynamicPrefill). Each layout is
// quantized once per step (MultiMatMul and MatMulGLU share it).
func (p *program) quantize(m *mmTask, in []float32, cols, n int) {
	l := m.w.layout()
	if p.math != MathDynamic || l == layoutExact || cols%simd.QBlock != 0 || l == layoutQ8K && cols%simd.QK != 0 {
		return
	}
	gemm := m.gemmOK() && (!m.rowwise() || m.decodeGemm())
	if gemm {
		l = layoutQ8 // natural order, with block sums
	}
	if !m.rowwise() && (!m.w.dynamicPrefill() || m.up != nil && !m.up.dynamicPrefill()) {
		return
	}
	qb := &p.qbufs[l]
	if qb.step != p.stepID {
		qb.step = p.stepID
		qt := &p.qt
		*qt = quantTask{in: in, cols: cols, q: qb.q[:n*cols], d: qb.d[:n*cols/simd.QBlock], s: qb.s[:n*cols/simd.QKSum], l: l}
		if gemm {
			qt.xs = qb.xs[:n*cols/simd.QBlock]
			qb.xsStep = p.stepID
		}
		p.pool.run(n, 8*n*cols, 1, qt)
	}
	m.q, m.d, m.qs = qb.q[:n*cols], qb.d[:n*cols/simd.QBlock], qb.s[:n*cols/simd.QKSum]
	if gemm {
		if qb.xsStep != p.stepID {
			// Quantized earlier in this step for a row kernel, which
			// needs no block sums.
			simd.BlockSums(qb.xs[:n*cols/simd.QBlock], qb.q[:n*cols])
			qb.xsStep = p.stepID
		}
		m.xs = qb.xs[:n*cols/simd.QBlock]
	}
}
