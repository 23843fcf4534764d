package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// embed plans an Embed: the rows of the step's tokens, one dispatch per
// row block of the table (qEmbed for llama.cpp's block types).
func (pl *planner) embed(op *fusion.EmbedOp) error {
	if op.Positions {
		return fmt.Errorf("embedding rows by position (learned positions): %w", gpu.ErrUnsupported)
	}
	out := pl.p.g.Bufs[op.Out]
	T := pl.p.g.Tokens
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
		return nil
	}
	for _, c := range w.chunks {
		block := 0
		if w.quant {
			block = w.block
		}
		kEmbed.dispatch(pl, shaders.EmbedParams{Cols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), WT: uint32(w.wt), ST: uint32(w.st),
			Block: u(block), NBlocks: u(w.nblk), Scale: scale, OutF16: b2u(out.F16)},
			ceilDiv(out.Cols, 64), T, 1,
			embedBindings{Step: pl.stepB(), W: gpu.Binding{Buf: c.w}, S: pl.scales(c), OutW: pl.buf(op.Out)})
	}
	return nil
}

// elementwiseOp plans the norm and element-wise family: Norm, Add, GLU,
// Activation, SoftCap, LastRow, Scale and Columns, one dispatch each.
func (pl *planner) elementwiseOp(op fusion.Op) error {
	out := pl.p.g.Bufs[op.Outputs()[0]]
	copied := false
	switch op := op.(type) {
	case *fusion.NormOp:
		w, _, err := pl.vector(op.Weight)
		if err != nil {
			return err
		}
		if op.Unit {
			// A norm without a weight (Gemma 4's V norm) scales by ones,
			// as the CPU reference does: the same kernel, the same bits.
			n := out.Cols
			if op.HeadDim > 0 {
				n = op.HeadDim
			}
			if w, err = pl.ones(n); err != nil {
				return err
			}
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
	case *fusion.ScaleOp:
		f := op.Scale
		if f == 0 {
			f = 1
		}
		wb, hasW, err := pl.vector(op.Weight)
		if err != nil {
			return err
		}
		pl.scale(op.Out, op.In, 0, f, wb, hasW)
	case *fusion.ColumnsOp:
		pl.scale(op.Out, op.In, op.Offset, 1, pl.none(), false)
	case *fusion.LastRowOp:
		if op.In == op.Out {
			return nil // validation allows this only for one-token graphs: the identity
		}
		kLastRow.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), NRows: 1, OutF16: b2u(out.F16), AF16: pl.h(pl.buf(op.In))}, ceilDiv(out.Cols, 64), 1, 1,
			elementwiseBindings{Step: pl.stepB(), AW: pl.buf(op.In), BW: pl.none(), OutW: pl.buf(op.Out)})
	default:
		return unsupportedOp(op)
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

// scale plans out[t][c] = in[t][off+c] * f (times w's one value with
// hasW): a ScaleOp (off 0, in place where in is out) or a ColumnsOp (f 1).
func (pl *planner) scale(o, in fusion.Buf, off int, f float32, w gpu.Binding, hasW bool) {
	g := pl.p.g
	out, ib := g.Bufs[o], g.Bufs[in]
	ep := shaders.EltParams{Cols: u(out.Cols), Cap: f, NRows: u(out.Rows), OutF16: b2u(out.F16),
		ACols: u(ib.Cols), AOff: u(off), HasB: b2u(hasW)}
	a := pl.none()
	if in == o {
		ep.InPlace = 1
	} else {
		a = pl.buf(in)
		ep.AF16 = pl.h(a)
	}
	kScale.dispatch(pl, ep, ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: a, BW: w, OutW: pl.buf(o)})
}

// ones is a weight of n ones (f32), made once per length and program: the
// scale a unit NormOp's kernel reads.
func (pl *planner) ones(n int) (gpu.Binding, error) {
	if b, ok := pl.onesBufs[n]; ok {
		return gpu.Binding{Buf: b}, nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	b, err := pl.p.b.newFilled(f32Bytes(v))
	if err != nil {
		return gpu.Binding{}, err
	}
	pl.p.owned = append(pl.p.owned, b)
	if pl.onesBufs == nil {
		pl.onesBufs = map[int]gpu.Buffer{}
	}
	pl.onesBufs[n] = b
	return gpu.Binding{Buf: b}, nil
}
