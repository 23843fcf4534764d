package compute

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// Weights of llama.cpp's block types (tensors.Q4_1 ... Q3K) keep their
// blocks bit for bit on the device and have kernels of their own
// (shaders/wgsl/qblocks.wgsl), which dequantize them exactly as the CPU
// reference does. A weight with a non-zero qt takes these paths: qEmbed for
// Embed, qMatMul for MatMul and MultiMatMul, and MatMulGLU as two qMatMul
// dispatches and a glu.

// qtCodes maps stored dtypes to the block type codes (shaders.BlockType,
// the QT_* constants of qblocks.wgsl).
var qtCodes = map[tensors.DType]shaders.BlockType{
	tensors.Q4_1: shaders.BlockQ4_1, tensors.Q5_0: shaders.BlockQ5_0, tensors.Q5_1: shaders.BlockQ5_1,
	tensors.Q4K: shaders.BlockQ4K, tensors.Q5K: shaders.BlockQ5K, tensors.Q6K: shaders.BlockQ6K,
	tensors.Q2K: shaders.BlockQ2K, tensors.Q3K: shaders.BlockQ3K,
}

// qMatMul plans out = W·x + bias (accum: out += ...) for a block-type W,
// one dispatch per row block.
func (pl *planner) qMatMul(w *weight, biasName string, x gpu.Binding, inCols int, outB gpu.Binding, out fusion.BufInfo, accum bool) error {
	bias, hasBias, err := pl.vector(biasName)
	if err != nil {
		return err
	}
	for _, c := range w.chunks {
		params := shaders.QParams{InCols: u(inCols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), QT: w.qt,
			HasBias: b2u(hasBias), NRows: u(out.Rows), Accum: b2u(accum), OutF16: b2u(out.F16), XF16: pl.h(x)}
		bind := qblocksBindings{Step: pl.stepB(), XW: x, W: gpu.Binding{Buf: c.w}, Bias: bias, OutW: outB}
		if out.Rows >= 4 {
			kQmatmul.dispatch(pl, params, ceilDiv(c.rows, 32), ceilDiv(out.Rows, 32), 1, bind)
		} else {
			kQmatvec.dispatch(pl, params, ceilDiv(c.rows, 64), out.Rows, 1, bind)
		}
	}
	return nil
}

// qEmbed plans out[t] = scale * W[tokens[t]] for a block-type table.
func (pl *planner) qEmbed(w *weight, out fusion.BufInfo, outB gpu.Binding, scale float32, tokens int) {
	for _, c := range w.chunks {
		params := shaders.QParams{InCols: u(out.Cols), OutCols: u(out.Cols), RowBase: u(c.rowBase), Rows: u(c.rows), QT: w.qt, Scale: scale, OutF16: b2u(out.F16)}
		kQembed.dispatch(pl, params, ceilDiv(out.Cols, 64), tokens, 1,
			qblocksBindings{Step: pl.stepB(), XW: pl.none(), W: gpu.Binding{Buf: c.w}, Bias: pl.none(), OutW: outB})
	}
}
