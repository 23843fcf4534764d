package kernels

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// OpTime is the device time one op of a graph took in a profiled step.
type OpTime struct {
	Op    int // index in Graph.Ops
	Kind  fusion.Kind
	Nanos uint64
}

// Profiler is implemented by the programs of this backend: Profile is Run
// (same arguments, same effect on the cache and the logits) with device
// timestamps around every op, so passes split at each op and the step runs
// a little slower than Run.
type Profiler interface {
	Profile(ctx context.Context, tokens []int32, pos int) ([]OpTime, error)
}

var _ Profiler = (*program)(nil)

// Profile runs one step with timestamps and returns the time of each op
// that dispatched work, in graph order.
func (p *program) Profile(ctx context.Context, tokens []int32, pos int) ([]OpTime, error) {
	if p.cmds == nil {
		return nil, fmt.Errorf("%w: program released", ErrRun)
	}
	tr, ok := p.b.dev.(gpu.TimestampReader)
	if !ok || !p.b.info.Timestamps {
		return nil, fmt.Errorf("kernels: profile: device timestamps: %w", gpu.ErrUnsupported)
	}
	if p.profile == nil {
		cmds, slots, err := p.recordList(true)
		if err != nil {
			return nil, fmt.Errorf("kernels: profile: %w", err)
		}
		p.profile, p.profileSlots = cmds, slots
	}
	if err := p.run(ctx, tokens, pos, p.profile); err != nil {
		return nil, err
	}
	ts, err := tr.ReadTimestamps(len(p.profileSlots))
	if err != nil {
		return nil, fmt.Errorf("kernels: profile: %w", err)
	}
	out := make([]OpTime, 0, len(p.profileSlots)-1)
	for i := 0; i+1 < len(p.profileSlots); i++ {
		op := p.profileSlots[i]
		var d uint64
		if ts[i+1] > ts[i] {
			d = ts[i+1] - ts[i]
		}
		out = append(out, OpTime{Op: op, Kind: p.g.Ops[op].Kind, Nanos: d})
	}
	return out, nil
}
