package pipeline

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// StepProfile is one profiled step: which program ran, on how many tokens
// at which position, and the device time and work of each op.
type StepProfile struct {
	Step   string // "prefill" or "decode"
	Tokens int
	Pos    int
	Ops    []gpu.OpTime
}

// Profile runs one prefill step of the first min(promptLen, bucket) tokens
// of a prompt at position 0 and, after the rest of the prompt (run
// unprofiled), one decode step at position promptLen, each with device
// timestamps around every op (the backend must report gpu.Caps.Timestamps:
// the GPU backends on a device with timestamps). It overwrites the KV
// cache of the slot it takes, so the next generation there recomputes its
// prompt.
func (m *Model) Profile(ctx context.Context, prompt []int) ([]StepProfile, error) {
	if len(prompt) == 0 || len(prompt)+1 > m.maxCache {
		return nil, fmt.Errorf("%w: profile: %d prompt tokens for a cache of %d", ErrPrompt, len(prompt), m.maxCache)
	}
	sl, err := m.acquire(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer m.release(sl)
	sl.cut(0) // whatever happens, the cache no longer holds a known prefix (nor its checkpoints)
	var out []StepProfile
	run := func(name string, prog gpu.Program, ids []int, pos int) error {
		if !m.caps.Timestamps {
			return fmt.Errorf("pipeline: profile: the %s backend keeps no device timestamps: %w", m.backend.Info().Backend, gpu.ErrUnsupported)
		}
		tokens := make([]int32, len(ids))
		for i, id := range ids {
			tokens[i] = int32(id)
		}
		m.lockDevice()
		ops, err := prog.Profile(ctx, tokens, pos)
		m.unlockDevice()
		if err != nil {
			return fmt.Errorf("pipeline: profile %s: %w", name, err)
		}
		out = append(out, StepProfile{Step: name, Tokens: len(ids), Pos: pos, Ops: ops})
		return nil
	}
	n := 0
	if len(prompt) > 1 && len(sl.prefill) > 0 {
		var prog gpu.Program
		prog, n = sl.pick(len(prompt))
		if err := run("prefill", prog, prompt[:n], 0); err != nil {
			return nil, err
		}
	}
	if n < len(prompt) && n > 0 {
		// The rest of the prompt, unprofiled, so that the decode step
		// attends to as many positions as the test's first one does.
		sl.cached = append([]int(nil), prompt[:n]...)
		if _, err := m.feed(ctx, sl, prompt, nil); err != nil {
			sl.cut(0)
			return nil, fmt.Errorf("pipeline: profile: %w", err)
		}
		sl.cut(0)
		n = len(prompt)
	}
	// The decode step feeds the prompt's last token again: any id does.
	if err := run("decode", sl.decode, prompt[len(prompt)-1:], n); err != nil {
		return nil, err
	}
	return out, nil
}
