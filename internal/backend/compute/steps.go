package compute

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// SetSampling (gpu.Program, Caps().Sampling) for a decode program ending in
// fusion.Sample: the rule goes into the step tensor with the next run.
func (p *program) SetSampling(r fusion.Sampling) error {
	if p.rule == nil {
		return fmt.Errorf("compute: set sampling: the program does not sample from its step tensor: %w", gpu.ErrUnsupported)
	}
	if err := r.Validate(); err != nil {
		// The caller's rule comes from validated options: an invariant.
		return fmt.Errorf("compute: set sampling: %w", err)
	}
	*p.rule = r
	return nil
}

// SetTokenMask (gpu.Program) for a program ending in
// fusion.Argmax or fusion.Sample: the mask buffer the picking kernel reads
// is written now, before the next run.
func (p *program) SetTokenMask(allowed []uint64) error {
	if p.mask == nil {
		return fmt.Errorf("compute: set token mask: the program picks no token: %w", gpu.ErrUnsupported)
	}
	if allowed != nil && len(allowed) != (p.maskN+63)/64 {
		return fmt.Errorf("compute: set token mask: %w: %d words for a vocabulary of %d (want %d)", fusion.ErrInvalid, len(allowed), p.maskN, (p.maskN+63)/64)
	}
	p.maskBytes = shaders.EncodeTokenMask(p.maskBytes, p.maskN, allowed)
	if err := p.b.dev.Write(p.mask, 0, p.maskBytes); err != nil {
		return fmt.Errorf("compute: set token mask: %w", err)
	}
	p.masked = allowed != nil
	return nil
}

// multiStep holds what RunSteps adds to a one-token decode program: the
// advance kernel's parameters (none where the picking kernel advances)
// (one slot per step index) and a command list per step count, recorded
// on first use.
type multiStep struct {
	params gpu.Buffer
	lists  map[stepsKey]gpu.Commands
	// stamps makes the lists recorded from now on bracket their steps
	// with timestamps 0 and 1 (device time of the whole submission), for
	// the host-overhead benchmark.
	stamps bool
}

// stepsKey names a recorded multi-step list.
type stepsKey struct {
	n    int
	span int // lenlists.go
	// first is the index of the list's first step in its window
	// (StartSteps; 0 for RunSteps), which the advance kernel's
	// parameters name (0 where the picking kernel advances: its index is
	// the step tensor's count).
	first int
	// stamps is 1 + the first of the two timestamp slots around the
	// list's steps, 0 for none.
	stamps int
}

// stepTensor reports whether g's step buffer is a shaders.DecodeStep: a
// one-token, unbatched graph.
func stepTensor(g *fusion.Graph) bool { return g.Tokens == 1 && !g.Batch }

// pickedBuf returns the output of g's picking op (Argmax or Sample).
func pickedBuf(g *fusion.Graph) (fusion.Buf, bool) {
	for i := len(g.Ops) - 1; i >= 0; i-- {
		switch op := g.Ops[i].(type) {
		case *fusion.ArgmaxOp:
			return op.Out, true
		case *fusion.SampleOp:
			return op.Out, true
		}
	}
	return 0, false
}

// RunSteps (gpu.Program, Caps().MaxSteps): the step tensor is written once, the
// decode items are recorded n times, each copy followed by the advance
// kernel (wgsl/step.wgsl) unless its picking kernel advanced the step
// itself (picksAdvance, the usual case), and the tensor is read back once.
func (p *program) RunSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, error) {
	out, err := p.checkSteps(ctx, token, pos, n, stops)
	if err != nil {
		return nil, err
	}
	cmds, err := p.stepList(out, n, p.span(pos+n))
	if err != nil {
		return nil, fmt.Errorf("compute: run steps: %w", err)
	}
	st := p.encodeStep(stepWords{Pos: uint32(pos), Rows: 1, Tokens: []uint32{uint32(token)}, Steps: uint32(n), Stops: stops})
	p.lastT = 0
	if err := p.b.dev.Write(p.step, 0, st); err != nil {
		return nil, fmt.Errorf("compute: run steps: %w", err)
	}
	setStates(p.states, -1) // unknown until the device reports its steps
	if err := p.b.dev.Submit(cmds); err != nil {
		return nil, fmt.Errorf("compute: run steps: %w", err)
	}
	// While the device runs these steps, record the list of the next n
	// where they cross into a longer span (lenlists.go): its recording
	// (some ms for 8 steps) then overlaps this submission rather than
	// adding to the next one's time. A list that fails to record is not
	// kept: the call that needs it records it again and reports the error.
	if next := pos + 2*n; next <= p.maxLen {
		if span := p.span(next); span != p.span(pos+n) {
			_, _ = p.stepList(out, n, span)
		}
	}
	if err := waitSubmitted(ctx, p.b.dev); err != nil {
		return nil, fmt.Errorf("compute: run steps: %w", err)
	}
	raw := make([]byte, shaders.DecodeStepHeader+4*n)
	if err := p.b.dev.Read(p.step, 0, raw); err != nil {
		return nil, fmt.Errorf("compute: run steps: %w", err)
	}
	got, err := decodeStep(raw)
	if err != nil {
		return nil, err
	}
	if got.Count < 1 || int(got.Count) > n || got.ValidLen != uint32(pos)+got.Count {
		return nil, fmt.Errorf("compute: run steps: the device reports %d ids and %d valid positions after %d steps from %d", got.Count, got.ValidLen, n, pos)
	}
	ids := make([]int32, got.Count)
	for i := range ids {
		ids[i] = int32(got.IDs[i])
	}
	// The steps after a stop ran no rows: the states end with the last
	// step that ran.
	setStates(p.states, pos+int(got.Count))
	// Logits (the picked id's buffer) holds the last step's pick.
	p.lastT = 1
	return ids, nil
}

