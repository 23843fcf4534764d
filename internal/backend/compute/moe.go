package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// moeBufs are the MoE ops' working buffers, made on demand and shared by
// every layer (the ops run one after another): the router logits [rows,
// experts], the routes [rows, used] of (expert, weight) word pairs that
// moe_route writes and the expert kernels read on the device, and the
// selected experts' gated hidden rows [rows, used, hidden] and, grouped,
// their unweighted down products [rows, used, cols].
type moeBufs struct {
	logits, route, hidden, y             gpu.Buffer
	logitsLen, routeLen, hiddenLen, yLen int64
}

// grow returns *buf, made anew when it holds fewer than size bytes.
func (pl *planner) grow(buf *gpu.Buffer, have *int64, size int64) (gpu.Binding, error) {
	if *buf == nil || *have < size {
		b, err := pl.p.newBuf(size)
		if err != nil {
			return gpu.Binding{}, err
		}
		*buf, *have = b, size
	}
	pl.half[*buf] = false
	return gpu.Binding{Buf: *buf}, nil
}

// expertWeight returns a stacked expert weight the moe kernels read: one
// binding (its rows are addressed as expert*rows + row, so it may not be
// split over bindings) of a type common.wgsl decodes or of a llama.cpp
// block type (moe.wgsl's mq_value).
func (pl *planner) expertWeight(name string) (*weight, error) {
	w := pl.ws.byName[name]
	if gridTypes[w.qt] {
		return nil, fmt.Errorf("moe expert weight %q of %s (its kernels do not read the I-quant grids): %w", name, w.qt, gpu.ErrUnsupported)
	}
	if len(w.chunks) != 1 {
		return nil, fmt.Errorf("moe expert weight %q over the binding limit (%d chunks): %w", name, len(w.chunks), gpu.ErrUnsupported)
	}
	return w, nil
}

// moeParams fills the weight fields of the moe kernels' parameters.
func moeParams(p shaders.MoEParams, w *weight) shaders.MoEParams {
	p.WT, p.ST, p.QT = uint32(w.wt), uint32(w.st), uint32(w.qt)
	if w.quant {
		p.Block, p.NBlocks = u(w.block), u(w.nblk)
	}
	return p
}

// expertBias returns a stack of expert biases [experts, n] the moe
// kernels read as f32 words: one binding of f32 values.
func (pl *planner) expertBias(name string) (*weight, error) {
	w := pl.ws.byName[name]
	if w.wt != shaders.WeightF32 || w.quant || w.qt != shaders.BlockNone || len(w.chunks) != 1 {
		return nil, fmt.Errorf("moe expert bias %q not one binding of f32 values: %w", name, gpu.ErrUnsupported)
	}
	return w, nil
}

