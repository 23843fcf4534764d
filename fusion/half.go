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
//   - a LastRow output whose input is f32 (a copy keeps its type);
//   - the rotated q a MatMulRopeKV writes: its kernels can write it as
//     halves (qkv.wgsl's out_set) and round once after the rope, as the
//     CPU reference does, but its split form (prefill, or shapes the
//     fused kernels do not take: the Q product into Out, then
//     store_kv_rope rotating it in place) would round it twice. q is
//     heads*head_dim values per token, a small share of a step's bytes.
//
// Every kernel reading or writing an activation has the f16 path (the
// per-binding flags, shaders/README.md), including qkv.wgsl (x through
// matmul's helpers) and attn_dec/attn_dec_combine (q from the uniform
// window qu, out), so nothing else is kept f32 for want of a kernel.
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
		case *MatMulRopeKVOp:
			mark(o.Out)
		case *MoEOp:
			mark(o.In, o.Out) // its products stay f32 from router to sum
		case *RowLoRAOp:
			mark(o.In, o.Out)
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