// decodeStep decodes the first bytes of a step tensor (its header and
// some of its ids; the rest read as zero).
func decodeStep(raw []byte) (shaders.DecodeStep, error) {
	var got shaders.DecodeStep
	full := make([]byte, binary.Size(got))
	copy(full, raw)
	if _, err := binary.Decode(full, binary.LittleEndian, &got); err != nil {
		return got, err
	}
	return got, nil
}

// checkSteps checks RunSteps' arguments (and StartSteps' with n its
// window's steps) and returns the program's picked buffer.
func (p *program) checkSteps(ctx context.Context, token int32, pos, n int, stops []int32) (fusion.Buf, error) {
	if p.cmds == nil {
		return 0, fmt.Errorf("%w: program released", ErrRun)
	}
	out, ok := pickedBuf(p.g)
	if !stepTensor(p.g) || !ok {
		return 0, fmt.Errorf("%w: RunSteps needs a one-token graph ending in Argmax or Sample: %w", ErrRun, gpu.ErrUnsupported)
	}
	if p.masked && n > 1 {
		return 0, fmt.Errorf("%w: %d steps under a token mask (each step's mask depends on the token before it: Run one at a time)", ErrRun, n)
	}
	if n < 1 || n > shaders.MaxSteps {
		return 0, fmt.Errorf("%w: %d steps, want 1..%d", ErrRun, n, shaders.MaxSteps)
	}
	if len(stops) > shaders.MaxStops {
		return 0, fmt.Errorf("%w: %d stop ids, the device checks at most %d", ErrRun, len(stops), shaders.MaxStops)
	}
	if err := gpu.CheckStep(p.g, 1, pos, p.maxLen); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrRun, err)
	}
	if err := gpu.CheckStep(p.g, 1, pos+n-1, p.maxLen); err != nil {
		return 0, fmt.Errorf("%w: %d steps: %w", ErrRun, n, err)
	}
	if p.vocab > 0 && (token < 0 || int(token) >= p.vocab) {
		return 0, fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrRun, token, p.vocab)
	}
	if p.inputCols > 0 || p.poolRows > 0 {
		// Each step's rows are the token it picked, not input rows.
		return 0, fmt.Errorf("%w: RunSteps of a graph with an input or pooling op: %w", ErrRun, gpu.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("compute: run steps: %w", err)
	}
	for _, c := range p.states {
		if err := checkState(c, pos); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrRun, err)
		}
	}
	return out, nil
}

// TimeSteps (gpu.Program, where Caps().Timestamps): RunSteps on the
// step list recorded with timestamps 0 and 1 around its dispatches (kept
// beside the untimed one), then those two read back. The device's
// timestamp slots are shared: the caller holds the device, as for
// Profile.
func (p *program) TimeSteps(ctx context.Context, token int32, pos, n int, stops []int32) ([]int32, uint64, error) {
	if !p.b.devCaps.Timestamps {
		return nil, 0, fmt.Errorf("compute: timed decode steps: the device keeps no timestamps: %w", gpu.ErrUnsupported)
	}
	was := p.multi.stamps
	p.multi.stamps = true
	ids, err := p.RunSteps(ctx, token, pos, n, stops)
	p.multi.stamps = was
	if err != nil {
		return nil, 0, err
	}
	ts, err := p.b.dev.ReadTimestamps(2)
	if err != nil {
		return nil, 0, fmt.Errorf("compute: timed decode steps: %w", err)
	}
	if ts[1] < ts[0] {
		return nil, 0, fmt.Errorf("compute: timed decode steps: the device's timestamps run backwards (%d, then %d)", ts[0], ts[1])
	}
	return ids, ts[1] - ts[0], nil
}