// moeGLUBias binds moe_glu's gate and up biases (fusion.MoEOp.GateBias,
// UpBias) where the kernel reads them, setting p's bits and offsets, and
// returns the bindings of s and s2 (the experts' scales gs and us as
// given, or the biases in their place). Unscaled experts leave s and s2
// free: the gate bias is bound at s, the up bias at s2. Scaled ones (int8,
// int4) need both: the up scales and the two biases are copied once into
// a buffer of the op's own, bound at s2.
func (pl *planner) moeGLUBias(op *fusion.MoEOp, gw, uw *weight, p *shaders.MoEParams, gs, us gpu.Binding) (gpu.Binding, gpu.Binding, error) {
	var gb, ub *weight
	var err error
	if op.GateBias != "" {
		if gb, err = pl.expertBias(op.GateBias); err != nil {
			return gs, us, err
		}
		p.Bias |= shaders.MoEBiasGate
	}
	if op.UpBias != "" {
		if ub, err = pl.expertBias(op.UpBias); err != nil {
			return gs, us, err
		}
		p.Bias |= shaders.MoEBiasUp
	}
	if gb == nil && ub == nil {
		return gs, us, nil
	}
	if !gw.quant && !uw.quant {
		if gb != nil {
			gs = gpu.Binding{Buf: gb.chunks[0].w}
		}
		if ub != nil {
			us = gpu.Binding{Buf: ub.chunks[0].w}
		}
		return gs, us, nil
	}
	// [up scales | gate bias | up bias], each from a 16-byte boundary.
	n := int64(op.Experts) * int64(op.Hidden) * 4
	var scaleBytes int64
	if uw.quant {
		scaleBytes = uw.chunks[0].sLen
	}
	buf, err := pl.p.newBuf(scaleBytes + 2*align16(n))
	if err != nil {
		return gs, us, err
	}
	cmds, err := pl.p.b.dev.NewCommands()
	if err != nil {
		return gs, us, err
	}
	defer cmds.Release()
	copyErr := func(dst int64, src gpu.Buffer, srcOff, size int64) {
		if err == nil {
			err = cmds.Copy(buf, dst, src, srcOff, size)
		}
	}
	if uw.quant {
		c := uw.chunks[0]
		copyErr(0, c.w, c.sOff, c.sLen)
	}
	if gb != nil {
		copyErr(scaleBytes, gb.chunks[0].w, 0, n)
		p.Bias |= shaders.MoEBiasS2
		p.GBOff = u(int(scaleBytes / 4))
	}
	if ub != nil {
		copyErr(scaleBytes+align16(n), ub.chunks[0].w, 0, n)
		p.UBOff = u(int((scaleBytes + align16(n)) / 4))
	}
	if err == nil {
		err = cmds.Finish()
	}
	if err == nil {
		err = pl.p.b.dev.Submit(cmds)
	}
	if err == nil {
		err = pl.p.b.dev.Wait()
	}
	if err != nil {
		return gs, us, fmt.Errorf("moe expert biases: %w", err)
	}
	return gs, gpu.Binding{Buf: buf}, nil
}

