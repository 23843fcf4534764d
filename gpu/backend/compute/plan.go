package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/sampler"
	"github.com/gpurun/gpurun/shaders"
)

// item is one recorded command: a dispatch (kernel set) or a copy.
type item struct {
	op       int             // index of the graph op the item belongs to
	kernel   string          // entry point, from a contract (kernels_gen.go)
	variant  shaders.Variant // of a specialized kernel
	params   shaders.Params
	bindings []gpu.Binding // after the params binding
	x, y, z  int
	cost     cost // work of the dispatch, for profiles

	copyDst, copySrc gpu.Buffer
	copySize         int64
}

// planner turns ops into items, then records them with one params buffer
// holding every dispatch's parameters, written once.
type planner struct {
	p        *program
	ws       *weights
	caches   []*kvCache // the program's cache, or a batched step's caches by sequence
	dummy    gpu.Buffer // bound where a kernel's optional input is absent
	scratch  gpu.Buffer // holds an input that aliases the output
	gate     gpu.Buffer // MatMulGLU's gate when its kernel cannot be used, made on demand
	gateSize int64
	sink     gpu.Buffer // bound at writable slots a kernel leaves unused
	part     gpu.Buffer // attn_split's partials, shared by every layer
	partSize int64
	items    []item
	cur      int // op being planned
	// pro is the norm prologue of the op being planned, when its matrix
	// products run it in their kernels (the decode kernels); nil otherwise.
	pro     *prologue
	normed  gpu.Buffer // the norm output of an op whose kernels cannot run its prologue, made on demand
	normLen int64
	// half tells the buffers holding f16 activations (packed binary16
	// pairs) from f32 ones: the graph's buffers per fusion.BufInfo.F16,
	// the scratch buffer as what was last copied or computed into it.
	half map[gpu.Buffer]bool
	// kvTmp holds k and v of a MatMulRopeKV planned as its parts, made on demand.
	kvTmp    [2]gpu.Buffer
	kvTmpLen int64
	moeB     moeBufs // the MoE ops' buffers (moe.go)
	// loraT holds the RowLoRA ops' A·x rows (rowlora.go), made on demand.
	loraT    gpu.Buffer
	loraTLen int64
}

// h is the f16 flag of a kernel's activation binding: 1 when b's buffer
// holds packed halves.
func (pl *planner) h(b gpu.Binding) uint32 { return b2u(pl.half[b.Buf]) }

// prologue is a MatMul kind's RMS-norm prologue, run by matvec_lanes_norm
// and lanes_rope_kv (matmul.wgsl, qkv.wgsl).
type prologue struct {
	scale gpu.Binding // the scale, bound at the kernel's bias slot
	eps   float32
}

func u(v int) uint32 { return uint32(v) }
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (pl *planner) copyBuf(dst, src gpu.Buffer, size int64) {
	pl.items = append(pl.items, item{op: pl.cur, copyDst: dst, copySrc: src, copySize: align4(size)})
}

func (pl *planner) buf(b fusion.Buf) gpu.Binding { return gpu.Binding{Buf: pl.p.bufs[b]} }

// stepB binds the step buffer.
func (pl *planner) stepB() gpu.Binding { return gpu.Binding{Buf: pl.p.step} }

// none binds the dummy buffer, at a read slot a dispatch leaves unused.
func (pl *planner) none() gpu.Binding { return gpu.Binding{Buf: pl.dummy} }

func (pl *planner) bytes(b fusion.Buf) int64 { return actBytes(pl.p.g.Bufs[b]) }

// input binds input buffer in of an op writing out, through the scratch
// buffer when it is also the op's output (a buffer bound writable may not
// be bound twice).
func (pl *planner) input(out, in fusion.Buf, copied *bool) gpu.Binding {
	if in != out {
		return pl.buf(in)
	}
	if !*copied {
		pl.copyBuf(pl.scratch, pl.p.bufs[in], pl.bytes(in))
		pl.half[pl.scratch] = pl.p.g.Bufs[in].F16
		*copied = true
	}
	return gpu.Binding{Buf: pl.scratch}
}

func (pl *planner) vector(name string) (gpu.Binding, bool, error) {
	if name == "" {
		return gpu.Binding{Buf: pl.dummy}, false, nil
	}
	w, ok := pl.ws.byName[name]
	if !ok || w.rows != 1 || len(w.chunks) != 1 {
		return gpu.Binding{}, false, fmt.Errorf("vector %q not loaded as a vector", name)
	}
	return gpu.Binding{Buf: w.chunks[0].w}, true, nil
}