// stepList returns the command list of n steps for span, recording it on
// first use.
func (p *program) stepList(out fusion.Buf, n, span int) (gpu.Commands, error) {
	stampAt := -1
	if p.multi.stamps {
		stampAt = 0
	}
	return p.stepListAt(out, n, span, 0, stampAt)
}

// stepListAt returns the command list of n steps for span, the first
// being step first of its window, with timestamps stampAt and stampAt+1
// around them (stampAt -1: none), recording it on first use.
func (p *program) stepListAt(out fusion.Buf, n, span, first, stampAt int) (gpu.Commands, error) {
	ms := &p.multi
	if p.picksAdvance {
		first = 0
	}
	if first < 0 || first+n > shaders.MaxSteps {
		return nil, fmt.Errorf("%w: steps %d..%d of a window", ErrRun, first, first+n-1)
	}
	key := stepsKey{n: n, span: span, first: first, stamps: stampAt + 1}
	if c, ok := ms.lists[key]; ok {
		return c, nil
	}
	if ms.lists == nil {
		ms.lists = map[stepsKey]gpu.Commands{}
	}
	var adv gpu.Kernel
	if !p.picksAdvance {
		if ms.params == nil {
			params := make([]byte, shaders.MaxSteps*paramSlot)
			for i := range shaders.MaxSteps {
				b, err := shaders.Encode(shaders.AdvanceParams{Index: uint32(i)})
				if err != nil {
					return nil, err
				}
				copy(params[i*paramSlot:], b)
			}
			buf, err := p.b.newFilled(params)
			if err != nil {
				return nil, err
			}
			p.owned = append(p.owned, buf)
			ms.params = buf
		}
		k, err := p.b.kernel(kAdvance.Name(), shaders.Variant{})
		if err != nil {
			return nil, err
		}
		adv = k
	}
	cmds, err := p.b.dev.NewCommands()
	if err != nil {
		return nil, err
	}
	if stampAt >= 0 {
		if err := cmds.Timestamp(stampAt); err != nil {
			cmds.Release()
			return nil, err
		}
	}
	for s := range n {
		if err := p.appendItems(cmds, span); err != nil {
			cmds.Release()
			return nil, err
		}
		if p.picksAdvance {
			continue // the picking kernel advanced the step
		}
		bind := append([]gpu.Binding{{Buf: ms.params, Offset: int64((first + s) * paramSlot), Size: paramBytes}},
			stepBindings{Picked: gpu.Binding{Buf: p.bufs[out]}, St: gpu.Binding{Buf: p.step}}.list()...)
		if err := cmds.Dispatch(adv, bind, 1, 1, 1); err != nil {
			cmds.Release()
			return nil, fmt.Errorf("advance: %w", err)
		}
	}
	if stampAt >= 0 {
		if err := cmds.Timestamp(stampAt + 1); err != nil {
			cmds.Release()
			return nil, err
		}
	}
	if err := cmds.Finish(); err != nil {
		cmds.Release()
		return nil, err
	}
	ms.lists[key] = cmds
	return cmds, nil
}

// appendItems records the planned items for span (no timestamps) into
// cmds.
func (p *program) appendItems(cmds gpu.Commands, span int) error {
	slot := 0
	for _, it := range p.items {
		if it.kernel == "" {
			if err := cmds.Copy(it.copyDst, 0, it.copySrc, 0, it.copySize); err != nil {
				return err
			}
			continue
		}
		k, err := p.b.kernel(it.kernel, it.variant)
		if err != nil {
			return err
		}
		bind := append([]gpu.Binding{{Buf: p.params, Offset: int64(slot * paramSlot), Size: paramBytes}}, it.bindings...)
		x, y, z := it.grid(span)
		if err := cmds.Dispatch(k, bind, x, y, z); err != nil {
			return fmt.Errorf("%s: %w", it.kernel, err)
		}
		slot++
	}
	return nil
}

// releaseSteps frees the multi-step command lists.
func (p *program) releaseSteps() {
	for _, c := range p.multi.lists {
		c.Release()
	}
	p.multi = multiStep{stamps: p.multi.stamps}
}
