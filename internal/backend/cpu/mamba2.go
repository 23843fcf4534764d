package cpu

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// mamba2Step holds what a fusion.Mamba2Op reads besides its input: its
// weights as f32 vectors, and scratch for the convolution window (the
// state's window followed by the step's inputs) and its outputs.
type mamba2Step struct {
	conv, convBias, dtBias, a, d, norm []float32
	win, xbc                           []float32
	scan                               scanTask // the step's scan, for the pool
}

func newMamba2Step(op *fusion.Mamba2Op, vector func(string) []float32, tokens int) *mamba2Step {
	cc := op.ConvChannels()
	return &mamba2Step{conv: vector(op.Conv), convBias: vector(op.ConvBias), dtBias: vector(op.DtBias),
		a: vector(op.A), d: vector(op.D), norm: vector(op.Norm),
		win: make([]float32, (op.Width-1+tokens)*cc), xbc: make([]float32, tokens*cc)}
}

// mamba2 runs fusion.Mamba2Op over n rows at positions pos, pos+1, ... on
// layer c's state (its window, then the heads' matrices): the causal
// convolution of all n rows first (each row's convolution reads the rows
// before it, or the window), then the scan and the D skip per head over
// the rows in order (the heads split across pl's threads; nil: inline),
// each head's matrix carried from one row to the next, then the gated norm
// of each row. A step at 0 starts from the empty state; any other position
// must be where the state ends (it cannot roll back).
func mamba2(out, in []float32, op *fusion.Mamba2Op, m *mamba2Step, n, pos int, c *layerCache, pl *pool) error {
	ab := ssmAblation
	switch {
	case pos == 0 || ab.forget:
		clear(c.conv)
	case ab.forgetMatrices:
		clear(c.conv[(op.Width-1)*op.ConvChannels():])
	case pos != c.statePos:
		return fmt.Errorf("%w: a step at position %d on a recurrent state that holds position %d (states cannot roll back; restart the sequence at 0)", gpu.ErrStep, pos, c.statePos)
	}
	I, H, G, N, K := op.Inner, op.Heads, op.Groups, op.State, op.Width
	cc, k1, inCols := op.ConvChannels(), K-1, op.InCols()
	window, states := c.conv[:k1*cc], c.conv[k1*cc:]

	// The convolution over [x | B | C] with its bias, then SiLU.
	win := m.win[:(k1+n)*cc]
	copy(win, window)
	for t := range n {
		copy(win[(k1+t)*cc:(k1+t+1)*cc], in[t*inCols+I:])
	}
	for t := range n {
		xbc := m.xbc[t*cc : (t+1)*cc]
		for ch := range xbc {
			sum := m.convBias[ch]
			for j, wj := range m.conv[ch*K : (ch+1)*K] {
				if ab.shift {
					if t+j == 0 {
						continue
					}
					j--
				}
				sum += wj * win[(t+j)*cc+ch]
			}
			xbc[ch] = silu(sum)
		}
	}
	copy(window, win[n*cc:])

	// The scan: each head's matrix is its own, so the heads split across
	// the threads, each running its heads over every row in order.
	m.scan = scanTask{op: op, m: m, in: in, out: out, states: states, n: n}
	work := n * I * N * 2
	if pl != nil {
		pl.run(H, work, 1, &m.scan)
	} else {
		m.scan.run(0, 0, H)
	}
	m.scan = scanTask{}

	// The gate and the norm per group.
	gs := I / G
	for t := range n {
		row, y := in[t*inCols:(t+1)*inCols], out[t*I:(t+1)*I]
		if !ab.noGate {
			for i, zi := range row[:I] {
				y[i] *= silu(zi)
			}
		}
		for g := range G {
			seg := y[g*gs : (g+1)*gs]
			rmsNorm(seg, seg, gs, 1, m.norm[g*gs:], op.Eps)
		}
	}
	c.statePos = pos + n
	return nil
}

// scanTask runs the selective scan and the D skip of heads [lo, hi) over
// a step's n rows (fusion.Mamba2Op, steps 2 and 3): y_h of each row into
// out, before the gate.
type scanTask struct {
	op      *fusion.Mamba2Op
	m       *mamba2Step
	in, out []float32
	states  []float32
	n       int
}

func (s *scanTask) run(_, lo, hi int) {
	op, m := s.op, s.m
	I, H, G, N := op.Inner, op.Heads, op.Groups, op.State
	cc, inCols, P, gn := op.ConvChannels(), op.InCols(), I/H, G*N
	noSkip := ssmAblation.noSkip
	for h := lo; h < hi; h++ {
		g := h / (H / G)
		d := m.d[h]
		if noSkip {
			d = 0
		}
		hs := s.states[h*P*N : (h+1)*P*N]
		for t := range s.n {
			xbc, y := m.xbc[t*cc:(t+1)*cc], s.out[t*I:(t+1)*I]
			delta := softplus(s.in[t*inCols+I+cc+h] + m.dtBias[h])
			decay := float32(math.Exp(float64(delta * m.a[h])))
			x := xbc[h*P : (h+1)*P]
			bg, cg := xbc[I+g*N:I+(g+1)*N], xbc[I+gn+g*N:I+gn+(g+1)*N]
			for p, xp := range x {
				st := hs[p*N : (p+1)*N]
				decayAxpy(st, decay, delta*xp, bg)
				y[h*P+p] = simd.DotF32(st, cg) + d*xp
			}
		}
	}
}

// decayAxpy sets s = a·s + b·v, the state row's update (len(v) >= len(s)).
func decayAxpy(s []float32, a, b float32, v []float32) {
	v = v[:len(s)]
	i := 0
	for ; i+4 <= len(s); i += 4 {
		s0, s1, s2, s3 := s[i]*a+b*v[i], s[i+1]*a+b*v[i+1], s[i+2]*a+b*v[i+2], s[i+3]*a+b*v[i+3]
		s[i], s[i+1], s[i+2], s[i+3] = s0, s1, s2, s3
	}
	for ; i < len(s); i++ {
		s[i] = s[i]*a + b*v[i]
	}
}

// softplus is ln(1+e^x), x itself past 20 (as ggml's ssm_scan).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// ssmAblation breaks mamba2 on purpose, for the tests that show each
// convention matters (export_test.go): forget starts every step from the
// empty state, forgetMatrices from empty matrices (the window carried),
// shift reads the convolution window one position late,
// noSkip drops D·x and noGate the SiLU(z) gate. The zero value, always
// outside tests, is none.
var ssmAblation struct{ forget, forgetMatrices, shift, noSkip, noGate bool }

// runMamba2 runs op for the step's rows: a plain graph's n rows on the
// program's cache, or each row of a batched one on its own sequence's
// state at its own position.
func (p *program) runMamba2(s *step, op *fusion.Mamba2Op, out, in []float32, n, pos int) error {
	if !p.graph.Batch {
		return mamba2(out, in, op, s.ssm, n, pos, &p.kv.layers[op.Layer], p.pool)
	}
	ic, oc := op.InCols(), op.Inner
	for t := range n {
		if err := mamba2(out[t*oc:(t+1)*oc], in[t*ic:(t+1)*ic], op, s.ssm, 1, p.rowPos[t], &p.rowSeq[t].layers[op.Layer], p.pool); err != nil {
			return fmt.Errorf("row %d: %w", t, err)
		}
	}
	return nil
}