func (pl *planner) op(op fusion.Op) error {
	g := pl.p.g
	T := g.Tokens
	var out fusion.BufInfo
	if outs := op.Outputs(); len(outs) > 0 {
		out = g.Bufs[outs[0]]
	}
	copied := false
	switch op := op.(type) {
	case *fusion.EmbedOp:
		w := pl.ws.byName[op.Weight]
		scale := op.Scale
		if scale == 0 {
			scale = 1
		}
		if pl.p.vocab == 0 || w.rows < pl.p.vocab {
			pl.p.vocab = w.rows
		}
		if w.qt != shaders.BlockNone {
			pl.qEmbed(w, out, pl.buf(op.Out), op.Scale, T)
			break
		}
		for _, c := range w.chunks {
			block := 0
			s := pl.dummy
			if w.quant {
				block, s = w.block, c.s
			}
			kEmbed.dispatch(pl, shaders.EmbedParams{Cols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), WT: uint32(w.wt), ST: uint32(w.st),
				Block: u(block), NBlocks: u(w.nblk), Scale: scale, OutF16: b2u(out.F16)},
				ceilDiv(out.Cols, 64), T, 1,
				embedBindings{Step: pl.stepB(), W: gpu.Binding{Buf: c.w}, S: gpu.Binding{Buf: s}, OutW: pl.buf(op.Out)})
		}
	case *fusion.NormOp:
		if op.Unit {
			return fmt.Errorf("norm without a weight (unit): %w", gpu.ErrUnsupported)
		}
		w, _, err := pl.vector(op.Weight)
		if err != nil {
			return err
		}
		bias, hasBias, err := pl.vector(op.Bias)
		if err != nil {
			return err
		}
		x := pl.input(op.Out, op.In, &copied)
		// A per-head norm runs on the same memory as rows of one head.
		cols, heads := out.Cols, 1
		if op.HeadDim > 0 {
			cols, heads = op.HeadDim, out.Cols/op.HeadDim
		}
		kNorm.dispatch(pl, shaders.NormParams{Cols: u(cols), Layer: b2u(op.Norm == fusion.NormLayer), Eps: op.Eps, HasBias: b2u(hasBias),
			NRows: u(out.Rows * heads), OutF16: b2u(out.F16), XF16: pl.h(x), Heads: u(heads)},
			out.Rows*heads, 1, 1, normBindings{Step: pl.stepB(), XW: x, W: w, Bias: bias, OutW: pl.buf(op.Out)})
	case *fusion.MatMulOp:
		x := pl.input(op.Out, op.In, &copied)
		if op.Prologue != nil {
			var err error
			if x, err = pl.normPrologue(op.In, op.Prologue, []string{op.Weight}, op.Bias == ""); err != nil {
				return err
			}
			defer func() { pl.pro = nil }()
		}
		return pl.matMul(pl.ws.byName[op.Weight], op.Bias, x, g.Bufs[op.In].Cols, pl.buf(op.Out), out, op.Accumulate)
	case *fusion.MultiMatMulOp:
		x := pl.buf(op.In)
		if op.Prologue != nil {
			var ws []string
			noBias := true
			for _, p := range op.Outs {
				ws = append(ws, p.Weight)
				noBias = noBias && p.Bias == ""
			}
			var err error
			if x, err = pl.normPrologue(op.In, op.Prologue, ws, noBias); err != nil {
				return err
			}
			defer func() { pl.pro = nil }()
		}
		// One dispatch per projection: a kernel writing all of them would
		// bind more storage buffers than WebGPU's default limit of 8.
		for _, p := range op.Outs {
			if err := pl.matMul(pl.ws.byName[p.Weight], p.Bias, x, g.Bufs[op.In].Cols, pl.buf(p.Out), g.Bufs[p.Out], false); err != nil {
				return err
			}
		}
	case *fusion.MatMulGLUOp:
		x := pl.buf(op.In)
		if op.Prologue != nil {
			fits := op.Gate.Bias == "" && op.Up.Bias == "" && sameLayout(pl.ws.byName[op.Gate.Weight], pl.ws.byName[op.Up.Weight])
			var err error
			if x, err = pl.normPrologue(op.In, op.Prologue, []string{op.Gate.Weight, op.Up.Weight}, fits); err != nil {
				return err
			}
			defer func() { pl.pro = nil }()
		}
		return pl.matMulGLU(op, out, x)
	case *fusion.RopeOp:
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
			ceilDiv(op.Heads*half, 64), T, 1, ropeBindings{Step: pl.stepB(), Freq: gpu.Binding{Buf: fb}, XW: pl.buf(op.Out)})
	case *fusion.StoreKVOp:
		// A batched step stores each row into its own sequence's cache:
		// one dispatch per row, binding that sequence's cache.
		kvCols := op.KVHeads * op.HeadDim
		spec := pl.caches[0].spec
		rows := T
		if g.Batch {
			rows = 1
		}
		for r, c := range pl.caches {
			params := shaders.KVParams{KVCols: u(kvCols), HeadDim: u(op.HeadDim), MaxLen: u(spec.MaxLen), PosAt: u(pl.p.posAt),
				Ring: u(spec.RingLen(op.Layer)), KF16: pl.h(pl.buf(op.K)), VF16: pl.h(pl.buf(op.V))}
			if g.Batch {
				params.Row0 = u(r)
			}
			storeKernel(spec).dispatch(pl, params, ceilDiv(op.KVHeads*kvWords(spec), 64), rows, 1, kvBindings{Step: pl.stepB(),
				KW: pl.buf(op.K), VW: pl.buf(op.V), Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}})
		}
	case *fusion.RopeStoreKVOp:
		return pl.ropeStoreKV(op)
	case *fusion.MatMulRopeKVOp:
		return pl.matMulRopeKV(op)
	case *fusion.AttentionOp:
		return pl.attention(op)
	case *fusion.MoEOp:
		return pl.moe(op)
	case *fusion.RowLoRAOp:
		return pl.rowLoRA(op)
	case *fusion.AddOp:
		// A residual add into one of its inputs (addition commutes) runs
		// in place; out = out + out goes through the scratch copy.
		in0, in1 := op.A, op.B
		if in1 == op.Out {
			in0, in1 = in1, in0
		}
		if in0 == op.Out && in1 != op.Out {
			kAddInplace.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), NRows: u(out.Rows), OutF16: b2u(out.F16), BF16: pl.h(pl.buf(in1))},
				ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: pl.none(), BW: pl.buf(in1), OutW: pl.buf(op.Out)})
			return nil
		}
		a, b := pl.input(op.Out, op.A, &copied), pl.input(op.Out, op.B, &copied)
		kAdd.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), NRows: u(out.Rows), OutF16: b2u(out.F16), AF16: pl.h(a), BF16: pl.h(b)},
			ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: a, BW: b, OutW: pl.buf(op.Out)})
	case *fusion.GLUOp:
		return pl.elementwise(kGlu, op.Act, 0, op.Out, op.Gate, op.Up, out)
	case *fusion.ActivationOp:
		return pl.elementwise(kAct, op.Act, 0, op.Out, op.In, -1, out)
	case *fusion.SoftCapOp:
		return pl.elementwise(kSoftcap, 0, op.Cap, op.Out, op.In, -1, out)
	case *fusion.LastRowOp:
		if op.In == op.Out {
			return nil // validation allows this only for one-token graphs: the identity
		}
		kLastRow.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), NRows: 1, OutF16: b2u(out.F16), AF16: pl.h(pl.buf(op.In))}, ceilDiv(out.Cols, 64), 1, 1,
			elementwiseBindings{Step: pl.stepB(), AW: pl.buf(op.In), BW: pl.none(), OutW: pl.buf(op.Out)})
	case *fusion.ArgmaxOp:
		// One workgroup scans the row (validation made it one row that
		// Out does not alias) and writes the id as an f32; none when the
		// step has no rows (a no-op step after a stop id).
		mask, err := pl.tokenMask(g.Bufs[op.In].Cols)
		if err != nil {
			return err
		}
		kArgmax.dispatch(pl, shaders.ArgmaxParams{N: u(g.Bufs[op.In].Cols)}, 1, 1, 1, argmaxBindings{Step: pl.stepB(), X: pl.buf(op.In), Out: pl.buf(op.Out), Mask: mask})
	case *fusion.SampleOp:
		mask, err := pl.tokenMask(g.Bufs[op.In].Cols)
		if err != nil {
			return err
		}
		r := op.Sampling
		ruleAt := uint32(0)
		if stepTensor(g) {
			// The rule lives in the step tensor, where SetSampling
			// changes it.
			ruleAt = shaders.DecodeStepRuleAt
			pl.p.rule = &r
		}
		kSample.dispatch(pl, shaders.SampleParams{N: u(g.Bufs[op.In].Cols), InvTemperature: sampler.InvTemperature(r.Temperature),
			TopK: u(r.TopK), TopP: r.TopP, SeedLo: uint32(r.Seed), SeedHi: uint32(r.Seed >> 32), RuleAt: ruleAt},
			1, 1, 1, sampleBindings{Step: pl.stepB(), X: pl.buf(op.In), Out: pl.buf(op.Out), Mask: mask})
	default:
		return fmt.Errorf("op kind %s: %w", op.Kind(), gpu.ErrUnsupported)
	}
	return nil
}

