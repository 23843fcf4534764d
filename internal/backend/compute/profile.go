package compute

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// OpTime is gpu's: the programs of this backend profile every op and
// count the work of the matrix kernels.
type OpTime = gpu.OpTime

// Profile (gpu.Program, where Caps().Timestamps) runs one step with
// timestamps and returns the time of each op that dispatched work, in
// graph order.
func (p *program) Profile(ctx context.Context, tokens []int32, pos int) ([]OpTime, error) {
	if p.cmds == nil {
		return nil, fmt.Errorf("%w: program released", ErrRun)
	}
	if !p.b.devCaps.Timestamps {
		return nil, fmt.Errorf("compute: profile: device timestamps: %w", gpu.ErrUnsupported)
	}
	// The list with timestamps of the step's span, recorded on first use
	// (every span's has the same slots).
	list := func(span int) (gpu.Commands, error) {
		if c, ok := p.profiles[span]; ok {
			return c, nil
		}
		cmds, slots, err := p.recordList(true, span)
		if err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
		if p.profiles == nil {
			p.profiles = map[int]gpu.Commands{}
		}
		p.profiles[span], p.profileSlots = cmds, slots
		return cmds, nil
	}
	if err := p.run(ctx, tokens, pos, list); err != nil {
		return nil, err
	}
	ts, err := p.b.dev.ReadTimestamps(len(p.profileSlots))
	if err != nil {
		return nil, fmt.Errorf("compute: profile: %w", err)
	}
	kvElem := int64(4)
	if p.g.KV.F16 {
		kvElem = 2
	}
	work := map[int]*OpTime{}
	for _, it := range p.items {
		if it.kernel == "" {
			continue
		}
		w := work[it.op]
		if w == nil {
			w = &OpTime{}
			work[it.op] = w
		}
		name := it.kernel
		if it.variant.Key != "" {
			name += "." + it.variant.Key
		}
		if !slices.Contains(w.Kernels, name) {
			w.Kernels = append(w.Kernels, name)
		}
		w.Bytes += it.cost.Bytes
		w.FLOPs += it.cost.FLOPs
	}
	out := make([]OpTime, 0, len(p.profileSlots)-1)
	for i := 0; i+1 < len(p.profileSlots); i++ {
		op := p.profileSlots[i]
		var d uint64
		if ts[i+1] > ts[i] {
			d = ts[i+1] - ts[i]
		}
		ot := OpTime{Op: op, Kind: p.g.Ops[op].Kind(), Nanos: d}
		if w := work[op]; w != nil {
			ot.Kernels, ot.Bytes, ot.FLOPs = w.Kernels, w.Bytes, w.FLOPs
		}
		if ot.Bytes == 0 && ot.FLOPs == 0 {
			// Not a matrix product: its work from the op and the step.
			c := opWork(p.g, p.g.Ops[op], pos, len(tokens), kvElem)
			ot.Bytes, ot.FLOPs = c.Bytes, c.FLOPs
		}
		out = append(out, ot)
	}
	return out, nil
}

// cost is the work of one dispatch: bytes read and written, and floating
// point operations (a multiply-add counts two).
type cost struct {
	Bytes int64
	FLOPs int64
}

// matCost is the work of a matrix product over rows rows of w (mats
// weights of that shape: 2 for GLU) with cols inputs and tokens tokens:
// every weight byte and scale once, the activations once per token, the
// outputs once.
func matCost(w *weight, rows, cols, tokens, mats int) cost {
	wb := int64(w.wt.ElemsPerWord())
	bytes := int64(rows) * int64(cols) * 4 / wb
	if w.quant {
		sb := int64(4)
		if w.st == shaders.ScaleF16 {
			sb = 2
		}
		bytes += int64(rows) * int64(w.nblk) * sb
	}
	bytes *= int64(mats)
	bytes += int64(tokens) * (int64(cols) + int64(rows)) * 4
	return cost{Bytes: bytes, FLOPs: 2 * int64(mats) * int64(rows) * int64(cols) * int64(tokens)}
}
