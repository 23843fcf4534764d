package cpu

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// moeStep holds a MoE op's resolved weights and working memory.
type moeStep struct {
	router         *matrix
	gate, up, down []*matrix // one view per expert
	logits         []float32 // [Tokens, Experts] router products
	probs          []float32 // one row's softmax
	sel            []int     // one row's selected experts
	w              []float32 // their weights
	hid            []float32 // one expert's gated hidden row
	eo             []float32 // one expert's output row
}

func newMoEStep(ws *weights, op *fusion.MoEOp, tokens, cols int) (*moeStep, error) {
	m := &moeStep{router: ws.byName[op.Router],
		logits: make([]float32, tokens*op.Experts), probs: make([]float32, op.Experts),
		sel: make([]int, 0, op.Used), w: make([]float32, op.Used),
		hid: make([]float32, op.Hidden), eo: make([]float32, cols)}
	var err error
	for _, x := range []struct {
		dst  *[]*matrix
		name string
	}{{&m.gate, op.Gate}, {&m.up, op.Up}, {&m.down, op.Down}} {
		if *x.dst, err = ws.byName[x.name].slabs(op.Experts); err != nil {
			return nil, fmt.Errorf("cpu: compile: tensor %q: %w", x.name, err)
		}
	}
	return m, nil
}

// slabs views a matrix of n stacked matrices (a 3-D tensor [n, r, cols],
// folded to n*r rows) as n matrices of r rows, aliasing its data: an
// expert's rows are read only when that expert is used.
func (m *matrix) slabs(n int) ([]*matrix, error) {
	if n <= 0 || m.rows%n != 0 || len(m.shape) != 3 {
		return nil, fmt.Errorf("%w: %v is not %d stacked matrices", tensors.ErrShape, m.shape, n)
	}
	r := m.rows / n
	out := make([]*matrix, n)
	for e := range n {
		s := *m
		s.rows, s.shape = r, m.shape[1:]
		lo, hi := e*r*m.cols, (e+1)*r*m.cols // elements
		switch m.dtype {
		case tensors.F32:
			s.f32 = m.f32[lo:hi]
		case tensors.F16, tensors.BF16:
			s.u16 = m.u16[lo:hi]
		case tensors.I8:
			s.i8 = m.i8[lo:hi]
		case tensors.I4:
			if lo%2 != 0 {
				return nil, fmt.Errorf("%w: int4 expert of odd size %d", tensors.ErrShape, r*m.cols)
			}
			s.u8 = m.u8[lo/2 : hi/2]
		default:
			rb := m.dtype.ByteSize(m.cols)
			s.blk = m.blk[e*r*rb : (e+1)*r*rb]
		}
		if m.block > 0 {
			nb := m.cols / m.block
			if m.scalesF32 != nil {
				s.scalesF32 = m.scalesF32[e*r*nb : (e+1)*r*nb]
			} else {
				s.scalesF16 = m.scalesF16[e*r*nb : (e+1)*r*nb]
			}
		}
		out[e] = &s
	}
	return out, nil
}

// moe runs a MoE op on the n rows of x (cols wide) into out: the router
// product for all rows, then per row the selected experts' products, each
// as MatMul computes it.
func (p *program) moe(s *step, op *fusion.MoEOp, out, x []float32, cols, n int) {
	m := s.moe
	E := op.Experts
	p.stepID++
	p.mm = mmTask{p: p, out: m.logits, outCols: E, in: x, inCols: cols, n: n, w: m.router}
	p.quantize(&p.mm, x, cols, n)
	p.matMul(&p.mm)
	for t := range n {
		route(m, m.logits[t*E:(t+1)*E], op.Used, op.NormTopK)
		o := out[t*cols : (t+1)*cols]
		clear(o)
		xt := x[t*cols : (t+1)*cols]
		for i, e := range m.sel {
			g, u, d := m.gate[e], m.up[e], m.down[e]
			p.stepID++
			p.mm = mmTask{p: p, out: m.hid, outCols: op.Hidden, in: xt, inCols: cols, n: 1, w: g, up: u,
				act: s.act, silu: s.silu, glu: true}
			if g.layout() == u.layout() {
				p.quantize(&p.mm, xt, cols, 1)
			}
			p.matMul(&p.mm)
			p.stepID++
			p.mm = mmTask{p: p, out: m.eo, outCols: cols, in: m.hid, inCols: op.Hidden, n: 1, w: d}
			p.quantize(&p.mm, m.hid, op.Hidden, 1)
			p.matMul(&p.mm)
			w := m.w[i]
			for j, v := range m.eo {
				o[j] += w * v
			}
		}
	}
}

// route sets m.sel and m.w for one row of router logits: softmax, the used
// most probable experts (lower index first on ties), their probabilities,
// renormalized to sum 1 with norm.
func route(m *moeStep, logits []float32, used int, norm bool) {
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range logits {
		e := float32(math.Exp(float64(v - mx)))
		m.probs[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range m.probs {
		m.probs[i] *= inv
	}
	m.sel = m.sel[:0]
	for range used {
		best := -1
		for i, v := range m.probs {
			if best >= 0 && !(v > m.probs[best]) || contains(m.sel, i) {
				continue
			}
			best = i
		}
		m.sel = append(m.sel, best)
	}
	var s float32
	for i, e := range m.sel {
		m.w[i] = m.probs[e]
		s += m.w[i]
	}
	if norm {
		for i := range m.sel {
			m.w[i] /= s
		}
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