// elementwise plans a GLU (act(a) * b), an Activation (act(a), b -1) or a
// SoftCap (act 0, cap > 0) into out.
func (pl *planner) elementwise(k contract[shaders.EltParams, elementwiseBindings], a fusion.Act, capv float32, o, in0, in1 fusion.Buf, out fusion.BufInfo) error {
	code := shaders.Activation(0)
	if a != 0 {
		var ok bool
		if code, ok = shaders.ActivationByName(a.String()); !ok {
			return fmt.Errorf("activation %s: %w", a, gpu.ErrUnsupported)
		}
	}
	copied := false
	x := pl.input(o, in0, &copied)
	y := pl.none()
	if in1 >= 0 {
		y = pl.input(o, in1, &copied)
	}
	k.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), Act: uint32(code), Cap: capv, NRows: u(out.Rows),
		OutF16: b2u(out.F16), AF16: pl.h(x), BF16: pl.h(y)},
		ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: x, BW: y, OutW: pl.buf(o)})
	return nil
}

// normPrologue plans the RMS-norm prologue pro of products of input in
// with weights ws and returns the binding the products read. Where the
// decode kernels take it (prologueWhole; fits says the caller's products
// have no bias and, for MatMulGLU, run whole), they run it (pl.pro, the
// scale bound at their bias slot) and read in; otherwise (a graph fused
// without FusionSupport) a norm dispatch writes the normed rows to a
// buffer of the planner's, which the products read.
func (pl *planner) normPrologue(inBuf fusion.Buf, pro *fusion.RMSPrologue, ws []string, fits bool) (gpu.Binding, error) {
	g := pl.p.g
	in := g.Bufs[inBuf]
	scale, _, err := pl.vector(pro.Weight)
	if err != nil {
		return gpu.Binding{}, err
	}
	var weights []*weight
	for _, name := range ws {
		weights = append(weights, pl.ws.byName[name])
	}
	if fits && prologueWhole(g, inBuf, true, weights...) {
		pl.pro = &prologue{scale: scale, eps: pro.Eps}
		return pl.buf(inBuf), nil
	}
	pl.p.splits++
	size := f32Bytes4(in) // the normed rows are f32, whatever the input
	if pl.normed == nil || pl.normLen < size {
		buf, err := pl.p.newBuf(size)
		if err != nil {
			return gpu.Binding{}, err
		}
		pl.normed, pl.normLen = buf, size
	}
	pl.half[pl.normed] = false
	kNorm.dispatch(pl, shaders.NormParams{Cols: u(in.Cols), Eps: pro.Eps, NRows: u(in.Rows), XF16: pl.h(pl.buf(inBuf)), Heads: 1},
		in.Rows, 1, 1, normBindings{Step: pl.stepB(), XW: pl.buf(inBuf), W: gpu.Binding{Buf: scale.Buf}, Bias: pl.none(), OutW: gpu.Binding{Buf: pl.normed}})
	return gpu.Binding{Buf: pl.normed}, nil
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
// lanes_rope_kv dispatch where the kernel takes it (ropeKVWhole), else
// (a graph fused without FusionSupport) the three products (norm prologue
// included) into buffers of the planner's and a store_kv_rope.
func (pl *planner) matMulRopeKV(op *fusion.MatMulRopeKVOp) error {
	g := pl.p.g
	in, out := g.Bufs[op.In], g.Bufs[op.Out]
	c := pl.caches[0]
	wq, wk, wv := pl.ws.byName[op.Q.Weight], pl.ws.byName[op.K.Weight], pl.ws.byName[op.V.Weight]
	v := matVariant(wq, false)
	ce := v.ChunkElems()
	if !ropeKVWhole(pl.p.b.caps, g, op, wq, wk, wv) {
		pl.p.splits++
		return pl.matMulRopeKVSplit(op)
	}
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
	lanes := 4
	for lanes < 64 && lanes*2 <= in.Cols/ce {
		lanes *= 2
	}
	perUnit, perWG := 2, 64/lanes
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
	rb, err := rq.Bytes()
	if err != nil {
		return err
	}
	rbuf, err := pl.p.b.newFilled(rb)
	if err != nil {
		return err
	}
	pl.p.owned = append(pl.p.owned, rbuf)
	sOf := func(w *weight) gpu.Binding {
		if w.quant {
			return gpu.Binding{Buf: w.chunks[0].s}
		}
		return gpu.Binding{Buf: pl.dummy}
	}
	params := shaders.MatParams{InCols: u(in.Cols), OutCols: u(out.Cols), Rows: u(wq.rows), Block: u(wq.block), NBlocks: u(wq.nblk),
		NRows: u(in.Rows), Lanes: u(lanes), NormEps: eps, OutF16: b2u(out.F16), XF16: pl.h(x)}
	bind := qkvBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: wq.chunks[0].w}, S: sOf(wq), Bias: gs, OutW: pl.buf(op.Out),
		W2: gpu.Binding{Buf: wk.chunks[0].w}, S2: sOf(wk), Wv: gpu.Binding{Buf: wv.chunks[0].w}, Sv: sOf(wv),
		Kc: gpu.Binding{Buf: c.k[op.Layer]}, Vc: gpu.Binding{Buf: c.v[op.Layer]}, Rq: gpu.Binding{Buf: rbuf, Size: shaders.RopeQKVBytes}}
	cost := matCost(wq, wq.rows+wk.rows+wv.rows, in.Cols, in.Rows, 1)
	kLanesRopeKv.dispatchVariant(pl, v.RopeKVVariant(), params, cost, total/perWG, in.Rows, 1, bind)
	return nil
}

