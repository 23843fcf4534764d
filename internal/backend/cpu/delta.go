package cpu

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// deltaChunk is the chunk length of the chunked delta rule (prefill
// steps of more than one row); a variable so that tests can make chunks
// end inside short sequences.
var deltaChunk = 64

// deltaStep is a compiled fusion.DeltaNetOp: its weights as f32 and the
// scratch of one step (win: the convolution window then the rows' inputs;
// x: the convolved, activated and normalized q, k, v rows; beta, decay:
// β and g per row and value head), and per worker the chunked form's
// buffers (deltaScratch).
type deltaStep struct {
	conv, dtBias, a []float32
	k, v, d, width  int
	eps             float32
	win, x          []float32
	beta, decay     []float32
	scratch         []deltaScratch
	chunked         bool // this run's form (set per run, read by the task)
	out             []float32
	state           []float32
	n               int

	// The prologue's inputs (deltaPrep) and its constants: the kernel
	// transposed to [width][channels], so that one tap is a run of
	// channels, and a row of ones (SiLU as simd.SwiGLU with u = 1, the
	// same bits as silu).
	convT, ones    []float32
	inBeta, inAlp  []float32
	inState, inQKV []float32
}

// deltaScratch is one worker's scratch of the chunked form: the
// cumulative log decays G, the deltas δ (one row of D per chunk row), the
// weights of one weighted sum and one state row.
type deltaScratch struct {
	cum, w, row []float32
	delta       []float32
	neg, ex     []float32 // −G per row; exp(G_t − G_s) for the row in hand
}

func newDeltaStep(op *fusion.DeltaNetOp, conv, dtBias, a []float32, tokens, threads int) *deltaStep {
	c := op.Channels()
	s := &deltaStep{conv: conv, dtBias: dtBias, a: a, k: op.KeyHeads, v: op.ValueHeads, d: op.HeadDim, width: op.Width, eps: op.Eps,
		win: make([]float32, (op.Width-1+tokens)*c), x: make([]float32, tokens*c),
		beta: make([]float32, tokens*op.ValueHeads), decay: make([]float32, tokens*op.ValueHeads)}
	s.scratch = make([]deltaScratch, threads)
	s.convT, s.ones = make([]float32, len(conv)), make([]float32, c)
	for i := range c {
		for j := range op.Width {
			s.convT[j*c+i] = conv[i*op.Width+j]
		}
		s.ones[i] = 1
	}
	return s
}

// scratchOf returns worker w's chunk scratch, sized for chunks of n rows.
func (s *deltaStep) scratchOf(w, n int) *deltaScratch {
	sc := &s.scratch[w]
	if len(sc.cum) < n {
		sc.cum, sc.w = make([]float32, n), make([]float32, n)
		sc.neg, sc.ex = make([]float32, n), make([]float32, n)
		sc.delta = make([]float32, n*s.d)
	}
	if sc.row == nil {
		sc.row = make([]float32, s.d)
	}
	return sc
}

// deltaNet runs the op over n rows at positions pos... on layer cache c
// (fusion.DeltaNetOp): the causal convolution over qkv with the state's
// window and SiLU, the L2 norms of q and k, the gates, then the delta rule
// per value head on the state's matrices, in the recurrent form for one
// row and the chunked form for more (deltaChunked), into out (n rows of
// V·D).
func (p *program) deltaNet(s *deltaStep, out, qkv, beta, alpha []float32, n, pos int, c *layerCache) error {
	ab := deltaAblation
	switch {
	case pos == 0 || ab.forget:
		clear(c.conv)
	case pos != c.statePos:
		return fmt.Errorf("%w: a step at position %d on a recurrent state that holds position %d (states cannot roll back; restart the sequence at 0)", gpu.ErrStep, pos, c.statePos)
	}
	ch, k1, d := (2*s.k+s.v)*s.d, s.width-1, s.d
	s.inBeta, s.inAlp = beta, alpha
	if ab.shift || s.ones == nil {
		win := s.win[:(k1+n)*ch]
		copy(win, c.conv[:k1*ch])
		copy(win[k1*ch:], qkv[:n*ch])
		s.prepSlow(win, n)
	} else {
		// Rows are independent: both threads take rows (work: the taps,
		// the SiLU and the norms per channel), reading the window from
		// the state and qkv where they are rather than from a copy.
		s.inState, s.inQKV = c.conv[:k1*ch], qkv[:n*ch]
		p.pool.run(n, n*ch*(s.width+8), 1, (*deltaPrep)(s))
	}
	// The state's window: its last k1 rows, from qkv and, for fewer
	// rows than k1, the state's own later rows.
	if n >= k1 {
		copy(c.conv[:k1*ch], qkv[(n-k1)*ch:n*ch])
	} else {
		copy(c.conv[:(k1-n)*ch], c.conv[n*ch:k1*ch])
		copy(c.conv[(k1-n)*ch:k1*ch], qkv[:n*ch])
	}
	s.out, s.state, s.n, s.chunked = out, c.conv[k1*ch:], n, n > 1
	p.pool.run(s.v, n*s.v*d*d*4, 1, s)
	c.statePos = pos + n
	return nil
}

