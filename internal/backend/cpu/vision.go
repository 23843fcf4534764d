package cpu

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// selfAttn is one fusion.SelfAttnOp step: every row attends to
// every row (a vision encoder's patches), per head, the scores scaled,
// softmax in f32 after subtracting the largest, the values summed in row
// order. Jobs are (row, head) pairs split across the threads; each thread
// keeps its scores in its scratch.
type selfAttn struct {
	p      *program
	out, q []float32
	k, v   []float32
	n      int
	op     *fusion.SelfAttnOp
}

func (a *selfAttn) run(wk, lo, hi int) {
	op := a.op
	hd, qc, kc := op.HeadDim, op.Heads*op.HeadDim, op.KVHeads*op.HeadDim
	group := op.Heads / op.KVHeads
	scores := a.p.scratch[wk].scores[:a.n]
	for job := lo; job < hi; job++ {
		t, h := job/op.Heads, job%op.Heads
		qh := a.q[t*qc+h*hd : t*qc+(h+1)*hd]
		ko := (h / group) * hd
		m := float32(math.Inf(-1))
		for s := range a.n {
			// A plain sum in index order: it lands nearer llama.cpp's
			// logits on the vision set (3e-6) than simd.DotF32's (4e-5).
			kh := a.k[s*kc+ko : s*kc+ko+hd]
			var dot float32
			for i, x := range qh {
				dot += x * kh[i]
			}
			scores[s] = dot * op.Scale
			m = max(m, scores[s])
		}
		var sum float32
		for s := range a.n {
			scores[s] = float32(math.Exp(float64(scores[s] - m)))
			sum += scores[s]
		}
		o := a.out[t*qc+h*hd : t*qc+(h+1)*hd]
		clear(o)
		for s := range a.n {
			w := scores[s] / sum
			vh := a.v[s*kc+ko : s*kc+ko+hd]
			for i, x := range vh {
				o[i] += w * x
			}
		}
	}
}

// selfAttention runs a fusion.SelfAttnOp over the step's n rows.
func (p *program) selfAttention(out, q, k, v []float32, n int, op *fusion.SelfAttnOp) {
	a := &selfAttn{p: p, out: out, q: q, k: k, v: v, n: n, op: op}
	p.pool.run(n*op.Heads, n*n*op.Heads*op.HeadDim*2, 1, a)
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