// sameType reports whether two weights share type, scales and blocks.
func sameType(a, b *weight) bool {
	return a.wt == b.wt && a.qt == b.qt && a.st == b.st && a.quant == b.quant && a.block == b.block && a.nblk == b.nblk && a.cols == b.cols
}

// matMulRopeKVSplit plans a MatMulRopeKV as its parts: q into Out, k and
// v into buffers of the planner's, then one store_kv_rope.
func (pl *planner) matMulRopeKVSplit(op *fusion.MatMulRopeKVOp) error {
	g := pl.p.g
	in := g.Bufs[op.In]
	kv := fusion.BufInfo{Rows: in.Rows, Cols: op.KVHeads * op.HeadDim}
	size := int64(kv.Rows) * int64(kv.Cols) * 4
	if pl.kvTmp[0] == nil || pl.kvTmpLen < size {
		for i := range pl.kvTmp {
			buf, err := pl.p.newBuf(size)
			if err != nil {
				return err
			}
			pl.kvTmp[i] = buf
		}
		pl.kvTmpLen = size
	}
	x := pl.buf(op.In)
	if op.Prologue != nil {
		var err error
		fits := op.Q.Bias == "" && op.K.Bias == "" && op.V.Bias == ""
		if x, err = pl.normPrologue(op.In, op.Prologue, []string{op.Q.Weight, op.K.Weight, op.V.Weight}, fits); err != nil {
			return err
		}
	}
	q, k, v := pl.buf(op.Out), gpu.Binding{Buf: pl.kvTmp[0]}, gpu.Binding{Buf: pl.kvTmp[1]}
	for _, pr := range []struct {
		fusion.Projection
		out  gpu.Binding
		info fusion.BufInfo
	}{{op.Q, q, g.Bufs[op.Out]}, {op.K, k, kv}, {op.V, v, kv}} {
		if err := pl.matMul(pl.ws.byName[pr.Weight], pr.Bias, x, in.Cols, pr.out, pr.info, false); err != nil {
			pl.pro = nil
			return err
		}
	}
	pl.pro = nil
	return pl.ropeStoreKVBind(op.Layer, op.HeadShape, op.RopeParams, q, k, v)
}

