package compute

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// The ops of a vision encoder and of the text step that takes its
// embeddings, in modes of the kernels the language model runs (no entry
// point of their own):
//
//   - SelfAttn: the step's K and V rows go into a private f32 cache of
//     the step's rows (store_kv with pos_at POS_AT_ROW: row t at position
//     t, whatever the run's position), then the attention kernels
//     chooseAttention picks attend to it non-causally (AttnParams.NonCausal:
//     every row sees every row), as an unbatched step's Attention does.
//   - AvgPool: the scale kernel over a pooling grid (EltParams.PoolSide),
//     the cells summed in the CPU's order, then times 1/kernel².
//   - Input: SetInput writes the host's rows into an f32 input buffer; the
//     op is the scale kernel's copy of it (times 1: exact) into Out, in
//     Out's activation format.

// selfAttention plans a SelfAttn op.
func (pl *planner) selfAttention(op *fusion.SelfAttnOp) error {
	if op.HeadDim > maxHeadDim {
		return fmt.Errorf("head dim %d over %d: %w", op.HeadDim, maxHeadDim, gpu.ErrUnsupported)
	}
	g := pl.p.g
	T := g.Tokens
	spec := fusion.KVSpec{Layers: 1, KVHeads: op.KVHeads, HeadDim: op.HeadDim, MaxLen: T}
	kvCols := op.KVHeads * op.HeadDim
	kc, vc, err := pl.selfCache(int64(T) * int64(kvCols) * 4)
	if err != nil {
		return err
	}
	k, v := pl.buf(op.K), pl.buf(op.V)
	storeKernel(spec).dispatch(pl, shaders.KVParams{KVCols: u(kvCols), HeadDim: u(op.HeadDim), MaxLen: u(T), PosAt: shaders.PosAtRow,
		KF16: pl.h(k), VF16: pl.h(v)}, ceilDiv(op.KVHeads*kvWords(spec, 0), 64), T, 1,
		kvBindings{Step: pl.stepB(), KW: k, VW: v, Kc: kc, Vc: vc})
	ap := shaders.AttnParams{Heads: u(op.Heads), KVHeads: u(op.KVHeads), HeadDim: u(op.HeadDim), MaxLen: u(T),
		Scale: op.Scale, PosAt: shaders.PosAtRow, OutF16: b2u(g.Bufs[op.Out].F16), QF16: pl.h(pl.buf(op.Q)), NonCausal: 1}
	return pl.attend(ap, false, false, attentionBindings{Step: pl.stepB(), QW: pl.buf(op.Q), Kc: kc, Vc: vc, OutW: pl.buf(op.Out), Sinks: pl.none()})
}

// selfCache is the private K and V cache of the SelfAttn ops, shared by
// every layer (each layer's attention reads it before the next layer's
// store writes it), at least size bytes each.
func (pl *planner) selfCache(size int64) (k, v gpu.Binding, err error) {
	if pl.selfK == nil || pl.selfSize < size {
		if pl.selfK, err = pl.p.newBuf(size); err != nil {
			return k, v, err
		}
		if pl.selfV, err = pl.p.newBuf(size); err != nil {
			return k, v, err
		}
		pl.selfSize = size
	}
	return gpu.Binding{Buf: pl.selfK, Size: align4(size)}, gpu.Binding{Buf: pl.selfV, Size: align4(size)}, nil
}

// avgPool plans an AvgPool op. The run checks the step's rows
// (program.poolRows).
func (pl *planner) avgPool(op *fusion.AvgPoolOp) {
	g := pl.p.g
	out, in := g.Bufs[op.Out], pl.buf(op.In)
	pl.p.poolRows = op.Side * op.Side
	kScale.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), Cap: 1 / float32(op.Kernel*op.Kernel), NRows: u(out.Rows), OutF16: b2u(out.F16),
		AF16: pl.h(in), ACols: u(out.Cols), PoolSide: u(op.Side), PoolKernel: u(op.Kernel)},
		ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: in, BW: pl.none(), OutW: pl.buf(op.Out)})
}

// inputOp plans an Input op: the program's input buffer (f32 rows,
// SetInput) copied into Out.
func (pl *planner) inputOp(op *fusion.InputOp) error {
	out := pl.p.g.Bufs[op.Out]
	b, err := pl.p.newBuf(int64(out.Rows) * int64(out.Cols) * 4)
	if err != nil {
		return err
	}
	pl.p.input, pl.p.inputCols = b, out.Cols
	in := gpu.Binding{Buf: b}
	kScale.dispatch(pl, shaders.EltParams{Cols: u(out.Cols), Cap: 1, NRows: u(out.Rows), OutF16: b2u(out.F16), ACols: u(out.Cols)},
		ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: in, BW: pl.none(), OutW: pl.buf(op.Out)})
	return nil
}

// SetInput (gpu.Program) for a program whose graph has a fusion.InputOp:
// the rows (whole rows of the op's width; those past the step's Tokens
// are dropped) are written to the device now, for the runs that follow.
func (p *program) SetInput(rows []float32) error {
	if p.inputCols == 0 {
		return fmt.Errorf("compute: set input: the graph has no %s op: %w", fusion.Input, gpu.ErrUnsupported)
	}
	if len(rows)%p.inputCols != 0 {
		return fmt.Errorf("compute: set input: %w: %d values are not rows of %d", fusion.ErrInvalid, len(rows), p.inputCols)
	}
	n := min(len(rows), p.g.Tokens*p.inputCols)
	raw := make([]byte, 4*n)
	for i, v := range rows[:n] {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	p.inputRows = 0
	if n > 0 {
		if err := p.b.dev.Write(p.input, 0, raw); err != nil {
			return fmt.Errorf("compute: set input: %w", err)
		}
	}
	p.inputRows = n / p.inputCols
	return nil
}

// checkVisionStep checks a run of n rows against what the vision ops
// need: the input's rows (SetInput) and the pooling grid's.
func (p *program) checkVisionStep(n int) error {
	if p.inputCols > 0 && p.inputRows < n {
		return fmt.Errorf("%w: input of %d rows for a step of %d (gpu.Program.SetInput)", gpu.ErrStep, p.inputRows, n)
	}
	if p.poolRows > 0 && n != p.poolRows {
		return fmt.Errorf("%w: avg_pool of %d cells in a step of %d rows", gpu.ErrStep, p.poolRows, n)
	}
	return nil
}
