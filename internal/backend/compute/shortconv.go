package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// shortConv plans a ShortConv (LFM2's gated short convolution,
// wgsl/shortconv.wgsl): one dispatch of an invocation per channel and row,
// reading and updating the layer's state in the cache (the first width-1
// rows and the state update in row 0's invocation); in a batched step one
// dispatch per row, binding that row's sequence's state
// (as batchAttention binds its cache), so each row runs as its one-row
// step alone. The taps are a matrix [Channels, Width] in one binding, of
// any type but llama.cpp's blocks (GGUF keeps them f32: rows of 3-4 values
// fit no block; gpurun convert's int8 recipes scale them per row).
func (pl *planner) shortConv(op *fusion.ShortConvOp) error {
	w, ok := pl.ws.byName[op.Weight]
	if !ok {
		return fmt.Errorf("short_conv weight %q not loaded", op.Weight)
	}
	if w.qt != shaders.BlockNone || len(w.chunks) != 1 {
		return fmt.Errorf("short_conv taps %q (block type %d, %d chunks): the kernel reads f32, f16, bf16, int8 or int4 taps in one binding: %w",
			op.Weight, w.qt, len(w.chunks), gpu.ErrUnsupported)
	}
	g := pl.p.g
	out := g.Bufs[op.Out]
	prm := shaders.ShortConvParams{Channels: u(op.Channels), Width: u(op.Width), NRows: u(out.Rows), PosAt: u(pl.p.posAt),
		WT: uint32(w.wt), BCXF16: pl.h(pl.buf(op.In)), OutF16: b2u(out.F16)}
	if w.quant {
		prm.ST, prm.Block, prm.NBlocks = uint32(w.st), u(w.block), u(w.nblk)
	}
	bind := shortconvBindings{Step: pl.stepB(), BcxW: pl.buf(op.In), W: gpu.Binding{Buf: w.chunks[0].w}, S: pl.scales(w.chunks[0]), OutW: pl.buf(op.Out)}
	groups := ceilDiv(op.Channels, 64)
	if groups > maxDispatch || out.Rows > maxDispatch {
		return fmt.Errorf("short_conv of %d channels over %d rows exceeds one dispatch: %w", op.Channels, out.Rows, gpu.ErrUnsupported)
	}
	pl.p.states = pl.caches
	if !g.Batch {
		bind.State = gpu.Binding{Buf: pl.caches[0].state[op.Layer]}
		kShortConv.dispatch(pl, prm, groups, out.Rows, 1, bind)
		return nil
	}
	for r, c := range pl.caches {
		prm.Row0 = u(r)
		bind.State = gpu.Binding{Buf: c.state[op.Layer]}
		kShortConv.dispatch(pl, prm, groups, 1, 1, bind)
	}
	return nil
}

// checkState fails a step of a program that updates recurrent states
// (fusion.LayerState) unless it starts at 0 or where the states of its
// cache end: states cannot roll back (gpu.ErrStep, as on the CPU
// backend).
func checkState(c *kvCache, pos int) error {
	if pos != 0 && pos != c.statePos {
		if c.statePos < 0 {
			return fmt.Errorf("%w: a step at position %d on recurrent states a failed step or copy left unknown (restart the sequence at 0)", gpu.ErrStep, pos)
		}
		return fmt.Errorf("%w: a step at position %d on recurrent states that hold position %d (states cannot roll back; restart the sequence at 0)", gpu.ErrStep, pos, c.statePos)
	}
	return nil
}

// setStates sets the position the states of caches describe.
func setStates(caches []*kvCache, pos int) {
	for _, c := range caches {
		c.statePos = pos
	}
}