// ropeStoreKV plans a RopeStoreKV (validation made it unbatched): one
// dispatch rotating q in place and storing the rotated k and v.
func (pl *planner) ropeStoreKV(op *fusion.RopeStoreKVOp) error {
	return pl.ropeStoreKVBind(op.Layer, op.HeadShape, op.RopeParams, pl.buf(op.Q), pl.buf(op.K), pl.buf(op.V))
}

// ropeStoreKVBind is ropeStoreKV with q, k and v bound as given.
func (pl *planner) ropeStoreKVBind(layer int, op fusion.HeadShape, rp fusion.RopeParams, q, kb, vb gpu.Binding) error {
	fb, style, err := pl.ropeFreq(rp)
	if err != nil {
		return err
	}
	c := pl.caches[0]
	k, words := kStoreKvRope, op.HeadDim
	if c.spec.F16 {
		k, words = kStoreKvRopeF16, kvWords(c.spec)
	}
	n := op.Heads*(rp.Dims/2) + op.KVHeads*words
	k.dispatch(pl, shaders.RopeKVParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim),
		RopeDims: u(rp.Dims), Style: style, MaxLen: u(c.spec.MaxLen), OutF16: pl.h(q), KF16: pl.h(kb), VF16: pl.h(vb), Scale: ropeScale(rp), Ring: u(c.spec.RingLen(layer))},
		ceilDiv(n, 64), pl.p.g.Tokens, 1, ropekvBindings{Step: pl.stepB(), Freq: gpu.Binding{Buf: fb}, QW: q,
			KW: kb, VW: vb, Kc: gpu.Binding{Buf: c.k[layer]}, Vc: gpu.Binding{Buf: c.v[layer]}})
	return nil
}

