package compute

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// attentionOp plans the attention family: Rope, StoreKV, their fused
// RopeStoreKV and MatMulRopeKV, and Attention.
func (pl *planner) attentionOp(op fusion.Op) error {
	g := pl.p.g
	switch op := op.(type) {
	case *fusion.RopeOp:
		out := g.Bufs[op.Out]
		if op.In != op.Out {
			pl.copyBuf(pl.p.bufs[op.Out], pl.p.bufs[op.In], pl.bytes(op.In))
		}
		if op.Dims == 0 {
			return nil
		}
		half := op.Dims / 2
		fb, style, err := pl.ropeFreq(op.RopeParams)
		if err != nil {
			return err
		}
		kRope.dispatch(pl, shaders.RopeParams{Heads: u(op.Heads), HeadDim: u(op.HeadDim), RopeDims: u(op.Dims), Style: style, Cols: u(out.Cols), PosAt: u(pl.p.posAt), OutF16: b2u(out.F16), Scale: ropeScale(op.RopeParams)},
			ceilDiv(op.Heads*half, 64), g.Tokens, 1, ropeBindings{Step: pl.stepB(), Freq: gpu.Binding{Buf: fb}, XW: pl.buf(op.Out)})
		return nil
	case *fusion.StoreKVOp:
		pl.storeKV(op)
		return nil
	case *fusion.RopeStoreKVOp:
		return pl.ropeStoreKV(op)
	case *fusion.MatMulRopeKVOp:
		return pl.matMulRopeKV(op)
	case *fusion.AttentionOp:
		return pl.attention(op)
	}
	return unsupportedOp(op)
}

// storeKV plans a StoreKV. A batched step stores each row into its own
// sequence's cache: one dispatch per row, binding that sequence's cache.
func (pl *planner) storeKV(op *fusion.StoreKVOp) {
	g := pl.p.g
	kvCols := op.KVHeads * op.HeadDim
	spec := pl.caches[0].spec
	rows := g.Tokens
	if g.Batch {
		rows = 1
	}
	for r, c := range pl.caches {
		params := shaders.KVParams{KVCols: u(kvCols), HeadDim: u(op.HeadDim), MaxLen: u(spec.MaxLen), PosAt: u(pl.p.posAt),
			Ring: u(spec.RingLen(op.Layer)), KF16: pl.h(pl.buf(op.K)), VF16: pl.h(pl.buf(op.V)), KVQuant: kvQuant(spec, op.Layer)}
		if g.Batch {
			params.Row0 = u(r)
		}
		storeKernel(spec).dispatch(pl, params, ceilDiv(op.KVHeads*kvWords(spec, op.Layer), 64), rows, 1, kvBindings{Step: pl.stepB(),
			KW: pl.buf(op.K), VW: pl.buf(op.V), Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}})
	}
}

// ropeFreq makes the frequency table of a Rope or RopeStoreKV op
// (RopeParams.Freq, in float64 on the host) and returns its style code.
func (pl *planner) ropeFreq(r fusion.RopeParams) (gpu.Buffer, shaders.RopeStyle, error) {
	freq := make([]float32, max(r.Dims/2, 1))
	for i := range r.Dims / 2 {
		freq[i] = float32(r.Freq(i))
	}
	fb, err := pl.p.b.newFilled(f32Bytes(freq))
	if err != nil {
		return nil, 0, err
	}
	pl.p.owned = append(pl.p.owned, fb)
	return fb, ropeStyle(r.Style), nil
}

// ropeStyle is the kernels' code of a rope style.
func ropeStyle(s fusion.RopeStyle) shaders.RopeStyle {
	if s == fusion.RopeHalves {
		return shaders.RopeHalves
	}
	return shaders.RopePairs
}

// ropeScale is the cos/sin multiplier of r for the rope kernels.
func ropeScale(r fusion.RopeParams) float32 {
	if r.Scale == 0 {
		return 1
	}
	return r.Scale
}

