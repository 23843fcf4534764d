package fusion

// HalfActivations applies the f16 activation policy to g: it marks F16
// every buffer holding an intermediate activation, the values passed from
// one op to the next inside a layer, and leaves f32:
//   - the residual stream: buffers an Embed, an Add or an accumulating
//     MatMul writes (as llama.cpp does; MediaPipe keeps it in the policy
//     type). Summing dozens of layer outputs into a half would lose the
//     low bits of every one of them, and the stream is one row per token,
//     a small share of the bytes a step moves;
//   - the logits and whatever SoftCap, Argmax or Sample reads, and the ids
//     Argmax and Sample write (not exact in a half past 2048);
//   - a LastRow output whose input is f32 (a copy keeps its type).
//
// Run it on the graph a backend compiles, after fusion.Fuse: the rounding
// points are the outputs of the ops that graph has.
func HalfActivations(g *Graph) {
	keep := make([]bool, len(g.Bufs))
	mark := func(bs ...Buf) {
		for _, b := range bs {
			if g.valid(b) {
				keep[b] = true
			}
		}
	}
	mark(g.Logits)
	for _, op := range g.Ops {
		switch o := op.(type) {
		case *EmbedOp, *AddOp:
			mark(op.Outputs()...)
		case *MatMulOp:
			if o.Accumulate {
				mark(o.Out)
			}
		case *SoftCapOp, *ArgmaxOp, *SampleOp:
			mark(op.Inputs()...)
			mark(op.Outputs()...)
		}
	}
	// A LastRow copies: its output takes its input's type.
	for _, op := range g.Ops {
		if o, ok := op.(*LastRowOp); ok && g.valid(o.In) && keep[o.In] {
			mark(o.Out)
		}
	}
	for i := range g.Bufs {
		g.Bufs[i].F16 = !keep[i]
	}
}

// HasHalfActivations reports whether any buffer of g is F16.
func (g *Graph) HasHalfActivations() bool {
	for _, b := range g.Bufs {
		if b.F16 {
			return true
		}
	}
	return false
}
