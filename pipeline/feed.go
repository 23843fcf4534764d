package pipeline

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// acquire waits for the model's KV cache to be free.
func (m *Model) acquire(ctx context.Context) error {
	select {
	case m.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pipeline: waiting for the model: %w", ctx.Err())
	}
}

func (m *Model) release() { <-m.turn }

// feed makes the cache hold context (every token from position 0) and
// writes the logits of its last position into logits. Tokens already cached
// as a common prefix are reused; at least the last token is always run. It
// returns how many tokens it ran. The caller holds the turn.
func (m *Model) feed(ctx context.Context, context []int, logits []float32) (int, error) {
	if len(context) == 0 {
		return 0, fmt.Errorf("%w: nothing to run", ErrPrompt)
	}
	if len(context) > m.maxCache {
		return 0, fmt.Errorf("%w: %d tokens, cache holds %d", ErrPromptTooLong, len(context), m.maxCache)
	}
	keep := 0
	for keep < len(m.cached) && keep < len(context)-1 && m.cached[keep] == context[keep] {
		keep++
	}
	m.cached = m.cached[:keep]
	rest := context[keep:]
	ran := 0
	for len(rest) > 0 {
		prog, n := m.pick(len(rest))
		chunk := make([]int32, n)
		for i, id := range rest[:n] {
			chunk[i] = int32(id)
		}
		if err := prog.Run(ctx, chunk, len(m.cached)); err != nil {
			return ran, fmt.Errorf("pipeline: run %d tokens at position %d: %w", n, len(m.cached), err)
		}
		m.cached = append(m.cached, rest[:n]...)
		rest = rest[n:]
		ran += n
		if len(rest) == 0 {
			if _, err := prog.Logits(logits); err != nil {
				return ran, fmt.Errorf("pipeline: logits: %w", err)
			}
		}
	}
	return ran, nil
}

// pick returns the program for the next chunk of a run of n tokens and the
// chunk's length: the decode program for one token, else the smallest
// prefill program that fits, else the largest one.
func (m *Model) pick(n int) (gpu.Program, int) {
	if n == 1 || len(m.prefill) == 0 {
		return m.decode, 1
	}
	for _, p := range m.prefill {
		if p.size >= n {
			return p.prog, n
		}
	}
	last := m.prefill[len(m.prefill)-1]
	return last.prog, last.size
}