// moe plans a MoE op with no host round trip: the router product into
// the logits buffer (the matmul kernels), moe_route's top-k selection into
// the route buffer, then one moe_glu and one moe_down dispatch over every
// row's selected experts (wgsl/moe.wgsl), each workgroup reading only the
// rows of the expert its route names. A prefill groups the rows' (row,
// expert) slots by expert on the device (moe_route), and its moe_glu and
// moe_down workgroups run each expert's slots, so an expert's rows are
// read once per step; moe_sum then weighs and sums each row's products.
func (pl *planner) moe(op *fusion.MoEOp) error {
	g := pl.p.g
	in, out := g.Bufs[op.In], g.Bufs[op.Out]
	gw, err := pl.expertWeight(op.Gate)
	if err != nil {
		return err
	}
	uw, err := pl.expertWeight(op.Up)
	if err != nil {
		return err
	}
	dw, err := pl.expertWeight(op.Down)
	if err != nil {
		return err
	}
	if !sameType(gw, uw) {
		return fmt.Errorf("moe gate %q and up %q of different types: %w", op.Gate, op.Up, gpu.ErrUnsupported)
	}
	var act shaders.Activation
	if op.Act != fusion.ActSwiGLUOAI {
		var ok bool
		if act, ok = shaders.ActivationByName(op.Act.String()); !ok {
			return fmt.Errorf("activation %s: %w", op.Act, gpu.ErrUnsupported)
		}
	}
	if op.Hidden > maxDispatch || out.Cols > maxDispatch || op.Experts > maxDispatch || in.Rows > maxDispatch {
		return fmt.Errorf("moe of %d hidden, %d columns, %d experts, %d rows: over a dispatch: %w", op.Hidden, out.Cols, op.Experts, in.Rows, gpu.ErrUnsupported)
	}
	// Prefill (4+ rows of an unbatched step, as the tiled matmul): the
	// slots grouped by expert, each expert's rows read once per step.
	grouped := in.Rows >= 4 && !g.Batch
	rows, used := int64(in.Rows), int64(op.Used)
	logits, err := pl.grow(&pl.moeB.logits, &pl.moeB.logitsLen, rows*int64(op.Experts)*4)
	if err != nil {
		return err
	}
	// The (expert, weight) pairs, then the grouped offsets and lists.
	route, err := pl.grow(&pl.moeB.route, &pl.moeB.routeLen, (3*rows*used+int64(op.Experts)+1)*4)
	if err != nil {
		return err
	}
	hidden, err := pl.grow(&pl.moeB.hidden, &pl.moeB.hiddenLen, rows*used*int64(op.Hidden)*4)
	if err != nil {
		return err
	}
	sink, err := pl.sinkBuf()
	if err != nil {
		return err
	}
	x := pl.buf(op.In)
	if err := pl.matMul(pl.ws.byName[op.Router], op.RouterBias, x, in.Cols, logits, fusion.BufInfo{Rows: in.Rows, Cols: op.Experts}, false); err != nil {
		return err
	}
	step, none := pl.stepB(), pl.none()
	base := shaders.MoEParams{Cols: u(in.Cols), Hidden: u(op.Hidden), Experts: u(op.Experts), Used: u(op.Used), NRows: u(in.Rows),
		Act: uint32(act), NormTopK: b2u(op.NormTopK), Grouped: b2u(grouped), Gating: uint32(op.Gating)}
	if op.Act == fusion.ActSwiGLUOAI {
		base.OAI, base.Alpha, base.Limit = 1, op.SwiGLUOAI.Alpha, op.SwiGLUOAI.Limit
	}
	kMoeRoute.dispatch(pl, base, 1, 1, 1, moeBindings{Step: step, XW: logits, W: none, S: none, W2: none, S2: none, Route: route, OutW: sink})
	glu := moeParams(base, gw)
	glu.XF16 = pl.h(x)
	gs, us, err := pl.moeGLUBias(op, gw, uw, &glu, pl.scales(gw.chunks[0]), pl.scales(uw.chunks[0]))
	if err != nil {
		return err
	}
	gy, gz := op.Used, in.Rows
	if grouped {
		gy, gz = op.Experts, 1
	}
	// Expert rows read: each slot's (per row), or at most each expert's
	// once (grouped); the FLOPs of every slot either way.
	slots := in.Rows * op.Used
	read := slots
	if grouped {
		read = min(slots, op.Experts)
	}
	moeCost := func(w *weight, rows, cols, mats int) cost {
		c := matCost(w, read*rows, cols, 1, mats)
		c.FLOPs = 2 * int64(mats) * int64(slots) * int64(rows) * int64(cols)
		return c
	}
	kMoeGlu.dispatchVariant(pl, shaders.Variant{}, glu, moeCost(gw, op.Hidden, in.Cols, 2), op.Hidden, gy, gz,
		moeBindings{Step: step, XW: x, W: gpu.Binding{Buf: gw.chunks[0].w}, S: gs, W2: gpu.Binding{Buf: uw.chunks[0].w}, S2: us, Route: route, OutW: hidden})
	down := moeParams(base, dw)
	db := none
	if op.DownBias != "" {
		b, err := pl.expertBias(op.DownBias)
		if err != nil {
			return err
		}
		db, down.Bias = gpu.Binding{Buf: b.chunks[0].w}, shaders.MoEBiasDown
	}
	if !grouped {
		down.OutF16 = b2u(out.F16)
		kMoeDown.dispatchVariant(pl, shaders.Variant{}, down, moeCost(dw, out.Cols, op.Hidden, 1), out.Cols, in.Rows, 1,
			moeBindings{Step: step, XW: hidden, W: gpu.Binding{Buf: dw.chunks[0].w}, S: pl.scales(dw.chunks[0]), W2: db, S2: none, Route: route, OutW: pl.buf(op.Out)})
		return nil
	}
	y, err := pl.grow(&pl.moeB.y, &pl.moeB.yLen, rows*used*int64(out.Cols)*4)
	if err != nil {
		return err
	}
	kMoeDown.dispatchVariant(pl, shaders.Variant{}, down, moeCost(dw, out.Cols, op.Hidden, 1), out.Cols, op.Experts, 1,
		moeBindings{Step: step, XW: hidden, W: gpu.Binding{Buf: dw.chunks[0].w}, S: pl.scales(dw.chunks[0]), W2: db, S2: none, Route: route, OutW: y})
	sum := base
	sum.OutF16 = b2u(out.F16)
	kMoeSum.dispatch(pl, sum, ceilDiv(out.Cols, 64), in.Rows, 1, moeBindings{Step: step, XW: y, W: none, S: none, W2: none, S2: none, Route: route, OutW: pl.buf(op.Out)})
	return nil
}