// matVariant returns the matmul module for weights w (GLU: gate and up).
func matVariant(w *weight, glu bool) shaders.MatMulVariant {
	return shaders.MatMulVariant{Weight: w.wt, Scale: w.st, Quant: w.quant, GLU: glu}
}

// matShape is what the choice of a matmul-family kernel depends on besides
// the device's capabilities: the product's shape and operands.
type matShape struct {
	rows     int  // rows of x and out (the step's tokens)
	batch    bool // a batched step (one row per sequence)
	chunked  bool // input columns and scale blocks hold whole 16-byte chunks
	prologue bool // the product runs the op's RMS-norm prologue
	xF16     bool // x is an f16 activation
}

// chooseMatKernel picks the matmul-family kernel and module of a product
// with weights of variant v: a pure function of the device's capabilities
// and the shape (TestChooseMatKernel). Every device gets the same kernels;
// the choice is by shape and by capability only:
//   - matmul (tiles staged in workgroup memory, each weight chunk read once
//     per 32 tokens) for a prefill (4+ rows of an unbatched step), where
//     rows and scale blocks hold whole 16-byte chunks;
//   - otherwise the decode kernels, one row of the step per workgroup with
//     the step's rows as the fastest-varying dispatch dimension:
//     matvec_lanes (its element-wise path takes shapes of partial chunks), or with the norm prologue matvec_lanes_norm; on a
//     device with subgroup operations matvec_sg (no workgroup-memory
//     reduction), and with shader f16, for f16 activations and weights
//     that convert to f16 exactly, matvec_sg_h.
//
// A batched step (one row per sequence) is a decode step of R rows: the
// same kernels, each row computed exactly as that sequence's step alone
// (so seeded sampling gives the same tokens batched or not); the
// workgroups of the R rows that read the same weights run side by side,
// so the weights come from memory about once per step.
func chooseMatKernel(c caps, v shaders.MatMulVariant, s matShape) (contract[shaders.MatParams, matmulBindings], shaders.MatMulVariant) {
	switch {
	case s.chunked && s.rows >= 4 && !s.batch:
		return kMatmul, v
	case s.prologue:
		// The norm prologue has no subgroup form.
		return kMatvecLanesNorm, v
	case c.subgroups:
		// The same lane groups, reduced through subgroup shuffles; in f16
		// arithmetic for f16 activations where the device has it (f32
		// activation policies, such as Falcon's and Phi-2's, keep f32
		// math; matvec_sg_h has no element-wise path).
		v.Subgroups = true
		if c.f16 && s.xF16 && shaders.F16Weights(v.Weight) && s.chunked {
			v.F16 = true
			return kMatvecSgH, v
		}
		return kMatvecSg, v
	}
	return kMatvecLanes, v
}

// matDispatch plans the matmul-family kernel of one row block (see
// chooseMatKernel).
func (pl *planner) matDispatch(v shaders.MatMulVariant, w *weight, params shaders.MatParams, rows, nrows int, bind matmulBindings) {
	if pl.pro != nil {
		bind.Bias = pl.pro.scale // the prologue's ops have no bias
	}
	sh := v.Shape()
	ce := v.ChunkElems()
	chunked := int(params.InCols)%ce == 0 && int(params.Block)%ce == 0
	mats := 1
	if v.GLU {
		mats = 2
	}
	c := matCost(w, rows, int(params.InCols), nrows, mats)
	k, kv := chooseMatKernel(pl.p.b.caps, v, matShape{rows: nrows, batch: pl.p.g.Batch, chunked: chunked, prologue: pl.pro != nil, xF16: params.XF16 != 0})
	if k == kMatmul {
		k.dispatchVariant(pl, kv.Variant(), params, c, ceilDiv(rows, sh.TileRows), ceilDiv(nrows, sh.TileTokens), 1, bind)
		return
	}
	// Lanes per row group: enough to cover a row's chunks once, at least
	// 4, at most the workgroup.
	lanes := 4
	for lanes < sh.LanesWG && lanes*2 <= ceilDiv(int(params.InCols), ce) {
		lanes *= 2
	}
	params.Lanes = u(lanes)
	groups := ceilDiv(rows, sh.LanesWG/lanes*sh.LanesRows)
	k.dispatchVariant(pl, kv.Variant(), params, c, nrows, groups, 1, bind)
}

