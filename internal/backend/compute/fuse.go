package compute

import (
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// FusionSupport tells the fusion pass which fused ops the planner runs
// whole for weights w (gpu.Fuse). The planner asks the same question of
// every op it plans and compiles only what its kernels run whole: a fused
// op this refuses (in a graph fused without asking, fusion.Fuse) is
// gpu.ErrUnsupported at Compile, never split back into its parts.
func (b *backend) FusionSupport(w gpu.Weights) fusion.Support {
	ws, _ := w.(*weights)
	return fusionSupport{b: b, ws: ws}
}

type fusionSupport struct {
	b  *backend
	ws *weights
}

// Fuses implements fusion.Support. Ops naming weights it does not hold are
// taken (Compile reports them).
func (s fusionSupport) Fuses(g *fusion.Graph, op fusion.Op) bool {
	if s.ws == nil {
		return true
	}
	w := func(name string) *weight { return s.ws.byName[name] }
	switch op := op.(type) {
	case *fusion.MatMulOp:
		return op.Prologue == nil || w(op.Weight) == nil || prologueWhole(g, op.In, op.Bias == "", w(op.Weight))
	case *fusion.MultiMatMulOp:
		if op.Prologue == nil {
			return true
		}
		noBias := true
		var ws []*weight
		for _, p := range op.Outs {
			if w(p.Weight) == nil {
				return true
			}
			noBias = noBias && p.Bias == ""
			ws = append(ws, w(p.Weight))
		}
		return prologueWhole(g, op.In, noBias, ws...)
	case *fusion.MatMulGLUOp:
		gw, uw := w(op.Gate.Weight), w(op.Up.Weight)
		if gw == nil || uw == nil {
			return true
		}
		if !gluWhole(gw, uw, op.Gate.Bias, op.Up.Bias) {
			return false
		}
		return op.Prologue == nil || prologueWhole(g, op.In, op.Gate.Bias == "" && op.Up.Bias == "", gw, uw)
	case *fusion.MatMulRopeKVOp:
		wq, wk, wv := w(op.Q.Weight), w(op.K.Weight), w(op.V.Weight)
		if wq == nil || wk == nil || wv == nil {
			return true
		}
		return ropeKVWhole(s.b.caps, g, op, wq, wk, wv)
	}
	return true
}

// prologueWhole reports whether the decode kernels run an RMS-norm
// prologue on products of input in with weights ws (noBias: none of them
// has a bias): a decode step (at most 3 rows of an unbatched step, or a
// batched one); weights of the matmul family whose rows and scale blocks
// hold whole chunks (the norm kernels have no element-wise path).
func prologueWhole(g *fusion.Graph, in fusion.Buf, noBias bool, ws ...*weight) bool {
	bi := g.Bufs[in]
	ok := (bi.Rows < 4 || g.Batch) && noBias
	for _, w := range ws {
		ce := matVariant(w, false).ChunkElems()
		ok = ok && w.qt == shaders.BlockNone && bi.Cols%ce == 0 && w.block%ce == 0
	}
	return ok
}

// gluWhole reports whether one matmul-family dispatch per row block runs
// a MatMulGLU: gate and up weights of one layout (type, scales, row
// blocks), not of llama.cpp's block types, and at most one bias (the
// kernel binds one).
func gluWhole(gw, uw *weight, gateBias, upBias string) bool {
	return sameLayout(gw, uw) && !(gateBias != "" && upBias != "") && gw.qt == shaders.BlockNone
}

// ropeKVWhole reports whether lanes_rope_kv runs a MatMulRopeKV: a decode
// step of at most 3 rows, the three weights of one matmul-family layout in
// one chunk each, no biases, rows and blocks of whole chunks, even head
// dims, rope frequencies that fit its table; for the halves rope with an
// f16 cache, head and rope dims multiples of 4; a device with the
// kernel's 9 storage buffers per stage (browsers have 10); a float cache
// (qkv.wgsl stores element pairs: a quantized cache's rows are stored by
// RopeStoreKV).
func ropeKVWhole(c caps, g *fusion.Graph, op *fusion.MatMulRopeKVOp, wq, wk, wv *weight) bool {
	if g.KV.Quantized() {
		return false
	}
	in := g.Bufs[op.In]
	ce := matVariant(wq, false).ChunkElems()
	// qkv.wgsl has no cos/sin scale: a scaled rope stays unfused.
	ok := in.Rows < 4 && (op.Scale == 0 || op.Scale == 1) && op.Q.Bias == "" && op.K.Bias == "" && op.V.Bias == "" && wq.qt == shaders.BlockNone && len(wq.chunks) == 1 &&
		sameType(wq, wk) && sameType(wq, wv) && len(wk.chunks) == 1 && len(wv.chunks) == 1 &&
		in.Cols%ce == 0 && wq.block%ce == 0 &&
		op.HeadDim%2 == 0 && op.Dims/2 <= shaders.RopeQKVFreqs && ropeKVFits(c)
	if g.KV.F16 && op.Style == fusion.RopeHalves {
		ok = ok && op.HeadDim%4 == 0 && op.Dims%4 == 0
	}
	return ok
}

// ropeKVSpec is lanes_rope_kv's spec (its bindings are the same for every
// weight layout).
var ropeKVSpec = sync.OnceValues(func() (shaders.KernelSpec, error) {
	return shaders.GetVariant(shaders.RopeKV, shaders.MatMulVariant{}.RopeKVVariant())
})

// ropeKVFits reports whether lanes_rope_kv's bindings fit the device's
// storage buffers per stage.
func ropeKVFits(c caps) bool {
	spec, err := ropeKVSpec()
	return err == nil && gpu.CheckBindingLimits(gpu.Caps{MaxStorageBuffers: c.storageBuffers}, spec) == nil
}
