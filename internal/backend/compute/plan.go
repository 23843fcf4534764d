package compute

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/shaders"
)

// item is one recorded command: a dispatch (kernel set) or a copy.
type item struct {
	op       int             // index of the graph op the item belongs to
	kernel   string          // entry point, from a contract (kernels_gen.go)
	variant  shaders.Variant // of a specialized kernel
	params   shaders.Params
	bindings []gpu.Binding // after the params binding
	x, y, z  int
	// chunked: y counts attn_split's chunks of the cache, of which a list
	// recorded for a shorter span dispatches the first span (lenlists.go).
	chunked bool
	cost    cost // work of the dispatch, for profiles

	copyDst, copySrc gpu.Buffer
	copySize         int64
}

// planner turns ops into items, then records them with one params buffer
// holding every dispatch's parameters, written once.
type planner struct {
	p        *program
	ws       *weights
	caches   []*kvCache // the program's cache, or a batched step's caches by sequence
	dummy    gpu.Buffer // bound where a kernel's optional input is absent
	scratch  gpu.Buffer // holds an input that aliases the output
	sink     gpu.Buffer // bound at writable slots a kernel leaves unused
	part     gpu.Buffer // attn_split's partials, shared by every layer
	partSize int64
	items    []item
	cur      int // op being planned
	// pro is the norm prologue of the op being planned, which its matrix
	// products run in their kernels (the decode kernels); nil otherwise.
	pro *prologue
	// half tells the buffers holding f16 activations (packed binary16
	// pairs) from f32 ones: the graph's buffers per fusion.BufInfo.F16,
	// the scratch buffer as what was last copied into it.
	half map[gpu.Buffer]bool
	moeB moeBufs // the MoE ops' buffers (moe.go)
	// loraT holds the RowLoRA ops' A·x rows (rowlora.go), made on demand.
	loraT    gpu.Buffer
	loraTLen int64
	// onesBufs are the unit norms' weights of ones, by length.
	onesBufs map[int]gpu.Buffer
	// ssmXBC and ssmY hold the Mamba2 ops' convolved rows and their
	// gated scan outputs (mamba2.go), shared by every layer.
	ssmXBC, ssmY       gpu.Buffer
	ssmXBCLen, ssmYLen int64
	// deltaXS holds the DeltaNet ops' convolved rows and the chunked
	// form's scratch (deltanet.go), shared by every layer.
	deltaXS    gpu.Buffer
	deltaXSLen int64
	// selfK and selfV are the SelfAttn ops' private cache of the step's
	// rows (vision.go), shared by every layer.
	selfK, selfV gpu.Buffer
	selfSize     int64
}

// h is the f16 flag of a kernel's activation binding: 1 when b's buffer
// holds packed halves.
func (pl *planner) h(b gpu.Binding) uint32 { return b2u(pl.half[b.Buf]) }

// prologue is a MatMul kind's RMS-norm prologue, run by matvec_lanes_norm
// and lanes_rope_kv (matmul.wgsl, qkv.wgsl).
type prologue struct {
	scale gpu.Binding // the scale, bound at the kernel's bias slot
	eps   float32
}

func u(v int) uint32 { return uint32(v) }
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (pl *planner) copyBuf(dst, src gpu.Buffer, size int64) {
	pl.items = append(pl.items, item{op: pl.cur, copyDst: dst, copySrc: src, copySize: align4(size)})
}

func (pl *planner) buf(b fusion.Buf) gpu.Binding { return gpu.Binding{Buf: pl.p.bufs[b]} }

// stepB binds the step buffer.
func (pl *planner) stepB() gpu.Binding { return gpu.Binding{Buf: pl.p.step} }

// none binds the dummy buffer, at a read slot a dispatch leaves unused.
func (pl *planner) none() gpu.Binding { return gpu.Binding{Buf: pl.dummy} }

// scales is chunk c's scale binding, or the dummy for an unquantized
// weight's chunk (which has none; its kernels read no scale).
func (pl *planner) scales(c chunk) gpu.Binding {
	if c.sLen == 0 {
		return pl.none()
	}
	return c.scales()
}

func (pl *planner) bytes(b fusion.Buf) int64 { return actBytes(pl.p.g.Bufs[b]) }

// input binds input buffer in of an op writing out, through the scratch
// buffer when it is also the op's output (a buffer bound writable may not
// be bound twice).
func (pl *planner) input(out, in fusion.Buf, copied *bool) gpu.Binding {
	if in != out {
		return pl.buf(in)
	}
	if !*copied {
		pl.copyBuf(pl.scratch, pl.p.bufs[in], pl.bytes(in))
		pl.half[pl.scratch] = pl.p.g.Bufs[in].F16
		*copied = true
	}
	return gpu.Binding{Buf: pl.scratch}
}

