package conformance

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/fusion"
)

// unfuse returns g with each op that refuse reports replaced by its parts:
// a MatMul, MultiMatMul or MatMulGLU with an RMS-norm prologue becomes an
// RMS Norm into a new f32 buffer that the products read; a MatMulGLU
// becomes its gate and up MatMuls into new f32 buffers and a GLU; a
// MatMulRopeKV becomes its q, k and v MatMuls and a RopeStoreKV. It is
// the graph a backend that refuses those fused ops gets from gpu.Fuse:
// RunCases runs it on the backend against the CPU reference's run of
// the fused graph. g is not changed.
func unfuse(g *fusion.Graph, refuse func(fusion.Op) bool) *fusion.Graph {
	u := *g
	u.Bufs = slices.Clone(g.Bufs)
	u.Ops = nil
	tmp := func(name string, rows, cols int) fusion.Buf {
		return u.NewBuf(fmt.Sprintf("unfused_%s_%d", name, len(u.Bufs)), rows, cols)
	}
	// normed plans an op's prologue as a Norm and returns what its
	// products read.
	normed := func(in fusion.Buf, pro *fusion.RMSPrologue) fusion.Buf {
		if pro == nil {
			return in
		}
		bi := u.Bufs[in]
		n := tmp("normed", bi.Rows, bi.Cols)
		u.Ops = append(u.Ops, &fusion.NormOp{Out: n, In: in, Norm: fusion.NormRMS, Weight: pro.Weight, Eps: pro.Eps})
		return n
	}
	for _, op := range g.Ops {
		if !refuse(op) {
			u.Ops = append(u.Ops, fusion.Clone(op))
			continue
		}
		switch op := op.(type) {
		case *fusion.MatMulOp:
			u.Ops = append(u.Ops, &fusion.MatMulOp{Out: op.Out, In: normed(op.In, op.Prologue), Projection: op.Projection, Accumulate: op.Accumulate})
		case *fusion.MultiMatMulOp:
			x := normed(op.In, op.Prologue)
			for _, p := range op.Outs {
				u.Ops = append(u.Ops, &fusion.MatMulOp{Out: p.Out, In: x, Projection: p.Projection})
			}
		case *fusion.MatMulGLUOp:
			x := normed(op.In, op.Prologue)
			out := u.Bufs[op.Out]
			gate, up := tmp("gate", out.Rows, out.Cols), tmp("up", out.Rows, out.Cols)
			u.Ops = append(u.Ops, &fusion.MatMulOp{Out: gate, In: x, Projection: op.Gate}, &fusion.MatMulOp{Out: up, In: x, Projection: op.Up},
				&fusion.GLUOp{Out: op.Out, Gate: gate, Up: up, Act: op.Act})
		case *fusion.MatMulRopeKVOp:
			x := normed(op.In, op.Prologue)
			rows := u.Bufs[op.In].Rows
			k, v := tmp("k", rows, op.KVHeads*op.HeadDim), tmp("v", rows, op.KVHeads*op.HeadDim)
			u.Ops = append(u.Ops, &fusion.MatMulOp{Out: op.Out, In: x, Projection: op.Q}, &fusion.MatMulOp{Out: k, In: x, Projection: op.K},
				&fusion.MatMulOp{Out: v, In: x, Projection: op.V},
				&fusion.RopeStoreKVOp{Q: op.Out, K: k, V: v, Layer: op.Layer, HeadShape: op.HeadShape, RopeParams: op.RopeParams})
		default:
			panic(fmt.Sprintf("conformance: a backend refuses %s, which has no parts", op.Kind()))
		}
	}
	return &u
}
