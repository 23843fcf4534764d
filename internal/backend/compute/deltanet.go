package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// deltaNet plans a DeltaNet (Qwen3.5's Gated DeltaNet core) in two
// dispatches: the convolution with its window, SiLU and the q and k
// heads' L2 norms (wgsl/deltaconv.wgsl, a workgroup per head of D
// channels) into f32 scratch rows, then the recurrence on them
// (wgsl/deltanet.wgsl, a workgroup per value head): delta_chunk, the
// chunked form, for a graph of several tokens (prefill), delta_rule, the
// recurrent form, for one token (decode). A batched step dispatches both
// once per row with delta_rule, binding that row's sequence's state (as
// shortConv does). The scratch is shared by every layer.
//
// It refuses (gpu.ErrUnsupported) what the kernels do not run: head dims
// past shaders.DeltaMaxHeadDim, and taps other than f32, f16 or bf16 in
// one binding (GGUF keeps ssm_conv1d f32; gpurun convert's f16 recipe
// and Hugging Face's bf16 checkpoints do not).
func (pl *planner) deltaNet(op *fusion.DeltaNetOp) error {
	g := pl.p.g
	out := g.Bufs[op.Out]
	if op.HeadDim > shaders.DeltaMaxHeadDim {
		return fmt.Errorf("gated_delta_net of head dim %d: the kernels take at most %d: %w", op.HeadDim, shaders.DeltaMaxHeadDim, gpu.ErrUnsupported)
	}
	w, ok := pl.ws.byName[op.Conv]
	if !ok {
		return fmt.Errorf("gated_delta_net taps %q not loaded", op.Conv)
	}
	if w.quant || w.qt != shaders.BlockNone || len(w.chunks) != 1 ||
		(w.wt != shaders.WeightF32 && w.wt != shaders.WeightF16 && w.wt != shaders.WeightBF16) {
		return fmt.Errorf("gated_delta_net taps %q of type %d (block type %d, %d chunks): the kernel reads f32, f16 or bf16 taps in one binding: %w",
			op.Conv, w.wt, w.qt, len(w.chunks), gpu.ErrUnsupported)
	}
	heads := 2*op.KeyHeads + op.ValueHeads
	if heads > maxDispatch {
		return fmt.Errorf("gated_delta_net of %d heads exceeds one dispatch: %w", heads, gpu.ErrUnsupported)
	}
	var vecs [2]gpu.Binding
	for i, name := range []string{op.DtBias, op.A} {
		b, _, err := pl.vector(name)
		if err != nil {
			return err
		}
		vecs[i] = b
	}
	xs, err := pl.grow(&pl.deltaXS, &pl.deltaXSLen,
		int64(shaders.DeltaScratch(out.Rows, op.KeyHeads, op.ValueHeads, op.HeadDim))*4)
	if err != nil {
		return err
	}
	qkv, beta, alpha, o := pl.buf(op.QKV), pl.buf(op.Beta), pl.buf(op.Alpha), pl.buf(op.Out)
	prm := shaders.DeltaParams{KeyHeads: u(op.KeyHeads), ValueHeads: u(op.ValueHeads), HeadDim: u(op.HeadDim), Width: u(op.Width),
		NRows: u(out.Rows), Eps: op.Eps, QKVF16: pl.h(qkv), BetaF16: pl.h(beta), AlphaF16: pl.h(alpha), OutF16: b2u(out.F16),
		PosAt: u(pl.p.posAt), WT: uint32(w.wt)}
	conv := deltaconvBindings{Step: pl.stepB(), QkvW: qkv, Conv: gpu.Binding{Buf: w.chunks[0].w}, Xs: xs}
	rule := deltanetBindings{Step: pl.stepB(), BetaW: beta, AlphaW: alpha, DtBias: vecs[0], A: vecs[1], Xs: xs, OutW: o}
	recur := kDeltaRule
	if !g.Batch && g.Tokens > 1 {
		recur = kDeltaChunk
	}
	pl.p.states = pl.caches
	run := func(c *kvCache) {
		conv.State = gpu.Binding{Buf: c.state[op.Layer]}
		rule.State = conv.State
		kDeltaConv.dispatch(pl, prm, heads, 1, 1, conv)
		recur.dispatch(pl, prm, op.ValueHeads, 1, 1, rule)
	}
	if !g.Batch {
		run(pl.caches[0])
		return nil
	}
	for r, c := range pl.caches {
		prm.Row0 = u(r)
		run(c)
	}
	return nil
}

// sigmoidGate plans a SigmoidGate (out = in ⊙ sigmoid(gate)) as the glu
// kernel in its sigmoid mode (a the gate, b the input): a gate of one
// column scales each row by its one value (ACols 1), and an output that
// is the input (Qwen3.5's gated attention output) is gated where it lies
// (InPlace), with no copy aside.
func (pl *planner) sigmoidGate(op *fusion.SigmoidGateOp) {
	g := pl.p.g
	out := g.Bufs[op.Out]
	gate := pl.buf(op.Gate)
	prm := shaders.EltParams{Cols: u(out.Cols), NRows: u(out.Rows), OutF16: b2u(out.F16), AF16: pl.h(gate), Sigmoid: 1}
	if g.Bufs[op.Gate].Cols == 1 {
		prm.ACols = 1
	}
	in := pl.none()
	if op.In == op.Out {
		prm.InPlace = 1
	} else {
		in = pl.buf(op.In)
		prm.BF16 = pl.h(in)
	}
	kGlu.dispatch(pl, prm, ceilDiv(out.Cols, 64), out.Rows, 1, elementwiseBindings{Step: pl.stepB(), AW: gate, BW: in, OutW: pl.buf(op.Out)})
}