// matMulRopeKV plans a MatMulRopeKV (validation made it unbatched): one
// lanes_rope_kv dispatch (FusionSupport took the op only where the kernel
// runs it: ropeKVWhole).
func (pl *planner) matMulRopeKV(op *fusion.MatMulRopeKVOp) error {
	g := pl.p.g
	in, out := g.Bufs[op.In], g.Bufs[op.Out]
	c := pl.caches[0]
	wq, wk, wv := pl.ws.byName[op.Q.Weight], pl.ws.byName[op.K.Weight], pl.ws.byName[op.V.Weight]
	v := matVariant(wq, false)
	ce := v.ChunkElems()
	x := pl.buf(op.In)
	gs := gpu.Binding{Buf: pl.dummy} // the norm scale, at the bias slot
	hasNorm := uint32(0)
	var eps float32
	if op.Prologue != nil {
		scale, _, err := pl.vector(op.Prologue.Weight)
		if err != nil {
			return err
		}
		gs, hasNorm, eps = scale, 1, op.Prologue.Eps
	}
	// Work units (2 rope pairs per lane group) per segment, padded to
	// whole workgroups.
	wg := v.Shape().LanesWG
	lanes := laneCount(in.Cols/ce, wg) // as the unfused products' (matDispatch)
	perUnit, perWG := 2, wg/lanes
	hp := op.HeadDim / 2
	units := func(heads int) int { return ceilDiv(ceilDiv(heads*hp, perUnit), perWG) * perWG }
	kFirst := units(op.Heads)
	vFirst := kFirst + units(op.KVHeads)
	total := vFirst + units(op.KVHeads)
	style := ropeStyle(op.Style)
	rq := shaders.RopeQKV{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim), RopeDims: u(op.Dims), Style: style,
		MaxLen: u(c.spec.MaxLen), KVF16: b2u(c.spec.F16), KFirst: u(kFirst), VFirst: u(vFirst), HasNorm: hasNorm, Ring: u(c.spec.RingLen(op.Layer))}
	for i := range op.Dims / 2 {
		rq.SetFreq(i, float32(op.Freq(i)))
	}
	// Quantized weights: each weight's scales follow its rows in its one
	// buffer, at word sOff/4 of its binding (bound whole).
	if wq.quant {
		rq.SOffQ, rq.SOffK, rq.SOffV = u(int(wq.chunks[0].sOff/4)), u(int(wk.chunks[0].sOff/4)), u(int(wv.chunks[0].sOff/4))
	}
	rb, err := rq.Bytes()
	if err != nil {
		return err
	}
	rbuf, err := pl.p.b.newFilled(rb)
	if err != nil {
		return err
	}
	pl.p.owned = append(pl.p.owned, rbuf)
	params := shaders.MatParams{InCols: u(in.Cols), OutCols: u(out.Cols), Rows: u(wq.rows), Block: u(wq.block), NBlocks: u(wq.nblk),
		NRows: u(in.Rows), Lanes: u(lanes), NormEps: eps, OutF16: b2u(out.F16), XF16: pl.h(x)}
	bind := qkvBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: wq.chunks[0].w}, Bias: gs, OutW: pl.buf(op.Out),
		W2: gpu.Binding{Buf: wk.chunks[0].w}, Wv: gpu.Binding{Buf: wv.chunks[0].w},
		Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}, Rq: gpu.Binding{Buf: rbuf, Size: shaders.RopeQKVBytes}}
	cost := matCost(wq, wq.rows+wk.rows+wv.rows, in.Cols, in.Rows, 1)
	k, kv := chooseRopeKVKernel(pl.p.b.caps, v)
	k.dispatchVariant(pl, kv.RopeKVVariant(), params, cost, total/perWG, in.Rows, 1, bind)
	return nil
}

// chooseRopeKVKernel is the fused Q/K/V kernel for weights of variant v:
// the lane groups' sums reduced through subgroup shuffles where the
// device has subgroups (as chooseMatKernel's matvec_sg), else in
// workgroup memory.
func chooseRopeKVKernel(c caps, v shaders.MatMulVariant) (contract[shaders.MatParams, qkvBindings], shaders.MatMulVariant) {
	if c.subgroups {
		v.Subgroups = true
		return kLanesRopeKvSg, v
	}
	return kLanesRopeKv, v
}

// ropeStoreKV plans a RopeStoreKV (validation made it unbatched): one
// dispatch rotating q in place and storing the rotated k and v.
func (pl *planner) ropeStoreKV(op *fusion.RopeStoreKVOp) error {
	fb, style, err := pl.ropeFreq(op.RopeParams)
	if err != nil {
		return err
	}
	q, kb, vb := pl.buf(op.Q), pl.buf(op.K), pl.buf(op.V)
	c := pl.caches[0]
	k, words := kStoreKvRope, op.HeadDim
	if c.spec.F16 {
		k, words = kStoreKvRopeF16, kvWords(c.spec, op.Layer)
	}
	if c.spec.Quantized() {
		k = kStoreKvRopeQ
	}
	n := op.Heads*(op.Dims/2) + op.KVHeads*words
	k.dispatch(pl, shaders.RopeKVParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim),
		RopeDims: u(op.Dims), Style: style, MaxLen: u(c.spec.MaxLen), OutF16: pl.h(q), KF16: pl.h(kb), VF16: pl.h(vb), Scale: ropeScale(op.RopeParams), Ring: u(c.spec.RingLen(op.Layer)),
		KVQuant: kvQuant(c.spec, op.Layer)},
		ceilDiv(n, 64), pl.p.g.Tokens, 1, ropekvBindings{Step: pl.stepB(), Freq: gpu.Binding{Buf: fb}, QW: q,
			KW: kb, VW: vb, Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}})
	return nil
}