// prepSlow is the prologue one channel at a time, the form the ablations
// (deltaAblation.shift) break; deltaPrep is the same arithmetic in runs of
// channels.
func (s *deltaStep) prepSlow(win []float32, n int) {
	ab := deltaAblation
	ch, d := (2*s.k+s.v)*s.d, s.d
	beta, alpha := s.inBeta, s.inAlp
	x := s.x[:n*ch]
	for t := range n {
		xo := x[t*ch : (t+1)*ch]
		for i := range xo {
			var sum float32
			for j, wj := range s.conv[i*s.width : (i+1)*s.width] {
				if ab.shift {
					if t+j == 0 {
						continue
					}
					j--
				}
				sum += wj * win[(t+j)*ch+i]
			}
			xo[i] = silu(sum)
		}
		s.normGates(xo, beta, alpha, t, d)
	}
}

// deltaPrep is a deltaStep as the task of its prologue: per row, the
// causal convolution (the window's taps in kernel order, as prepSlow sums
// them), SiLU, the L2 norms of q and k and the gates.
type deltaPrep deltaStep

func (dp *deltaPrep) run(_, lo, hi int) {
	s := (*deltaStep)(dp)
	ch, d := (2*s.k+s.v)*s.d, s.d
	for t := lo; t < hi; t++ {
		xo := s.x[t*ch : (t+1)*ch]
		for j := range s.width {
			// Window row t+j: the state's for t+j < width-1, else qkv's.
			var xj []float32
			if r := t + j - (s.width - 1); r < 0 {
				xj = s.inState[(t+j)*ch : (t+j+1)*ch]
			} else {
				xj = s.inQKV[r*ch : (r+1)*ch]
			}
			wj := s.convT[j*ch : (j+1)*ch]
			xj, wj = xj[:len(xo)], wj[:len(xo)]
			if j == 0 {
				for i := range xo {
					xo[i] = wj[i] * xj[i]
				}
				continue
			}
			for i := range xo {
				xo[i] += wj[i] * xj[i]
			}
		}
		simd.SwiGLU(xo, xo, s.ones)
		s.normGates(xo, s.inBeta, s.inAlp, t, d)
	}
}

// normGates divides row t's q and k heads by their L2 norms and sets the
// row's β and decay per value head.
func (s *deltaStep) normGates(xo, beta, alpha []float32, t, d int) {
	// q and k, 2K heads of D, each over max(‖·‖, eps) (ggml_l2_norm).
	for h := range 2 * s.k {
		hv := xo[h*d : (h+1)*d]
		norm := float32(math.Sqrt(float64(simd.DotF32(hv, hv))))
		inv := 1 / max(norm, s.eps)
		for i := range hv {
			hv[i] *= inv
		}
	}
	for h := range s.v {
		b, a := beta[t*s.v+h], alpha[t*s.v+h]+s.dtBias[h]
		s.beta[t*s.v+h] = float32(1 / (1 + math.Exp(-float64(b))))
		sp := a
		if a <= 20 {
			sp = float32(math.Log1p(math.Exp(float64(a))))
		}
		s.decay[t*s.v+h] = sp * s.a[h]
	}
}

// run covers value heads [lo, hi) on worker w.
func (s *deltaStep) run(w, lo, hi int) {
	for h := lo; h < hi; h++ {
		if s.chunked {
			s.chunkedHead(w, h)
		} else {
			s.recurrentHead(h)
		}
	}
}