// matMul plans out = W·x + bias (accum: out += ...), one dispatch per row
// block of W.
func (pl *planner) matMul(w *weight, biasName string, x gpu.Binding, inCols int, outB gpu.Binding, out fusion.BufInfo, accum bool) error {
	if w.qt != shaders.BlockNone {
		return pl.qMatMul(w, biasName, x, inCols, outB, out, accum)
	}
	bias, hasBias, err := pl.vector(biasName)
	if err != nil {
		return err
	}
	none := pl.none()
	v := matVariant(w, false)
	for _, c := range w.chunks {
		s := pl.dummy
		if w.quant {
			s = c.s
		}
		params := shaders.MatParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows),
			Block: u(w.block), NBlocks: u(w.nblk), HasBias: b2u(hasBias), NRows: u(out.Rows), Accum: b2u(accum),
			OutF16: b2u(out.F16), XF16: pl.h(x)}
		bias := bias
		if pl.pro != nil {
			params.NormEps = pl.pro.eps
		}
		bind := matmulBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, S: gpu.Binding{Buf: s}, Bias: bias, OutW: outB, W2: none, S2: none}
		pl.matDispatch(v, w, params, c.rows, out.Rows, bind)
	}
	return nil
}

// matMulGLU plans out = act(G·x + bias) * (U·x + upBias): one dispatch per
// row block where the kernel takes it (gluWhole), else (a graph fused
// without FusionSupport) the gate projection into the scratch buffer, the
// up projection into out and a glu.
func (pl *planner) matMulGLU(op *fusion.MatMulGLUOp, out fusion.BufInfo, x gpu.Binding) error {
	g := pl.p.g
	gw, uw := pl.ws.byName[op.Gate.Weight], pl.ws.byName[op.Up.Weight]
	inCols := g.Bufs[op.In].Cols
	act, ok := shaders.ActivationByName(op.Act.String())
	if !ok {
		return fmt.Errorf("activation %s: %w", op.Act, gpu.ErrUnsupported)
	}
	if !gluWhole(gw, uw, op.Gate.Bias, op.Up.Bias) {
		pl.p.splits++
		size := f32Bytes4(out) // the gate products are f32
		if pl.gate == nil || pl.gateSize < size {
			buf, err := pl.p.newBuf(size)
			if err != nil {
				return err
			}
			pl.gate, pl.gateSize = buf, size
		}
		gate, up := gpu.Binding{Buf: pl.gate}, gpu.Binding{Buf: pl.scratch}
		// The gate and up products stay f32: only the op's output is
		// an activation (fusion.BufInfo.F16).
		pl.half[pl.gate], pl.half[pl.scratch] = false, false
		inner := out
		inner.F16 = false
		if err := pl.matMul(gw, op.Gate.Bias, x, inCols, gate, inner, false); err != nil {
			return err
		}
		if err := pl.matMul(uw, op.Up.Bias, x, inCols, up, inner, false); err != nil {
			return err
		}
		kGlu.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), Act: uint32(act), NRows: u(out.Rows), OutF16: b2u(out.F16)}, ceilDiv(out.Cols, 64), out.Rows, 1,
			elementwiseBindings{Step: pl.stepB(), AW: gate, BW: up, OutW: pl.buf(op.Out)})
		return nil
	}
	biasName := op.Gate.Bias
	if biasName == "" {
		biasName = op.Up.Bias
	}
	bias, _, err := pl.vector(biasName)
	if err != nil {
		return err
	}
	v := matVariant(gw, true)
	for i, c := range gw.chunks {
		uc := uw.chunks[i]
		s, s2 := pl.dummy, pl.dummy
		if gw.quant {
			s, s2 = c.s, uc.s
		}
		params := shaders.MatParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows),
			Block: u(gw.block), NBlocks: u(gw.nblk), HasBias: b2u(op.Gate.Bias != ""), NRows: u(out.Rows),
			Act: uint32(act), HasBias2: b2u(op.Up.Bias != ""), OutF16: b2u(out.F16), XF16: pl.h(x)}
		if pl.pro != nil {
			params.NormEps = pl.pro.eps
		}
		bind := matmulBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, S: gpu.Binding{Buf: s}, Bias: bias, OutW: pl.buf(op.Out), W2: gpu.Binding{Buf: uc.w}, S2: gpu.Binding{Buf: s2}}
		pl.matDispatch(v, gw, params, c.rows, out.Rows, bind)
	}
	return nil
}

