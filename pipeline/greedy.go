package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline/arch"
)

// ErrDeviceID reports a token id from the device (argmax or sampling) that is not a
// vocabulary id: a backend bug, reported rather than fed back.
var ErrDeviceID = errors.New("pipeline: device returned an invalid token id")

// deviceGreedy reports whether decoding with opts picks its tokens on the
// device: greedy decoding by a program ending in fusion.Argmax, sampling
// (temperature > 0) by one ending in fusion.Sample with opts' rule, which
// draws the token gpu/sampler would from the same logits, and makes
// it sl.step. Both programs are compiled at load (compilePickers); a new
// rule goes into the sampling program's step tensor (gpu.Caps.Sampling),
// or on a backend whose program cannot take it, into a program compiled
// again. The caller holds sl. A backend without the op falls back to host
// sampling, and so does a grammar on a program that takes no token mask.
func (m *Model) deviceGreedy(sl *slot, opts *GenerateOptions) (bool, error) {
	m.mu.Lock()
	off := m.greedyOff
	m.mu.Unlock()
	if off {
		return false, nil
	}
	if m.batch != nil {
		// Greedy and sampling sessions join the batched rounds (their
		// rows' logits come back for the host's pick, the same algorithm):
		// the rounds read the weights once for every session decoding at
		// once.
		return false, nil
	}
	if !(opts.Temperature > 0) || opts.TopK == 1 {
		if sl.greedy == nil {
			p, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Argmax: true})
			if ok, err := m.deviceOp(err); !ok {
				return false, err
			}
			sl.greedy = p
		}
		sl.step = sl.greedy
		return true, nil
	}
	rule := fusion.Sampling{Temperature: opts.Temperature, TopK: opts.TopK, TopP: opts.TopP, Seed: opts.Seed}
	if m.caps.Sampling && sl.sample != nil && sl.rule != rule {
		// The rule lives in the program's step tensor: no recompiling.
		switch err := sl.sample.SetSampling(rule); {
		case err == nil:
			sl.rule = rule
		case !errors.Is(err, gpu.ErrUnsupported):
			return false, fmt.Errorf("pipeline: sampling rule: %w", err)
		}
	}
	if sl.sample == nil || sl.rule != rule {
		if sl.sample != nil {
			sl.sample.Release()
			sl.sample = nil
		}
		p, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Sample: &rule})
		if ok, err := m.deviceOp(err); !ok {
			return false, err
		}
		sl.sample, sl.rule = p, rule
	}
	sl.step = sl.sample
	return true, nil
}

// deviceOp sorts the error of compiling a token-picking program: ok when
// it compiled; a backend without the op turns device picking off.
func (m *Model) deviceOp(err error) (ok bool, _ error) {
	if errors.Is(err, gpu.ErrUnsupported) {
		m.mu.Lock()
		m.greedyOff = true
		m.mu.Unlock()
		return false, nil
	}
	return err == nil, err
}

// stepGreedy runs the last token of context through sl.step (the argmax or
// sampling decode program) and returns the next token id: one value crosses from the device
// instead of a row of logits. The cache must hold every other token of
// context, as it does between decode steps; ok is false (and nothing ran)
// otherwise, so the caller takes the general path. The caller holds sl.
func (m *Model) stepGreedy(ctx context.Context, sl *slot, context []int) (id int, ok bool, err error) {
	n := len(context)
	if n == 0 || n > m.maxCache || len(sl.cached) != n-1 || !slices.Equal(sl.cached, context[:n-1]) {
		return 0, false, nil
	}
	var out [1]float32
	if err := m.run(ctx, sl.step, []int32{int32(context[n-1])}, n-1, out[:]); err != nil {
		return 0, true, err
	}
	sl.cached = append(sl.cached, context[n-1])
	v := out[0]
	if !(v >= 0 && v < float32(m.cfg.VocabSize)) || v != float32(math.Trunc(float64(v))) {
		return 0, true, fmt.Errorf("%w: %v for a vocabulary of %d", ErrDeviceID, v, m.cfg.VocabSize)
	}
	return int(v), true, nil
}

// stepMany runs up to n decode steps of sl.step in one submission
// (gpu.Program.RunSteps) from the last token of context and returns the picked
// ids: n, or fewer when the device picked one of stops (then the last).
// The cache must hold every other token of context; ok is false (and
// nothing ran) otherwise, or when the program runs one step per
// submission, so the caller takes stepGreedy or the general path. The
// caller holds sl.
func (m *Model) stepMany(ctx context.Context, sl *slot, context []int, n int, stops []int32) (ids []int, ok bool, err error) {
	nc := len(context)
	if m.caps.MaxSteps < 2 || n < 2 || nc == 0 || nc-1+n > m.maxCache || len(sl.cached) != nc-1 || !slices.Equal(sl.cached, context[:nc-1]) {
		return nil, false, nil
	}
	m.lockDevice()
	got, err := sl.step.RunSteps(ctx, int32(context[nc-1]), nc-1, n, stops)
	m.unlockDevice()
	if err != nil {
		return nil, true, fmt.Errorf("pipeline: %d decode steps at position %d: %w", n, nc-1, err)
	}
	ids = make([]int, len(got))
	for i, v := range got {
		if v < 0 || int(v) >= m.cfg.VocabSize {
			return nil, true, fmt.Errorf("%w: %d for a vocabulary of %d", ErrDeviceID, v, m.cfg.VocabSize)
		}
		ids[i] = int(v)
	}
	// Every step but the last ran the id the one before it picked.
	sl.cached = append(sl.cached, context[nc-1])
	sl.cached = append(sl.cached, ids[:len(ids)-1]...)
	return ids, true, nil
}

// deviceStops returns the stop ids the device checks in a multi-step
// submission: g's stop tokens, sorted, when there are at most
// the backend's Caps().MaxStops of them; with more the device checks none and the host
// (which checks every id anyway) ends generation at the first.
func (g *generation) deviceStops(most int) []int32 {
	if len(g.stops) > most {
		return nil
	}
	out := make([]int32, 0, len(g.stops))
	for id := range g.stops {
		out = append(out, int32(id))
	}
	slices.Sort(out)
	return out
}