func (pl *planner) vector(name string) (gpu.Binding, bool, error) {
	if name == "" {
		return gpu.Binding{Buf: pl.dummy}, false, nil
	}
	w, ok := pl.ws.byName[name]
	if !ok || w.rows != 1 || len(w.chunks) != 1 {
		return gpu.Binding{}, false, fmt.Errorf("vector %q not loaded as a vector", name)
	}
	return gpu.Binding{Buf: w.chunks[0].w}, true, nil
}

// op plans one op of the graph. The planner runs every op whole, in the
// kernels of its family; an op no kernel runs whole (a fused op that
// FusionSupport refuses, which gpu.Fuse leaves unfused) is
// gpu.ErrUnsupported, never split back into its parts here.
func (pl *planner) op(op fusion.Op) error {
	if !(fusionSupport{b: pl.p.b, ws: pl.ws}).Fuses(pl.p.g, op) {
		return fmt.Errorf("%w: no kernel runs this %s whole on the device (fuse the graph with gpu.Fuse, which asks FusionSupport)", gpu.ErrUnsupported, op.Kind())
	}
	switch op := op.(type) {
	case *fusion.EmbedOp:
		return pl.embed(op)
	case *fusion.NormOp, *fusion.AddOp, *fusion.GLUOp, *fusion.ActivationOp, *fusion.SoftCapOp, *fusion.LastRowOp,
		*fusion.ScaleOp, *fusion.ColumnsOp:
		return pl.elementwiseOp(op)
	case *fusion.MatMulOp, *fusion.MultiMatMulOp, *fusion.MatMulGLUOp, *fusion.RowLoRAOp:
		return pl.matMulOp(op)
	case *fusion.RopeOp, *fusion.StoreKVOp, *fusion.RopeStoreKVOp, *fusion.MatMulRopeKVOp, *fusion.AttentionOp:
		return pl.attentionOp(op)
	case *fusion.MoEOp:
		return pl.moe(op)
	case *fusion.ShortConvOp:
		return pl.shortConv(op)
	case *fusion.Mamba2Op:
		return pl.mamba2(op)
	case *fusion.DeltaNetOp:
		return pl.deltaNet(op)
	case *fusion.SigmoidGateOp:
		pl.sigmoidGate(op)
		return nil
	case *fusion.ArgmaxOp, *fusion.SampleOp:
		return pl.pickOp(op)
	case *fusion.SelfAttnOp:
		return pl.selfAttention(op)
	case *fusion.AvgPoolOp:
		pl.avgPool(op)
		return nil
	case *fusion.InputOp:
		return pl.inputOp(op)
	}
	return unsupportedOp(op)
}

// unsupportedOp is the error of an op kind the planner has no kernels for.
func unsupportedOp(op fusion.Op) error {
	return fmt.Errorf("op kind %s: %w", op.Kind(), gpu.ErrUnsupported)
}

// pickOp plans the sampling family: an Argmax or a Sample, one workgroup
// scanning the row (validation made it one row that Out does not alias)
// and writing the id as an f32; none when the step has no rows (a no-op
// step after a stop id).
func (pl *planner) pickOp(op fusion.Op) error {
	g := pl.p.g
	// A decode program whose last op picks the token has that kernel
	// advance the step tensor after its pick, as the advance kernel would
	// after the step's last item (RunSteps); a pick followed by other ops
	// leaves it to the advance kernel, after them.
	adv := uint32(0)
	if stepTensor(g) && len(g.Ops) > 0 && g.Ops[len(g.Ops)-1] == op {
		adv = 1
		pl.p.picksAdvance = true
	}
	switch op := op.(type) {
	case *fusion.ArgmaxOp:
		mask, err := pl.tokenMask(g.Bufs[op.In].Cols)
		if err != nil {
			return err
		}
		kArgmax.dispatch(pl, shaders.ArgmaxParams{N: u(g.Bufs[op.In].Cols), Advance: adv}, 1, 1, 1, argmaxBindings{Step: pl.stepB(), X: pl.buf(op.In), Out: pl.buf(op.Out), Mask: mask})
	case *fusion.SampleOp:
		mask, err := pl.tokenMask(g.Bufs[op.In].Cols)
		if err != nil {
			return err
		}
		r := op.Sampling
		ruleAt := uint32(0)
		if stepTensor(g) {
			// The rule lives in the step tensor, where SetSampling
			// changes it.
			ruleAt = shaders.DecodeStepRuleAt
			pl.p.rule = &r
		}
		n := g.Bufs[op.In].Cols
		kSample.dispatchVariant(pl, shaders.SampleVariant(n), shaders.SampleParams{N: u(n), InvTemperature: sampler.InvTemperature(r.Temperature),
			TopK: u(r.TopK), TopP: r.TopP, SeedLo: uint32(r.Seed), SeedHi: uint32(r.Seed >> 32), RuleAt: ruleAt, Advance: adv},
			cost{}, 1, 1, 1, sampleBindings{Step: pl.stepB(), X: pl.buf(op.In), Out: pl.buf(op.Out), Mask: mask})
	default:
		return unsupportedOp(op)
	}
	return nil
}