// sameLayout reports whether two weights can share one kernel's parameters:
// the same type, scales and row blocks.
func sameLayout(a, b *weight) bool {
	if a.wt != b.wt || a.qt != b.qt || a.st != b.st || a.quant != b.quant || a.block != b.block || a.nblk != b.nblk ||
		a.rows != b.rows || a.cols != b.cols || len(a.chunks) != len(b.chunks) {
		return false
	}
	for i, c := range a.chunks {
		if c.rowBase != b.chunks[i].rowBase || c.rows != b.chunks[i].rows {
			return false
		}
	}
	return true
}

// record writes the params buffer and records the command list.
func (pl *planner) record() error {
	p := pl.p
	n := 0
	for _, it := range pl.items {
		if it.kernel != "" {
			n++
		}
	}
	params := make([]byte, max(n, 1)*paramSlot)
	slot := 0
	for _, it := range pl.items {
		if it.kernel == "" {
			continue
		}
		b, err := shaders.Encode(it.params)
		if err != nil {
			return err
		}
		copy(params[slot*paramSlot:], b)
		slot++
	}
	pb, err := p.newBuf(int64(len(params)))
	if err != nil {
		return err
	}
	if err := p.b.dev.Write(pb, 0, params); err != nil {
		return err
	}
	p.items, p.params = pl.items, pb
	p.cmds, _, err = p.recordList(false)
	return err
}

// recordList records the planned items, with timestamps before each op's
// first item and after the last item when timestamps is set; it returns
// the list and, for timestamps, the op index of each slot (the last slot
// marks the end).
func (p *program) recordList(timestamps bool) (gpu.Commands, []int, error) {
	cmds, err := p.b.dev.NewCommands()
	if err != nil {
		return nil, nil, err
	}
	var slots []int
	stamp := func(op int) error {
		if err := cmds.Timestamp(len(slots)); err != nil {
			return err
		}
		slots = append(slots, op)
		return nil
	}
	fail := func(err error) (gpu.Commands, []int, error) {
		cmds.Release()
		return nil, nil, err
	}
	slot := 0
	for i, it := range p.items {
		if timestamps && (i == 0 || p.items[i-1].op != it.op) {
			if err := stamp(it.op); err != nil {
				return fail(err)
			}
		}
		if it.kernel == "" {
			if err := cmds.Copy(it.copyDst, 0, it.copySrc, 0, it.copySize); err != nil {
				return fail(err)
			}
			continue
		}
		k, err := p.b.kernel(it.kernel, it.variant)
		if err != nil {
			return fail(err)
		}
		bind := append([]gpu.Binding{{Buf: p.params, Offset: int64(slot * paramSlot), Size: paramBytes}}, it.bindings...)
		if err := cmds.Dispatch(k, bind, it.x, it.y, it.z); err != nil {
			return fail(fmt.Errorf("%s: %w", it.kernel, err))
		}
		slot++
	}
	if timestamps {
		if err := stamp(-1); err != nil {
			return fail(err)
		}
	}
	if err := cmds.Finish(); err != nil {
		return fail(err)
	}
	return cmds, slots, nil
}

// tokenMask returns the program's token mask buffer for a vocabulary of n
// tokens (gpu.Program.SetTokenMask), made on first use with no mask set.
func (pl *planner) tokenMask(n int) (gpu.Binding, error) {
	p := pl.p
	if p.mask == nil {
		buf, err := p.newBuf(shaders.TokenMaskBytes(n))
		if err != nil {
			return gpu.Binding{}, err
		}
		if err := p.b.dev.Write(buf, 0, shaders.EncodeTokenMask(nil, n, nil)); err != nil {
			return gpu.Binding{}, err
		}
		p.mask, p.maskN = buf, n
	}
	return gpu.Binding{Buf: p.mask}, nil
}
