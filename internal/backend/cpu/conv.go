package cpu

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// shortConv runs fusion.ShortConvOp over n rows at positions pos, pos+1,
// ... on layer c's state: in holds the rows [B | C | x] (3*ch values),
// out gets ch values per row, w is the kernel [ch][width] and win a
// scratch of (width-1+n)*ch values: the state's window followed by the
// rows' inputs u = B⊙x, so that row t's convolution reads win rows t ..
// t+width-1 in kernel order. The state then holds the last width-1 rows
// of win. A step at 0 starts from the empty state; any other position must
// be where the state ends (it cannot roll back).
func shortConv(out, in, w, win []float32, ch, width, n, pos int, c *layerCache) error {
	k1 := width - 1
	ab := convAblation
	switch {
	case pos == 0 || ab.forget:
		clear(c.conv)
	case pos != c.statePos:
		return fmt.Errorf("%w: a step at position %d on a recurrent state that holds position %d (states cannot roll back; restart the sequence at 0)", gpu.ErrStep, pos, c.statePos)
	}
	win = win[:(k1+n)*ch]
	copy(win, c.conv)
	for t := range n {
		row, u := in[3*t*ch:3*(t+1)*ch], win[(k1+t)*ch:(k1+t+1)*ch]
		b, x := row[:ch], row[2*ch:]
		for i := range u {
			u[i] = b[i] * x[i]
		}
		if ab.noInputGate {
			copy(u, x)
		}
	}
	for t := range n {
		gate, o := in[3*t*ch+ch:3*t*ch+2*ch], out[t*ch:(t+1)*ch]
		for i := range o {
			var sum float32
			for j, wj := range w[i*width : (i+1)*width] {
				if ab.shift {
					if t+j == 0 {
						continue
					}
					j--
				}
				sum += wj * win[(t+j)*ch+i]
			}
			o[i] = gate[i] * sum
			if ab.noOutputGate {
				o[i] = sum
			}
		}
	}
	copy(c.conv, win[n*ch:])
	c.statePos = pos + n
	return nil
}

// convAblation breaks shortConv on purpose, for the tests that show each
// convention matters (export_test.go): forget starts every step from the
// empty state, shift reads the window one position late (every tap one
// token older), noInputGate convolves x rather than B⊙x and noOutputGate
// drops the C gate. The zero value, always outside tests, is none.
var convAblation struct{ forget, shift, noInputGate, noOutputGate bool }

// shortConvStep runs op for the step's rows: a plain graph's n rows on the
// program's cache, or each row of a batched one on its own sequence's
// state at its own position.
func (p *program) shortConvStep(s *step, op *fusion.ShortConvOp, out, in []float32, n, pos int) error {
	w := s.vec
	if !p.graph.Batch {
		return shortConv(out, in, w, s.kbuf, op.Channels, op.Width, n, pos, &p.kv.layers[op.Layer])
	}
	ch := op.Channels
	for t := range n {
		if err := shortConv(out[t*ch:(t+1)*ch], in[3*t*ch:3*(t+1)*ch], w, s.kbuf, ch, op.Width, 1, p.rowPos[t], &p.rowSeq[t].layers[op.Layer]); err != nil {
			return fmt.Errorf("row %d: %w", t, err)
		}
	}
	return nil
}