// record writes the params buffer and records the command list.
func (pl *planner) record() error {
	p := pl.p
	n := 0
	for _, it := range pl.items {
		if it.kernel != "" {
			n++
		}
	}
	params := make([]byte, max(n, 1)*paramSlot)
	slot := 0
	for _, it := range pl.items {
		if it.kernel == "" {
			continue
		}
		b, err := shaders.Encode(it.params)
		if err != nil {
			return err
		}
		copy(params[slot*paramSlot:], b)
		slot++
	}
	pb, err := p.newBuf(int64(len(params)))
	if err != nil {
		return err
	}
	if err := p.b.dev.Write(pb, 0, params); err != nil {
		return err
	}
	p.items, p.params = pl.items, pb
	for _, it := range pl.items {
		if it.chunked {
			p.chunks = max(p.chunks, it.y)
		}
	}
	// Every kernel the program runs compiles now, in parallel: those of
	// its items and, for a decode program that picks its token, the
	// advance kernel of its multi-step lists (RunSteps), so that no run
	// waits for a compile.
	refs := make([]kernelRef, 0, len(pl.items)+1)
	for _, it := range pl.items {
		if it.kernel != "" {
			refs = append(refs, kernelRef{it.kernel, it.variant})
		}
	}
	if _, ok := pickedBuf(p.g); ok && stepTensor(p.g) && !p.picksAdvance {
		refs = append(refs, kernelRef{name: kAdvance.Name()})
	}
	if err := p.b.compileKernels(context.Background(), refs); err != nil {
		return err
	}
	p.cmds, _, err = p.recordList(false, 0)
	return err
}

// recordList records the planned items for span (0: the whole cache,
// lenlists.go), with timestamps before each op's first item and after the
// last item when timestamps is set; it returns the list and, for
// timestamps, the op index of each slot (the last slot marks the end).
func (p *program) recordList(timestamps bool, span int) (gpu.Commands, []int, error) {
	cmds, err := p.b.dev.NewCommands()
	if err != nil {
		return nil, nil, err
	}
	var slots []int
	stamp := func(op int) error {
		if err := cmds.Timestamp(len(slots)); err != nil {
			return err
		}
		slots = append(slots, op)
		return nil
	}
	fail := func(err error) (gpu.Commands, []int, error) {
		cmds.Release()
		return nil, nil, err
	}
	slot := 0
	for i, it := range p.items {
		if timestamps && (i == 0 || p.items[i-1].op != it.op) {
			if err := stamp(it.op); err != nil {
				return fail(err)
			}
		}
		if it.kernel == "" {
			if err := cmds.Copy(it.copyDst, 0, it.copySrc, 0, it.copySize); err != nil {
				return fail(err)
			}
			continue
		}
		k, err := p.b.kernel(it.kernel, it.variant)
		if err != nil {
			return fail(err)
		}
		bind := append([]gpu.Binding{{Buf: p.params, Offset: int64(slot * paramSlot), Size: paramBytes}}, it.bindings...)
		x, y, z := it.grid(span)
		if err := cmds.Dispatch(k, bind, x, y, z); err != nil {
			return fail(fmt.Errorf("%s: %w", it.kernel, err))
		}
		slot++
	}
	if timestamps {
		if err := stamp(-1); err != nil {
			return fail(err)
		}
	}
	if err := cmds.Finish(); err != nil {
		return fail(err)
	}
	return cmds, slots, nil
}

// tokenMask returns the program's token mask buffer for a vocabulary of n
// tokens (gpu.Program.SetTokenMask), made on first use with no mask set.
func (pl *planner) tokenMask(n int) (gpu.Binding, error) {
	p := pl.p
	if p.mask == nil {
		buf, err := p.newBuf(shaders.TokenMaskBytes(n))
		if err != nil {
			return gpu.Binding{}, err
		}
		if err := p.b.dev.Write(buf, 0, shaders.EncodeTokenMask(nil, n, nil)); err != nil {
			return gpu.Binding{}, err
		}
		p.mask, p.maskN = buf, n
	}
	return gpu.Binding{Buf: p.mask}, nil
}