// heads returns row t's q and k of key head i = h mod K and v of value
// head h, and the head's state matrix.
func (s *deltaStep) heads(t, h int) (q, k, v []float32) {
	ch, d, i := (2*s.k+s.v)*s.d, s.d, h%s.k
	if deltaAblation.grouped {
		i = h / (s.v / s.k)
	}
	row := s.x[t*ch : (t+1)*ch]
	return row[i*d : (i+1)*d], row[(s.k+i)*d : (s.k+i+1)*d], row[(2*s.k+h)*d : (2*s.k+h+1)*d]
}

// recurrentHead runs the delta rule one row at a time on value head h
// (the form for decoding): with γ = exp(g),
//
//	u = γ·Sᵀk;  δ = β(v − u);  S ← γS + k δᵀ;  o = Sᵀq / √D
//
// S row-major [key dim][value dim], so Sᵀx is a weighted sum of its rows.
func (s *deltaStep) recurrentHead(h int) {
	d := s.d
	st := s.state[h*d*d : (h+1)*d*d]
	scale := float32(1 / math.Sqrt(float64(d)))
	for t := range s.n {
		q, k, v := s.heads(t, h)
		o := s.out[(t*s.v+h)*d : (t*s.v+h+1)*d]
		gamma := float32(math.Exp(float64(s.decay[t*s.v+h])))
		beta := s.beta[t*s.v+h]
		simd.WeightedSum(o, st, d, k) // o holds Sᵀk until the end
		for j := range o {
			o[j] = beta * (v[j] - gamma*o[j])
		}
		simd.DecayRank1(st, k, o, gamma)
		simd.WeightedSum(o, st, d, q)
		for j := range o {
			o[j] *= scale
		}
	}
}

// chunkedHead runs the delta rule on value head h over chunks of
// deltaChunk rows (the form for prefill). Within a chunk of L rows
// starting from state S0, with G_t = Σ_{s≤t} g_s (so that the decay from
// row s to row t is exp(G_t − G_s)), the recurrence unrolls to
//
//	δ_t = β_t (v_t − exp(G_t) S0ᵀk_t − Σ_{s<t} exp(G_t−G_s) (k_t·k_s) δ_s)
//	o_t = (exp(G_t) S0ᵀq_t + Σ_{s≤t} exp(G_t−G_s) (q_t·k_s) δ_s) / √D
//	S_L = exp(G_L) S0 + Σ_s exp(G_L−G_s) k_s δ_sᵀ
//
// (δ_t = β_t (v_t − u_t) of the recurrent form; a lower-triangular system
// solved forward): the state is read and written once per chunk, and the
// rest are dot products and weighted sums of rows.
func (s *deltaStep) chunkedHead(w, h int) {
	d := s.d
	st := s.state[h*d*d : (h+1)*d*d]
	scale := float32(1 / math.Sqrt(float64(d)))
	for t0 := 0; t0 < s.n; t0 += deltaChunk {
		L := min(deltaChunk, s.n-t0)
		sc := s.scratchOf(w, L)
		cum, wts, row, delta := sc.cum[:L], sc.w[:L], sc.row, sc.delta[:L*d]
		var g float64
		neg, ex := sc.neg[:L], sc.ex[:L]
		for t := range L {
			g += float64(s.decay[(t0+t)*s.v+h])
			cum[t] = float32(g)
			neg[t] = -cum[t]
		}
		for t := range L {
			q, k, v := s.heads(t0+t, h)
			dt := delta[t*d : (t+1)*d]
			// δ_t: the state's part, then the earlier rows'.
			simd.WeightedSum(dt, st, d, k)
			gt := math.Exp(float64(cum[t]))
			// exp(G_t − G_s) for s ≤ t in one vector pass (−G_s − (−G_t)).
			simd.ExpSub(ex[:t+1], neg[:t+1], neg[t])
			s.keyDots(wts[:t], k, t0, h)
			for s2 := range t {
				wts[s2] *= ex[s2]
			}
			if t == 0 {
				clear(row)
			} else {
				simd.WeightedSum(row, delta, d, wts[:t])
			}
			beta := s.beta[(t0+t)*s.v+h]
			for j := range dt {
				dt[j] = beta * (v[j] - float32(gt)*dt[j] - row[j])
			}
			// o_t from S0 and δ_0..δ_t.
			o := s.out[((t0+t)*s.v+h)*d : ((t0+t)*s.v+h+1)*d]
			simd.WeightedSum(o, st, d, q)
			s.keyDots(wts[:t+1], q, t0, h)
			for s2 := range t + 1 {
				wts[s2] *= ex[s2]
			}
			simd.WeightedSum(row, delta, d, wts[:t+1])
			for j := range o {
				o[j] = (float32(gt)*o[j] + row[j]) * scale
			}
		}
		// S ← exp(G_L) S0 + Σ_s exp(G_L−G_s) k_s δ_sᵀ, row by row.
		gl := float32(math.Exp(float64(cum[L-1])))
		for s2 := range L {
			cum[s2] = float32(math.Exp(float64(cum[L-1] - cum[s2])))
		}
		for i := range d {
			for s2 := range L {
				_, ks, _ := s.heads(t0+s2, h)
				wts[s2] = cum[s2] * ks[i]
			}
			simd.WeightedSum(row, delta, d, wts)
			r := st[i*d : (i+1)*d]
			for j := range r {
				r[j] = gl*r[j] + row[j]
			}
		}
	}
}

