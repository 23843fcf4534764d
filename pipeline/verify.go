package pipeline

import (
	"context"
	"fmt"
)

// How a speculative step runs the context's last token and the drafts
// through the target and leaves its cache holding the tokens kept. Keys
// and values are rolled back by forgetting the positions past the kept
// tokens (speculative.go); a hybrid's recurrent states cannot be, so
// there the step brings them back from a state checkpoint
// (checkpoint.go). Two ways were built and measured:
//
//   - recomputeVerify checkpoints the states before the step, runs every
//     token in one step of the verifier (one pass over the weights), and
//     when a draft is rejected restores the checkpoint and runs the kept
//     tokens again (a second pass, over at most K tokens);
//   - perPositionVerify runs the tokens one decode step each with a
//     checkpoint after each, and restores the one of the last kept token:
//     nothing runs twice, but a step of K drafts reads the weights K+1
//     times, which is what speculation exists to avoid (the interfaces
//     give no state of the positions inside one step).
//
// Measured on the CPU backend (TestLFM2Speculative: arch3's LFM2, 20
// greedy tokens, K = 4; the target's steps and tokens after the prompt):
// a draft of random weights (66 drafted, none kept) 39 steps of 103
// tokens recomputing, 87 steps of 85 tokens per position; a noisy copy
// of the model (54 drafted, 3 kept) 33 steps of 88 tokens against 72
// steps of 70; every draft kept, 6 steps against 21 of 19 tokens each.
// The recompute runs up to K tokens more per rejection in less than half
// the steps. Which costs more is the price of a step of K+1 tokens
// against K+1 steps of one: on a model whose steps are bound by reading
// the weights, as decoding is (BenchmarkSpeculativeVerify, llama-110m
// int8 on 2 busy cores, indicative: a step of 5 tokens took 2.1 decode
// steps, of 3 tokens 2.5, of 9 tokens 4.7), a step of K = 4 costs at
// most about 2.1 + 2.1 decode steps recomputing (a rejection re-runs at
// most K tokens, fewer the earlier it comes) against 5 per position, and
// 2.1 against 5 when every draft is kept. (arch3's LFM2 is so small that
// its steps cost their tokens, and per position was the faster there:
// 63-87 ms against 77-107 ms for the rejecting drafts, noisy timings.)
// So the recompute is the default; tuning.Options.PerPositionRollback
// selects the other, for comparison.
type verifyStrategy interface {
	// verify runs tokens at pos on sl, the cache holding the positions
	// before pos, and writes every row's logits into rows. ok is false
	// (nothing ran) when the strategy cannot roll back: the caller steps
	// plainly.
	verify(ctx context.Context, m *Model, sl *slot, tokens []int32, pos int, rows []float32) (ok bool, err error)
	// keep makes sl's cache (keys, values and states) hold tokens[:n] at
	// pos after verify, 1 <= n <= len(tokens), and gives back what verify
	// held. ok is false when it could not (another slot's checkpoints
	// evicted the one it needed): sl then holds nothing to trust (cut to
	// 0), and the next step runs the context again.
	keep(ctx context.Context, m *Model, sl *slot, tokens []int32, pos, n int) (ok bool, err error)
}

// verifyStrategy chooses m's way for steps of up to size tokens: one
// verifier step on a model without recurrent states (oneStep), else
// recomputeVerify (or perPositionVerify where tuning asks for it).
func (m *Model) verifyStrategy(size int) verifyStrategy {
	switch {
	case !m.recurrent():
		return oneStep{size}
	case m.perPositionRollback:
		return &perPositionVerify{}
	}
	return &recomputeVerify{one: oneStep{size}}
}

// oneStep runs the tokens in one step of the verifier of size tokens (one
// program for every step of a generation); keys and values past the kept
// tokens are forgotten, nothing else to do.
type oneStep struct{ size int }

func (o oneStep) verify(ctx context.Context, m *Model, sl *slot, tokens []int32, pos int, rows []float32) (bool, error) {
	prog, err := m.verifier(sl, o.size)
	if err != nil {
		return false, err
	}
	return true, m.run(ctx, prog, tokens, pos, rows)
}

func (oneStep) keep(context.Context, *Model, *slot, []int32, int, int) (bool, error) {
	return true, nil
}

// stepPoints are the state checkpoints a step took (positions ascending),
// for its keep: restore the latest at or before the kept end, run the kept
// tokens after it, drop them all.
type stepPoints struct{ points []*checkpoint }

func (sp *stepPoints) take(m *Model, sl *slot, pos int) bool {
	ck := m.states.take(m, sl.kv, pos)
	if ck != nil {
		sp.points = append(sp.points, ck)
	}
	return ck != nil
}

func (sp *stepPoints) keep(ctx context.Context, m *Model, sl *slot, tokens []int32, pos, n int) (bool, error) {
	defer func() {
		m.states.drop(sp.points)
		clear(sp.points)
		sp.points = sp.points[:0]
	}()
	if n == len(tokens) {
		return true, nil // the states hold the last token
	}
	ck := m.states.latest(sp.points, pos+n)
	if ck == nil || !m.states.restore(m, sl.kv, ck) {
		sl.cut(0)
		return false, nil
	}
	if err := m.runTokens(ctx, sl, tokens[ck.pos-pos:n], ck.pos); err != nil {
		return true, fmt.Errorf("pipeline: speculative step: run the %d kept tokens again: %w", n-(ck.pos-pos), err)
	}
	return true, nil
}

// recomputeVerify: a checkpoint before the step, one verifier step, the
// kept tokens again after a rejection.
type recomputeVerify struct {
	one oneStep
	stepPoints
}

func (r *recomputeVerify) verify(ctx context.Context, m *Model, sl *slot, tokens []int32, pos int, rows []float32) (bool, error) {
	if !r.take(m, sl, pos) {
		return false, nil
	}
	ok, err := r.one.verify(ctx, m, sl, tokens, pos, rows)
	if !ok || err != nil {
		r.keep(ctx, m, sl, tokens, pos, len(tokens)) // drops the checkpoint
	}
	return ok, err
}

// perPositionVerify: one decode step per token, a checkpoint after each
// but the last.
type perPositionVerify struct{ stepPoints }

func (p *perPositionVerify) verify(ctx context.Context, m *Model, sl *slot, tokens []int32, pos int, rows []float32) (bool, error) {
	v := m.cfg.VocabSize
	for i := range tokens {
		if err := m.run(ctx, sl.decode, tokens[i:i+1], pos+i, rows[i*v:(i+1)*v]); err != nil {
			p.keep(ctx, m, sl, tokens, pos, len(tokens))
			return true, err
		}
		if i+1 < len(tokens) {
			// Without room for one, a rejection at or before this
			// position resumes from an earlier one and runs again.
			p.take(m, sl, pos+i+1)
		}
	}
	return true, nil
}

// runTokens runs tokens at pos through sl's programs in chunks (no logits).
func (m *Model) runTokens(ctx context.Context, sl *slot, tokens []int32, pos int) error {
	for len(tokens) > 0 {
		prog, n := sl.pick(len(tokens))
		if err := m.run(ctx, prog, tokens[:n], pos, nil); err != nil {
			return err
		}
		tokens, pos = tokens[n:], pos+n
	}
	return nil
}
