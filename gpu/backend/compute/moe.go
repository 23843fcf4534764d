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
	act, ok := shaders.ActivationByName(op.Act.String())
	if !ok {
		return fmt.Errorf("activation %s: %w", op.Act, gpu.ErrUnsupported)
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
	if err := pl.matMul(pl.ws.byName[op.Router], "", x, in.Cols, logits, fusion.BufInfo{Rows: in.Rows, Cols: op.Experts}, false); err != nil {
		return err
	}
	step, none := pl.stepB(), pl.none()
	base := shaders.MoEParams{Cols: u(in.Cols), Hidden: u(op.Hidden), Experts: u(op.Experts), Used: u(op.Used), NRows: u(in.Rows),
		Act: uint32(act), NormTopK: b2u(op.NormTopK), Grouped: b2u(grouped)}
	kMoeRoute.dispatch(pl, base, 1, 1, 1, moeBindings{Step: step, XW: logits, W: none, S: none, W2: none, S2: none, Route: route, OutW: sink})
	scale := func(w *weight) gpu.Binding {
		if w.quant {
			return gpu.Binding{Buf: w.chunks[0].s}
		}
		return none
	}
	glu := moeParams(base, gw)
	glu.XF16 = pl.h(x)
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
		moeBindings{Step: step, XW: x, W: gpu.Binding{Buf: gw.chunks[0].w}, S: scale(gw), W2: gpu.Binding{Buf: uw.chunks[0].w}, S2: scale(uw), Route: route, OutW: hidden})
	down := moeParams(base, dw)
	if !grouped {
		down.OutF16 = b2u(out.F16)
		kMoeDown.dispatchVariant(pl, shaders.Variant{}, down, moeCost(dw, out.Cols, op.Hidden, 1), out.Cols, in.Rows, 1,
			moeBindings{Step: step, XW: hidden, W: gpu.Binding{Buf: dw.chunks[0].w}, S: scale(dw), W2: none, S2: none, Route: route, OutW: pl.buf(op.Out)})
		return nil
	}
	y, err := pl.grow(&pl.moeB.y, &pl.moeB.yLen, rows*used*int64(out.Cols)*4)
	if err != nil {
		return err
	}
	kMoeDown.dispatchVariant(pl, shaders.Variant{}, down, moeCost(dw, out.Cols, op.Hidden, 1), out.Cols, op.Experts, 1,
		moeBindings{Step: step, XW: hidden, W: gpu.Binding{Buf: dw.chunks[0].w}, S: scale(dw), W2: none, S2: none, Route: route, OutW: y})
	sum := base
	sum.OutF16 = b2u(out.F16)
	kMoeSum.dispatch(pl, sum, ceilDiv(out.Cols, 64), in.Rows, 1, moeBindings{Step: step, XW: y, W: none, S: none, W2: none, S2: none, Route: route, OutW: pl.buf(op.Out)})
	return nil
}
