package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
)

// ErrDeviceID reports a token id from the device (argmax or sampling) that is not a
// vocabulary id: a backend bug, reported rather than fed back.
var ErrDeviceID = errors.New("pipeline: device returned an invalid token id")

// devicePicker returns the program that picks the tokens of a generation
// with opts on sl, or nil where the host picks them: greedy decoding by a
// program ending in fusion.Argmax, sampling (temperature > 0) by one ending
// in fusion.Sample with opts' rule, which draws the token internal/sampler
// would from the same logits. Both programs are compiled at load
// (compilePickers); a new rule goes into the sampling program's step tensor
// (pickProgram.setsRule), or on a backend whose program cannot take it,
// into a program compiled again. The caller holds sl. A backend without
// the op leaves the picks to the host.
func (m *Model) devicePicker(sl *slot, opts *GenerateOptions) (*pickProgram, error) {
	m.mu.Lock()
	off := m.greedyOff
	m.mu.Unlock()
	if off || m.batch != nil {
		// With batching, greedy and sampling sessions join the batched
		// rounds (their rows' logits come back for the host's pick, the
		// same algorithm): the rounds read the weights once for every
		// session decoding at once.
		return nil, nil
	}
	p := sl.argmax
	if rule, sampled := opts.sampling(); sampled {
		var err error
		if p, err = m.samplingProgram(sl, rule); p == nil {
			return nil, err
		}
		sl.sample = p
	} else if p == nil {
		prog, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Argmax: true})
		if ok, err := m.deviceOp(err); !ok {
			return nil, err
		}
		p = newPickProgram(prog, fusion.Sampling{}, m.caps)
		sl.argmax = p
	}
	return p, nil
}

// samplingProgram returns sl's sampling program with rule: the one it
// holds, its rule changed in place where it can be, or one compiled again;
// nil, nil where the backend lacks the op.
func (m *Model) samplingProgram(sl *slot, rule fusion.Sampling) (*pickProgram, error) {
	if p := sl.sample; p != nil && p.rule != rule && p.setsRule {
		// The rule lives in the program's step tensor: no recompiling.
		switch err := p.prog.SetSampling(rule); {
		case err == nil:
			p.rule = rule
		case !errors.Is(err, gpu.ErrUnsupported):
			return nil, fmt.Errorf("pipeline: sampling rule: %w", err)
		}
	}
	if p := sl.sample; p != nil && p.rule == rule {
		return p, nil
	}
	if sl.sample != nil {
		sl.sample.prog.Release()
		sl.sample = nil
	}
	prog, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Sample: &rule})
	if ok, err := m.deviceOp(err); !ok {
		return nil, err
	}
	return newPickProgram(prog, rule, m.caps), nil
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

// deviceStep is the stepper of a generation whose tokens the device picks
// one step per submission: the last token runs through the argmax or
// sampling program and only the id comes back, not a row of logits. Under
// a grammar (a filter that restricts the tokens) each step's mask is set
// on the program first. The first token, picked from the prefill's logits,
// and any step the cache is not ready for, go to host.
type deviceStep struct {
	host   *hostPick
	prog   *pickProgram
	masked bool // a token mask is set on prog
	picked int  // tokens the device picked (Metrics.DevicePicked)
}

func (d *deviceStep) next(ctx context.Context, history []int, left int) (int, error) {
	if d.host.fresh {
		return d.host.next(ctx, history, left)
	}
	allowed, err := d.host.filter.allowed()
	if err != nil {
		return -1, err
	}
	if allowed != nil {
		if err := d.prog.prog.SetTokenMask(allowed); err != nil {
			return -1, fmt.Errorf("pipeline: token mask: %w", err)
		}
		d.masked = true
	}
	id, ok, err := d.step(ctx, history)
	if err != nil || !ok {
		if err == nil {
			id, err = d.host.next(ctx, history, left)
		}
		return id, err
	}
	d.picked++
	return id, nil
}

// step runs the last token of history through the picking program and
// returns the next id. The cache must hold every other token of history, as
// it does between decode steps; ok is false (and nothing ran) otherwise.
func (d *deviceStep) step(ctx context.Context, history []int) (id int, ok bool, err error) {
	m, sl := d.host.m, d.host.sl
	n := len(history)
	if n == 0 || n > m.maxCache || len(sl.cached) != n-1 || !slices.Equal(sl.cached, history[:n-1]) {
		return 0, false, nil
	}
	var out [1]float32
	if err := m.run(ctx, d.prog.prog, []int32{int32(history[n-1])}, n-1, out[:]); err != nil {
		return 0, true, err
	}
	sl.cached = append(sl.cached, history[n-1])
	v := out[0]
	if !(v >= 0 && v < float32(m.cfg.VocabSize)) || v != float32(math.Trunc(float64(v))) {
		return 0, true, fmt.Errorf("%w: %v for a vocabulary of %d", ErrDeviceID, v, m.cfg.VocabSize)
	}
	return int(v), true, nil
}

// close counts the device's picks and takes the mask off the program: the
// next generation on the slot starts without one.
func (d *deviceStep) close(mt *Metrics) {
	mt.DevicePicked += d.picked
	if d.masked {
		d.prog.prog.SetTokenMask(nil)
	}
	d.host.close(mt)
}

// multiStep is the stepper of an unconstrained generation whose tokens the
// device picks several steps per submission (pickProgram.multiStep): each
// step's id feeds the next step on the device, a stop token ends the
// submission's work there, and the ids come back together, handed out one
// per call. Where fewer than two steps fit, one step runs (single).
type multiStep struct {
	single *deviceStep
	most   int     // steps per submission (Options.StepsPerSubmit)
	stops  []int32 // the stop ids the device checks (deviceStops)
	queue  []int   // ids picked and not handed out: the cache holds the tokens before each
}

func (s *multiStep) next(ctx context.Context, history []int, left int) (int, error) {
	d := s.single
	if len(s.queue) == 0 && !d.host.fresh {
		if n := min(s.most, d.host.m.maxCache-len(history)+1, left); n >= 2 {
			ids, _, err := s.run(ctx, history, n)
			if err != nil {
				return -1, err
			}
			s.queue = ids
		}
	}
	if len(s.queue) == 0 {
		return d.next(ctx, history, left)
	}
	id := s.queue[0]
	s.queue = s.queue[1:]
	d.picked++
	return id, nil
}

// run runs up to n decode steps in one submission from the last token of
// history and returns the picked ids: n, or fewer when the device picked
// one of the stops (then the last). The cache must hold every other token
// of history; ok is false (and nothing ran) otherwise.
func (s *multiStep) run(ctx context.Context, history []int, n int) (ids []int, ok bool, err error) {
	m, sl := s.single.host.m, s.single.host.sl
	nc := len(history)
	if n < 2 || nc == 0 || nc-1+n > m.maxCache || len(sl.cached) != nc-1 || !slices.Equal(sl.cached, history[:nc-1]) {
		return nil, false, nil
	}
	m.lockDevice()
	got, err := s.single.prog.prog.RunSteps(ctx, int32(history[nc-1]), nc-1, n, s.stops)
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
	sl.cached = append(sl.cached, history[nc-1])
	sl.cached = append(sl.cached, ids[:len(ids)-1]...)
	return ids, true, nil
}

func (s *multiStep) close(mt *Metrics) { s.single.close(mt) }

// deviceStops returns the stop ids the device checks in a multi-step
// submission: g's stop tokens, sorted, when there are at most
// most of them (the backend's Caps().MaxStops); with more the device
// checks none and the host (which checks every id anyway) ends generation
// at the first.
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
