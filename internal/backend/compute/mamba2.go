package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// mamba2 plans a Mamba2 (Granite 4.0 H's mixer) in three dispatches: the
// convolution with its window (wgsl/mamba2conv.wgsl, a channel per
// invocation) into f32 scratch rows, the scan with the D skip and the z
// gate (wgsl/mamba2scan.wgsl, a state row per invocation) into f32
// scratch rows, then the norm kernel's RMS norm of those into out with the
// op's weight (out rounded once, as the CPU rounds an f16 activation). In
// a batched step the first two run once per row, binding that row's
// sequence's state (as shortConv does), the norm once over every row.
//
// It refuses (gpu.ErrUnsupported) what the kernels do not run: B and C
// in more than one group (the norm kernel norms a row whole, with one
// weight; Granite 4.0 H has one group) and quantized or split taps.
func (pl *planner) mamba2(op *fusion.Mamba2Op) error {
	g := pl.p.g
	out := g.Bufs[op.Out]
	if op.Groups != 1 {
		return fmt.Errorf("mamba2 of %d groups: the kernels norm each row as one group: %w", op.Groups, gpu.ErrUnsupported)
	}
	w, ok := pl.ws.byName[op.Conv]
	if !ok {
		return fmt.Errorf("mamba2 taps %q not loaded", op.Conv)
	}
	if w.quant || w.qt != shaders.BlockNone || len(w.chunks) != 1 ||
		(w.wt != shaders.WeightF32 && w.wt != shaders.WeightF16 && w.wt != shaders.WeightBF16) {
		return fmt.Errorf("mamba2 taps %q of type %d (block type %d, %d chunks): the kernel reads f32, f16 or bf16 taps in one binding: %w",
			op.Conv, w.wt, w.qt, len(w.chunks), gpu.ErrUnsupported)
	}
	var vecs [5]gpu.Binding
	for i, name := range []string{op.ConvBias, op.DtBias, op.A, op.D, op.Norm} {
		b, _, err := pl.vector(name)
		if err != nil {
			return err
		}
		vecs[i] = b
	}
	cc := op.ConvChannels()
	xbc, err := pl.grow(&pl.ssmXBC, &pl.ssmXBCLen, int64(out.Rows)*int64(cc)*4)
	if err != nil {
		return err
	}
	y, err := pl.grow(&pl.ssmY, &pl.ssmYLen, int64(out.Rows)*int64(op.Inner)*4)
	if err != nil {
		return err
	}
	in := pl.buf(op.In)
	prm := shaders.Mamba2Params{Inner: u(op.Inner), Heads: u(op.Heads), Groups: u(op.Groups), DState: u(op.State), Width: u(op.Width),
		NRows: u(out.Rows), PosAt: u(pl.p.posAt), WT: uint32(w.wt), ZXF16: pl.h(in)}
	conv := mamba2convBindings{Step: pl.stepB(), ZxW: in, W: gpu.Binding{Buf: w.chunks[0].w}, Bias: vecs[0], Xbc: xbc}
	scan := mamba2scanBindings{Step: pl.stepB(), ZxW: in, Xbc: xbc, DtBias: vecs[1], A: vecs[2], Dd: vecs[3], OutW: y}
	pl.p.states = pl.caches
	run := func(c *kvCache) {
		conv.State = gpu.Binding{Buf: c.state[op.Layer]}
		scan.State = conv.State
		kMamba2Conv.dispatch(pl, prm, ceilDiv(cc, 64), 1, 1, conv)
		kMamba2Scan.dispatch(pl, prm, ceilDiv(op.Inner, 64), 1, 1, scan)
	}
	if !g.Batch {
		run(pl.caches[0])
	} else {
		for r, c := range pl.caches {
			prm.Row0 = u(r)
			run(c)
		}
	}
	kNorm.dispatch(pl, shaders.NormParams{Cols: u(op.Inner), Eps: op.Eps, NRows: u(out.Rows), OutF16: b2u(out.F16), Heads: 1},
		out.Rows, 1, 1, normBindings{Step: pl.stepB(), XW: y, W: vecs[4], Bias: pl.none(), OutW: pl.buf(op.Out)})
	return nil
}