// keyDots sets out[s] = x·k_{t0+s} for s < len(out), k of value head h's
// key head, four rows of the strided keys per kernel call.
func (s *deltaStep) keyDots(out, x []float32, t0, h int) {
	ch, i := (2*s.k+s.v)*s.d, h%s.k
	if deltaAblation.grouped {
		i = h / (s.v / s.k)
	}
	base := t0*ch + (s.k+i)*s.d // heads(t0, h)'s k
	var o4 [4]float32
	i = 0
	for ; i+4 <= len(out); i += 4 {
		simd.DotF32x4(x, s.x[base+i*ch:], ch, &o4)
		out[i], out[i+1], out[i+2], out[i+3] = o4[0], o4[1], o4[2], o4[3]
	}
	for ; i < len(out); i++ {
		out[i] = simd.DotF32(x, s.x[base+i*ch:])
	}
}

// deltaAblation breaks deltaNet on purpose, for the tests that show each
// convention matters (export_test.go): forget starts every step from the
// empty state, shift reads the convolution window one position late, and
// grouped pairs value head h with key head h / (V/K) (HF's order) rather
// than h mod K. The zero value, always outside tests, is none.
var deltaAblation struct{ forget, shift, grouped bool }

// deltaNetStep runs op for the step's rows: a plain graph's n rows on the
// program's cache, or each row of a batched one on its own sequence's
// state at its own position.
func (p *program) deltaNetStep(s *step, op *fusion.DeltaNetOp, out, qkv, beta, alpha []float32, n, pos int) error {
	if !p.graph.Batch {
		return p.deltaNet(s.delta, out, qkv, beta, alpha, n, pos, &p.kv.layers[op.Layer])
	}
	ch, v, od := op.Channels(), op.ValueHeads, op.ValueHeads*op.HeadDim
	for t := range n {
		if err := p.deltaNet(s.delta, out[t*od:(t+1)*od], qkv[t*ch:(t+1)*ch], beta[t*v:(t+1)*v], alpha[t*v:(t+1)*v], 1, p.rowPos[t], &p.rowSeq[t].layers[op.Layer]); err != nil {
			return fmt.Errorf("row %d: %w", t, err)
		}
	}
	return nil
}

// sigmoidGate sets out[i] = in[i] · sigmoid(gate[i]) over n rows of cols
// (fusion.SigmoidGateOp), or with gateCols 1, out[t][c] = in[t][c] ·
// sigmoid(gate[t]).
func sigmoidGate(out, in, gate []float32, n, cols, gateCols int) {
	if sigmoidGateAblation {
		copy(out[:n*cols], in[:n*cols])
		return
	}
	if gateCols == 1 {
		for t := range n {
			s := 1 / (1 + simd.Exp(-gate[t]))
			for i := t * cols; i < (t+1)*cols; i++ {
				out[i] = in[i] * s
			}
		}
		return
	}
	for i := range out[:n*cols] {
		out[i] = in[i] / (1 + simd.Exp(-gate[i]))
	}
}

// sigmoidGateAblation drops the gate (tests only).
var sigmoidGateAblation bool
