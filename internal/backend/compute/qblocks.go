package compute

import (
	"encoding/binary"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// Weights of llama.cpp's block types (tensors.Q4_1 ... Q3K, Q8_0, MXFP4,
// IQ4_NL, IQ4_XS, NVFP4, TQ1_0, TQ2_0) keep their
// blocks bit for bit on the device and have kernels of their own
// (shaders/wgsl/qblocks.wgsl, one module per sub-block layout), which
// compute every weight with the CPU reference's f32 operations (the sums
// run in another order: results agree within the conformance tolerance,
// Embed bitwise). A weight with a non-zero qt takes these paths: qEmbed for
// Embed, qMatMul for MatMul and MultiMatMul, and MatMulGLU as two qMatMul
// dispatches and a glu.

// qtCodes maps stored dtypes to the block type codes (shaders.BlockType,
// the QT_* constants of qblocks.wgsl).
var qtCodes = map[tensors.DType]shaders.BlockType{
	tensors.Q4_1: shaders.BlockQ4_1, tensors.Q5_0: shaders.BlockQ5_0, tensors.Q5_1: shaders.BlockQ5_1,
	tensors.Q8_0: shaders.BlockQ8_0, tensors.MXFP4: shaders.BlockMXFP4,
	tensors.Q4K: shaders.BlockQ4K, tensors.Q5K: shaders.BlockQ5K, tensors.Q6K: shaders.BlockQ6K,
	tensors.Q2K: shaders.BlockQ2K, tensors.Q3K: shaders.BlockQ3K,
	tensors.IQ4_NL: shaders.BlockIQ4NL, tensors.IQ4_XS: shaders.BlockIQ4XS,
	tensors.NVFP4: shaders.BlockNVFP4, tensors.TQ1_0: shaders.BlockTQ1_0, tensors.TQ2_0: shaders.BlockTQ2_0,
	tensors.IQ2_XXS: shaders.BlockIQ2XXS, tensors.IQ2_XS: shaders.BlockIQ2XS, tensors.IQ2_S: shaders.BlockIQ2S,
	tensors.IQ3_XXS: shaders.BlockIQ3XXS, tensors.IQ3_S: shaders.BlockIQ3S, tensors.IQ1_S: shaders.BlockIQ1S,
	tensors.IQ1_M: shaders.BlockIQ1M,
}

// gridTypes are the block types whose kernels read the I-quant lookup
// tables (the grid binding of qblocks.wgsl); moe.wgsl does not bind them,
// so experts of these types are refused.
var gridTypes = map[shaders.BlockType]bool{
	shaders.BlockIQ2XXS: true, shaders.BlockIQ2XS: true, shaders.BlockIQ2S: true, shaders.BlockIQ3XXS: true,
	shaders.BlockIQ3S: true, shaders.BlockIQ1S: true, shaders.BlockIQ1M: true,
}

// gridWords lays out tensors.IQGrids as shaders.IQGridTables says the
// kernels find them (the same tables, in the same order, of the same sizes).
func gridWords() ([]byte, error) {
	gs := tensors.IQGrids()
	if len(gs) != len(shaders.IQGridTables) {
		return nil, fmt.Errorf("%d I-quant tables, the kernels expect %d: %w", len(gs), len(shaders.IQGridTables), gpu.ErrUnsupported)
	}
	var out []byte
	for i, g := range gs {
		if want := shaders.IQGridTables[i]; g.Name != want.Name || len(g.Words) != want.Words {
			return nil, fmt.Errorf("I-quant table %d is %s of %d words, the kernels expect %s of %d: %w", i, g.Name, len(g.Words), want.Name, want.Words, gpu.ErrUnsupported)
		}
		for _, w := range g.Words {
			out = binary.LittleEndian.AppendUint32(out, w)
		}
	}
	return out, nil
}

// gridB binds the I-quant tables where the weights have them (a weight of
// a grid type was loaded), else the dummy buffer.
func (pl *planner) gridB() gpu.Binding {
	if pl.ws.grid != nil {
		return gpu.Binding{Buf: pl.ws.grid}
	}
	return pl.none()
}

// qMatMul plans out = W·x + bias (accum: out += ...) for a block-type W,
// one dispatch per row block, in W's layout's module of qblocks.wgsl:
// qmatmul for prefill (4+ rows), else qmatvec, or qmatvec_sg on a device
// with subgroup operations.
func (pl *planner) qMatMul(w *weight, biasName string, x gpu.Binding, inCols int, outB gpu.Binding, out fusion.BufInfo, accum bool) error {
	bias, hasBias, err := pl.vector(biasName)
	if err != nil {
		return err
	}
	v := shaders.QBlockVariant{Layout: w.qt.Layout()}
	// Lanes per row over its sub-blocks, as matvec_lanes' over chunks.
	lanes := laneCount(inCols/v.Layout.SubLen(), shaders.QMatVecWG)
	// groups is the qmatvec workgroups (row groups) of rows rows.
	groups := func(rows int) int { return ceilDiv(rows, shaders.QMatVecWG/lanes*shaders.QMatVecRows) }
	for _, c := range w.chunks {
		params := shaders.QParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), QT: w.qt,
			HasBias: b2u(hasBias), NRows: u(out.Rows), Accum: b2u(accum), OutF16: b2u(out.F16), XF16: pl.h(x), Lanes: u(lanes)}
		bind := qblocksBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, Bias: bias, OutW: outB, Grid: pl.gridB()}
		cst := qCost(w.qt, c.rows, inCols, out.Rows)
		switch {
		case out.Rows >= 4:
			kQmatmul.dispatchVariant(pl, v.Variant(), params, cst, ceilDiv(c.rows, 32), ceilDiv(out.Rows, 32), 1, bind)
		case pl.p.b.caps.subgroups:
			sv := v
			sv.Subgroups = true
			kQmatvecSg.dispatchVariant(pl, sv.Variant(), params, cst, out.Rows, groups(c.rows), 1, bind)
		default:
			kQmatvec.dispatchVariant(pl, v.Variant(), params, cst, out.Rows, groups(c.rows), 1, bind)
		}
	}
	return nil
}

// qCost is the work of a block-type product over rows rows of cols
// inputs for tokens tokens: every block once, the activations once per
// token, the outputs once.
func qCost(qt shaders.BlockType, rows, cols, tokens int) cost {
	elems, bytes := qt.BlockLayout()
	wb := int64(rows) * int64(cols/elems) * int64(bytes)
	return cost{Bytes: wb + int64(tokens)*(int64(cols)+int64(rows))*4, FLOPs: 2 * int64(rows) * int64(cols) * int64(tokens)}
}

// qEmbed plans out[t] = scale * W[tokens[t]] for a block-type table.
func (pl *planner) qEmbed(w *weight, out fusion.BufInfo, outB gpu.Binding, scale float32, tokens int) {
	for _, c := range w.chunks {
		params := shaders.QParams{InCols: u(out.Cols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), QT: w.qt, Scale: scale, OutF16: b2u(out.F16)}
		kQembed.dispatchVariant(pl, shaders.QBlockVariant{Layout: w.qt.Layout()}.Variant(), params, cost{}, ceilDiv(out.Cols, 64), tokens, 1,
			qblocksBindings{Step: pl.stepB(), XW: pl.none(), W: gpu.Binding{Buf: c.w}, Bias: pl.none(), OutW: outB, Grid: pl.gridB()})
	}
}
