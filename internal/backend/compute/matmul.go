package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// matMulOp plans the matmul family: MatMul, MultiMatMul, MatMulGLU and
// RowLoRA. The op's RMS-norm prologue, if any, runs in the decode kernels
// (FusionSupport took the op only where they run it: prologueWhole).
func (pl *planner) matMulOp(op fusion.Op) error {
	g := pl.p.g
	defer func() { pl.pro = nil }()
	switch op := op.(type) {
	case *fusion.MatMulOp:
		copied := false
		x := pl.input(op.Out, op.In, &copied)
		if op.Prologue != nil {
			// The prologue's kernels read the input itself.
			x = pl.buf(op.In)
		}
		if err := pl.normPrologue(op.Prologue); err != nil {
			return err
		}
		return pl.matMul(pl.ws.byName[op.Weight], op.Bias, x, g.Bufs[op.In].Cols, pl.buf(op.Out), g.Bufs[op.Out], op.Accumulate)
	case *fusion.MultiMatMulOp:
		if err := pl.normPrologue(op.Prologue); err != nil {
			return err
		}
		// One dispatch per projection: a kernel writing all of them would
		// bind more storage buffers than WebGPU's default limit of 8.
		for _, p := range op.Outs {
			if err := pl.matMul(pl.ws.byName[p.Weight], p.Bias, pl.buf(op.In), g.Bufs[op.In].Cols, pl.buf(p.Out), g.Bufs[p.Out], false); err != nil {
				return err
			}
		}
		return nil
	case *fusion.MatMulGLUOp:
		if err := pl.normPrologue(op.Prologue); err != nil {
			return err
		}
		return pl.matMulGLU(op)
	case *fusion.RowLoRAOp:
		return pl.rowLoRA(op)
	}
	return unsupportedOp(op)
}

// normPrologue sets pl.pro to the RMS-norm prologue pro (nil: none) that
// the op's products run in their kernels, the scale bound at their bias
// slot.
func (pl *planner) normPrologue(pro *fusion.RMSPrologue) error {
	if pro == nil {
		return nil
	}
	scale, _, err := pl.vector(pro.Weight)
	if err != nil {
		return err
	}
	pl.pro = &prologue{scale: scale, eps: pro.Eps}
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
//     reduction; with the prologue, in its Norm module), and with shader
//     f16, for f16 activations and weights that convert to f16 exactly
//     (no prologue), matvec_sg_h.
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
	case s.prologue && c.subgroups:
		// The norm prologue's subgroup form (f32 arithmetic: matvec_sg_h
		// has no prologue).
		v.Subgroups, v.Norm = true, true
		return kMatvecSg, v
	case s.prologue:
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
	groups := lanesSplit(v, &params, rows)
	k.dispatchVariant(pl, kv.Variant(), params, c, nrows, groups, 1, bind)
}

// lanesSplit sets params.Lanes for the matvec_lanes family (laneCount
// over a row's chunks) and returns the row groups that cover rows rows.
func lanesSplit(v shaders.MatMulVariant, params *shaders.MatParams, rows int) int {
	sh := v.Shape()
	lanes := laneCount(ceilDiv(int(params.InCols), v.ChunkElems()), sh.LanesWG)
	params.Lanes = u(lanes)
	return ceilDiv(rows, sh.LanesWG/lanes*sh.LanesRows)
}

// laneCount is the lanes per row group of the matvec_lanes kernels (and
// per row of qblocks.wgsl's qmatvec, over sub-blocks) for rows of chunks
// chunks, in workgroups of maxLanes invocations: the largest power of two
// from 4 to maxLanes that the chunks fill at least twice over (lanes*2 <=
// chunks), or half of it when that leaves fewer lanes idle in the last
// pass over the row (48 chunks: 16 lanes, 3 passes each, rather than 32 of
// which half take a second pass). Each lane of a group runs the same
// passes, so a lane without a chunk in a pass only waits: on Chromium's
// SwiftShader the 110M shape's fused QKV, GLU and LM-head kernels (768
// columns, 48 chunks) ran in 0.61-0.70 of their device time with 16 lanes.
// At most halving keeps at least half the workgroups the first choice
// gives, which a large GPU needs to fill its cores.
func laneCount(chunks, maxLanes int) int {
	lanes := 4
	for lanes < maxLanes && lanes*2 <= chunks {
		lanes *= 2
	}
	idle := func(l int) int { return ceilDiv(chunks, l)*l - chunks }
	if lanes > 4 && idle(lanes/2) < idle(lanes) {
		lanes /= 2
	}
	return lanes
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
		params := shaders.MatParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows),
			Block: u(w.block), NBlocks: u(w.nblk), HasBias: b2u(hasBias), NRows: u(out.Rows), Accum: b2u(accum),
			OutF16: b2u(out.F16), XF16: pl.h(x)}
		bias := bias
		if pl.pro != nil {
			params.NormEps = pl.pro.eps
		}
		bind := matmulBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, S: pl.scales(c), Bias: bias, OutW: outB, W2: none, S2: none}
		pl.matDispatch(v, w, params, c.rows, out.Rows, bind)
	}
	return nil
}

// matMulGLU plans out = act(G·x + bias) * (U·x + upBias): one dispatch per
// row block (FusionSupport took the op only where the kernel runs it:
// gluWhole).
func (pl *planner) matMulGLU(op *fusion.MatMulGLUOp) error {
	g := pl.p.g
	out, x := g.Bufs[op.Out], pl.buf(op.In)
	gw, uw := pl.ws.byName[op.Gate.Weight], pl.ws.byName[op.Up.Weight]
	inCols := g.Bufs[op.In].Cols
	act, ok := shaders.ActivationByName(op.Act.String())
	if !ok {
		return fmt.Errorf("activation %s: %w", op.Act, gpu.ErrUnsupported)
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
		params := shaders.MatParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows),
			Block: u(gw.block), NBlocks: u(gw.nblk), HasBias: b2u(op.Gate.Bias != ""), NRows: u(out.Rows),
			Act: uint32(act), HasBias2: b2u(op.Up.Bias != ""), OutF16: b2u(out.F16), XF16: pl.h(x)}
		if pl.pro != nil {
			params.NormEps = pl.pro.eps
		}
		bind := matmulBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, S: pl.scales(c), Bias: bias, OutW: pl.buf(op.Out), W2: gpu.Binding{Buf: uc.w}, S2: pl.scales(uc)}
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

// sameType reports whether two weights share type, scales and blocks.
func sameType(a, b *weight) bool {
	return a.wt == b.wt && a.qt == b.qt && a.st == b.st && a.quant == b.quant && a.block == b.block && a.nblk == b.nblk && a.cols == b.cols
}
