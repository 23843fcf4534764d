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
	// The optional biases (nil: none): the router's, and each expert's
	// row of the gate, up and down biases.
	routerBias                 []float32
	gateBias, upBias, downBias [][]float32
	gating                     fusion.Gating
	glu                        func(g, u float32) float32 // ActSwiGLUOAI (nil: act(g) * u)
	logits                     []float32                  // [Tokens, Experts] router products
	probs                      []float32                  // one row's softmax
	sel                        []int                      // one row's selected experts
	w                          []float32                  // their weights
	hid                        []float32                  // one expert's gated hidden row
	eo                         []float32                  // one expert's output row
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
	m.gating = op.Gating
	if op.RouterBias != "" {
		m.routerBias = ws.byName[op.RouterBias].vector()
	}
	for _, b := range []struct {
		dst  *[][]float32
		name string
	}{{&m.gateBias, op.GateBias}, {&m.upBias, op.UpBias}, {&m.downBias, op.DownBias}} {
		if b.name == "" {
			continue
		}
		v := ws.byName[b.name].vector()
		n := len(v) / op.Experts
		*b.dst = make([][]float32, op.Experts)
		for e := range op.Experts {
			(*b.dst)[e] = v[e*n : (e+1)*n : (e+1)*n]
		}
	}
	if op.Act == fusion.ActSwiGLUOAI {
		alpha, limit := op.SwiGLUOAI.Alpha, op.SwiGLUOAI.Limit
		m.glu = func(g, u float32) float32 { return swigluOAI(g, u, alpha, limit) }
	}
	return m, nil
}

// swigluOAI is fusion.ActSwiGLUOAI in f32, with the operations of
// llama.cpp's CPU swiglu_oai in their order: x = min(g, limit), y = u
// clamped to ±limit, x / (1 + exp(alpha * -x)) * (y + 1).
func swigluOAI(g, u, alpha, limit float32) float32 {
	x := min(g, limit)
	y := max(min(u, limit), -limit)
	return x / (1 + float32(math.Exp(float64(alpha*-x)))) * (y + 1)
}

// at returns expert e's row of the biases b (nil: none).
func at(b [][]float32, e int) []float32 {
	if b == nil {
		return nil
	}
	return b[e]
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
	p.mm = mmTask{p: p, out: m.logits, outCols: E, in: x, inCols: cols, n: n, w: m.router, bias: m.routerBias}
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
				bias: at(m.gateBias, e), upBias: at(m.upBias, e), act: s.act, silu: s.silu, glu: true, glu2: m.glu}
			if g.layout() == u.layout() {
				p.quantize(&p.mm, xt, cols, 1)
			}
			p.matMul(&p.mm)
			p.stepID++
			p.mm = mmTask{p: p, out: m.eo, outCols: cols, in: m.hid, inCols: op.Hidden, n: 1, w: d, bias: at(m.downBias, e)}
			p.quantize(&p.mm, m.hid, op.Hidden, 1)
			p.matMul(&p.mm)
			w := m.w[i]
			for j, v := range m.eo {
				o[j] += w * v
			}
		}
	}
}

// route sets m.sel and m.w for one row of router logits per m.gating
// (fusion.MoEOp): GatingSoftmax takes the used most probable experts of
// the softmax and their probabilities, GatingSoftmaxWeight the used
// largest logits and the softmax of those alone (the lower index first
// on ties either way); norm renormalizes the weights to sum 1.
func route(m *moeStep, logits []float32, used int, norm bool) {
	score := logits
	if m.gating == fusion.GatingSoftmax {
		softmax(m.probs, logits)
		score = m.probs
	}
	m.sel = m.sel[:0]
	for range used {
		best := -1
		for i, v := range score {
			if best >= 0 && !(v > score[best]) || contains(m.sel, i) {
				continue
			}
			best = i
		}
		m.sel = append(m.sel, best)
	}
	for i, e := range m.sel {
		m.w[i] = score[e]
	}
	if m.gating == fusion.GatingSoftmaxWeight {
		softmax(m.w, m.w)
	}
	if norm {
		var s float32
		for _, v := range m.w {
			s += v
		}
		for i := range m.w {
			m.w[i] /= s
		}
	}
}

// softmax sets dst to the softmax of src (which it may alias) as
// llama.cpp's CPU soft_max computes it: f32 exponentials of the
// differences to the maximum, their sum in float64, one f32 scale.
func softmax(dst, src []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range src {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range src {
		e := float32(math.Exp(float64(v - mx)))
		dst[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range dst {
		dst[i] *= inv
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
