package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// rowLoRA plans a fusion.RowLoRAOp: per adapter set j and pair, two
// matvec_lanes dispatches over all the step's rows that compute only the
// rows whose adapter word (program.setAt) is j: t = A·x into the scratch
// rows, then out += B·t. Each row's products are those of that adapter's
// own unbatched graph (a MatMul, then an accumulating MatMul, both
// matvec_lanes on one row). matvec_lanes is the kernel that filters rows,
// so these products take it on every device.
func (pl *planner) rowLoRA(op *fusion.RowLoRAOp) error {
	g := pl.p.g
	in, out := g.Bufs[op.In], g.Bufs[op.Out]
	maxRank := 0
	for _, set := range op.Sets {
		for _, p := range set {
			maxRank = max(maxRank, p.Rank)
		}
	}
	if maxRank == 0 {
		return nil
	}
	t, err := pl.grow(&pl.loraT, &pl.loraTLen, int64(g.Tokens)*int64(maxRank)*4)
	if err != nil {
		return err
	}
	x := pl.buf(op.In)
	for j, set := range op.Sets {
		for _, p := range set {
			a, b := pl.ws.byName[p.A], pl.ws.byName[p.B]
			if err := pl.rowProduct(a, x, in.Cols, t, fusion.BufInfo{Rows: g.Tokens, Cols: p.Rank}, false, j); err != nil {
				return fmt.Errorf("row_lora %s: %w", p.A, err)
			}
			if err := pl.rowProduct(b, t, p.Rank, pl.buf(op.Out), out, true, j); err != nil {
				return fmt.Errorf("row_lora %s: %w", p.B, err)
			}
		}
	}
	return nil
}

// rowProduct plans out = W·x (accum: out += W·x) for the rows of adapter
// set j, with matvec_lanes (matDispatch's lane count), one dispatch per
// row block of W.
func (pl *planner) rowProduct(w *weight, x gpu.Binding, inCols int, outB gpu.Binding, out fusion.BufInfo, accum bool, j int) error {
	if w.qt != shaders.BlockNone {
		return fmt.Errorf("adapter weight of a llama.cpp block type: %w", gpu.ErrUnsupported)
	}
	v := matVariant(w, false)
	for _, c := range w.chunks {
		params := shaders.MatParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows),
			Block: u(w.block), NBlocks: u(w.nblk), NRows: u(out.Rows), Accum: b2u(accum),
			OutF16: b2u(out.F16), XF16: pl.h(x), RowSetAt: u(pl.p.setAt), RowSet: u(j)}
		groups := lanesSplit(v, &params, c.rows)
		bind := matmulBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, S: pl.scales(c), Bias: pl.none(), OutW: outB, W2: pl.none(), S2: pl.none()}
		kMatvecLanes.dispatchVariant(pl, v.Variant(), params, matCost(w, c.rows, inCols, out.Rows, 1), out.Rows, groups, 1, bind)
	}
	return nil
}
