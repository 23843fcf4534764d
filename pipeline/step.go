package pipeline

import (
	"context"

	"github.com/gpurun/gpurun/internal/sampler"
)

// stepper is how a generation obtains its tokens, chosen once per
// generation (newStepper): the generation loop (Session.decode) only asks
// it for the next token, and stops, streams and counts. Every stepper
// hands out the first token from the prefill's logits on the host; after
// that:
//
//   - hostPick runs the last token through the slot's decode program and
//     picks from the row of logits on the host (the sampler, under a
//     grammar the logits masked first);
//   - batchRound (batch.go) runs that step in the model's batched round,
//     shared with the other sessions decoding at once;
//   - deviceStep (greedy.go) runs it through a program that picks the token
//     on the device (argmax or sampling; under a grammar the mask set on
//     the program first), only the id coming back;
//   - multiStep (greedy.go) runs several such steps per submission;
//   - windowStep (window.go) runs windows of such submissions, the next
//     queued while the host reads the one before;
//   - speculative (speculative.go) drafts tokens and verifies them several
//     in one step, stepping plainly (hostPick or batchRound) where nothing
//     is drafted.
//
// What a stepper changes besides the tokens (the slot's cache, and a
// per-layer recurrent state that would join the slot) is its own business:
// the loop sees only ids.
type stepper interface {
	// next returns the token after history. The slot's cache holds
	// history but its last token (the prefill's logits are the first
	// call's), or the tokens before the ids a stepper picked ahead. left
	// is how many tokens the generation may still produce (at least 1).
	next(ctx context.Context, history []int, left int) (int, error)
	// close adds the stepper's counts to mt and gives back what it holds.
	close(mt *Metrics)
}

// newStepper chooses how generation g on sl obtains its tokens: row holds
// the prefill's logits after history; pick is the device's picking program
// (devicePicker), nil where the host picks.
func (m *Model) newStepper(ctx context.Context, sl *slot, g *generation, opts *GenerateOptions, history []int, row []float32, pick *pickProgram) (stepper, error) {
	spec, err := m.newSpeculator(ctx, opts, g.sampler, history)
	if err != nil {
		return nil, err
	}
	host := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: g.sampler, filter: g.filter}
	var plain stepper = host
	if m.batch != nil {
		m.batch.join()
		plain = &batchRound{host: host, b: m.batch, req: &stepReq{done: make(chan struct{}, 1)}}
	}
	switch {
	case spec != nil:
		// The verifier's logits come back for the host's picks.
		return &speculative{spec: spec, plain: plain, sl: sl}, nil
	case pick == nil:
		return plain, nil
	}
	d := &deviceStep{host: host, prog: pick}
	if !pick.multiStep || opts.Grammar != nil || m.stepsPerSubmit < 2 {
		// A masked program runs one step per submission.
		return d, nil
	}
	multi := &multiStep{single: d, most: m.stepsPerSubmit, stops: g.deviceStops(pick.maxStops)}
	if m.caps.ReadAhead && !m.noWindows {
		return &windowStep{multi: multi}, nil
	}
	return multi, nil
}

// hostPick is the stepper that picks every token on the host from a row of
// logits: the prefill's for the first, then the slot's decode program's
// (feed) for the last token of history.
type hostPick struct {
	m       *Model
	sl      *slot
	row     []float32
	fresh   bool // row holds the logits after history (the prefill's, at first)
	sampler *sampler.Sampler
	filter  tokenFilter
}

func (h *hostPick) next(ctx context.Context, history []int, _ int) (int, error) {
	if !h.fresh {
		if _, err := h.m.feed(ctx, h.sl, history, h.row); err != nil {
			return -1, err
		}
	}
	h.fresh = false
	if err := h.filter.maskLogits(h.row); err != nil {
		return -1, err
	}
	// The step of the draw is the position the token takes, as on the
	// device (fusion.Sample).
	return h.sampler.SampleAt(h.row, uint32(len(history))), nil
}

func (h *hostPick) close(*Metrics) {}
