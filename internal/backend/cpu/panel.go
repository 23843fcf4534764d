package cpu

import (
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// The encoders' products on CPUs with the panel GEMM but without the f32
// GEMM of AVX-512 (AVX2 and FMA): the matrix products of a program with
// self-attention (a vision or audio encoder: no decode form whose bits
// its prefill must keep) repack the weight rows as panels of
// simd.GemmPanelCols rows, transposed (a panel's values for one column
// side by side), and take the tokens through simd.GemmPanel, whose
// register tiles broadcast the inputs and load the panel: about twice the
// two-row dot kernels' speed. Self-attention takes its scores and value
// sums through the same GEMM (selfGemm.panelTile).

// encoder reports whether p is an encoder's program: it has self-attention.
func (p *program) encoder() bool { return p.selfKV != nil }

// panelGemm reports whether the panel GEMM takes the encoders' products
// and attention on this CPU: it has the panel GEMM and not the f32 GEMM
// (whose path stays as it is).
func panelGemm() bool { return simd.HasGemmPanel() && !simd.HasGemmF32() }

// panelOK reports whether m's prefill takes runPanels: an encoder's
// product of weights used as f32 rows.
func (m *mmTask) panelOK() bool {
	return m.q == nil && m.p.encoder() && panelGemm()
}

// panelTokens is runPanels' token block: at most tokTile (the products
// fill scratch.tg), a multiple of 6 (whole register tiles of the GEMM).
const panelTokens = tokTile / 6 * 6

// runPanels computes rows [lo, hi) (whole panels but for the matrix's
// last) for every token: the rows are repacked a chunk at a time
// (unpackedChunk values per matrix), and each chunk meets the tokens a
// block (panelTokens) at a time, the block's inputs staying in L2 while each
// panel meets all of them; the epilogue runs per panel and block.
func (m *mmTask) runPanels(s *scratch, lo, hi int) {
	const pc = simd.GemmPanelCols
	cols := m.w.cols
	per := max(pc, unpackedChunk/cols/pc*pc)
	need := (min(per, hi-lo) + pc - 1) / pc * pc * cols
	if len(s.wide) < need {
		s.wide = make([]float32, need)
	}
	if m.glu && len(s.wideUp) < need {
		s.wideUp = make([]float32, need)
	}
	for c0 := lo; c0 < hi; c0 += per {
		c1 := min(c0+per, hi)
		packPanels(m.w, c0, c1, s.wide, s.row)
		if m.glu {
			packPanels(m.up, c0, c1, s.wideUp, s.row)
		}
		for t0 := 0; t0 < m.n; t0 += panelTokens {
			t1 := min(t0+panelTokens, m.n)
			x := m.in[t0*m.inCols:]
			for r0 := c0; r0 < c1; r0 += pc {
				r1 := min(r0+pc, c1)
				off := (r0 - c0) * cols
				simd.GemmPanel(x, m.inCols, t1-t0, s.wide[off:off+pc*cols], pc, pc, cols, s.tg[:], rowTile, false)
				if m.glu {
					simd.GemmPanel(x, m.inCols, t1-t0, s.wideUp[off:off+pc*cols], pc, pc, cols, s.tu[:], rowTile, false)
				}
				m.storeTile(&s.tg, &s.tu, t0, t1, r0, r1)
			}
		}
	}
}

// packPanels writes rows [r0, r1) of w into dst as panels of
// simd.GemmPanelCols rows: panel p's value of row r0+p*pc+j, column k at
// dst[p*pc*cols + k*pc + j], zeros for the rows past r1 of a last partial
// panel. row is scratch of w.cols values.
func packPanels(w *matrix, r0, r1 int, dst, row []float32) {
	const pc = simd.GemmPanelCols
	cols := w.cols
	row = row[:cols]
	for p0 := r0; p0 < r1; p0 += pc {
		panel := dst[(p0-r0)*cols : (p0-r0+pc)*cols]
		for j := range pc {
			if p0+j >= r1 {
				for k := range cols {
					panel[k*pc+j] = 0
				}
				continue
			}
			w.row(p0+j, row)
			for k, v := range row {
				panel[k*pc+j] = v
			}
		}
	}
}

// rowTile is the panel width: the pool splits a product's rows in whole
// panels, and a panel's products fill a tile of scratch.tg.
const _ = uint(rowTile-simd.GemmPanelCols) + uint(simd.GemmPanelCols-rowTile)

// selfValueRun is how many keys one value product takes (accumulating
// into the output): their values (head dim wide) stay in L2 meanwhile.
const selfValueRun = 256

// panelPack is the packing job of KV head kvh for panelTile: its keys as
// panels of simd.GemmPanelCols keys (panel p's value of key 16p+j, head
// dim column d at d*16+j, zeros past the n keys), and its values a row
// per key, head dim values long, side by side, in the space of the
// transposed keys and values (hd x ld values each, ld > round16(n)).
func (a *selfGemm) panelPack(kvh int) {
	const pc = simd.GemmPanelCols
	hd, kc := a.op.HeadDim, a.op.KVHeads*a.op.HeadDim
	size := hd * a.ld
	kp := a.p.selfKV[2*kvh*size:][:size]
	vp := a.p.selfKV[(2*kvh+1)*size:][:size]
	for s := range round16(a.n) {
		panel := kp[s/pc*pc*hd:]
		if s >= a.n {
			for d := range hd {
				panel[d*pc+s%pc] = 0
			}
			continue
		}
		for d, v := range a.k[s*kc+kvh*hd : s*kc+(kvh+1)*hd] {
			panel[d*pc+s%pc] = v
		}
		copy(vp[s*hd:(s+1)*hd], a.v[s*kc+kvh*hd:s*kc+(kvh+1)*hd])
	}
}

// panelTile is tile on the panel GEMM: the tile's queries, scaled by the
// op's scale, times the key panels (panelPack), a panel (in L1) meeting
// every query row at a time; each row exponentiated against its maximum
// (softmaxRaw, not yet normalized); the rows times the packed values,
// selfValueRun keys at a time (their values in L1) added up in the
// output; then each output row divided by its row's sum. (A
// SelfAttnOp has a scale only: no logit cap, no sinks.)
func (a *selfGemm) panelTile(wk, t0, h int) {
	const pc = simd.GemmPanelCols
	op := a.op
	hd, qc := op.HeadDim, op.Heads*op.HeadDim
	kvh := h / (op.Heads / op.KVHeads)
	size := hd * a.ld
	kp := a.p.selfKV[2*kvh*size:][:size]
	vp := a.p.selfKV[(2*kvh+1)*size:][:size]
	nt := min(selfTile, a.n-t0)
	np := round16(a.n)
	ss := selfStride(a.n) // the score rows' stride: not a multiple of 1024 values (L1 sets)
	buf := a.p.scratch[wk].scores
	sc, qs := buf[:selfTile*ss], buf[selfTile*ss:selfTile*ss+selfTile*hd]
	for t := range nt {
		q := a.q[(t0+t)*qc+h*hd : (t0+t)*qc+(h+1)*hd]
		for d, v := range q {
			qs[t*hd+d] = v * a.ap.scale
		}
	}
	for c0 := 0; c0 < np; c0 += pc {
		simd.GemmPanel(qs, hd, nt, kp[c0*hd:(c0+pc)*hd], pc, pc, hd, sc[c0:], ss, false)
	}
	var inv [selfTile]float32
	for t := range nt {
		inv[t] = softmaxRaw(sc[t*ss : t*ss+a.n])
	}
	out := a.out[t0*qc+h*hd:]
	for c0 := 0; c0 < a.n; c0 += selfValueRun {
		c1 := min(c0+selfValueRun, a.n)
		simd.GemmPanel(sc[c0:], ss, nt, vp[c0*hd:c1*hd], hd, hd, c1-c0, out, qc, c0 > 0)
	}
	for t := range nt {
		o := out[t*qc : t*qc+hd]
		for d := range o {
			o[d] *= inv[t]
		}
	}
}

// softmaxRaw sets s[i] = exp(s[i] - max(s)) and returns 1 / Σ s[i] (the
// sum in float64, as attnParams.softmax sums, in simd.SumF64's order).
func softmaxRaw(s []float32) float32 {
	simd.ExpSub(s, s, simd.MaxF32(s))
	return float32(1 / simd.SumF64(s))
}

// actTask is a fusion.ActivationOp as a pool task: elementwise, so split
// anywhere with the same results.
type actTask struct {
	out, in []float32
	act     func(float32) float32
}

// actWork weighs one activation as about this many multiply-adds (for
// pool.run's threshold: an encoder's GELU over millions of values is worth
// the threads, a decode step's few thousand are not); actGrain is the
// least values a chunk takes.
const (
	actWork  = 8
	actGrain = 4096
)

func (a *actTask) run(_, lo, hi int) { activate(a.out[lo:hi], a.in[lo:hi], hi-lo, a.act) }
