package pipeline

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// acquire waits for a free slot and takes the one whose cache holds the
// longest prefix of context (ties: the first), so that a session coming
// back finds its conversation where it left it. It fails with ErrClosed on
// a closed model.
func (m *Model) acquire(ctx context.Context, context []int) (*slot, error) {
	select {
	case m.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("pipeline: waiting for the model: %w", ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		<-m.turn
		return nil, ErrClosed
	}
	var best *slot
	bestKeep := -1
	for _, sl := range m.slots {
		if sl.busy {
			continue
		}
		if k := commonPrefix(sl.cached, context); k > bestKeep {
			best, bestKeep = sl, k
		}
	}
	// The turn token guarantees a free slot.
	best.busy = true
	return best, nil
}

func (m *Model) release(sl *slot) {
	m.mu.Lock()
	sl.busy = false
	m.mu.Unlock()
	<-m.turn
}

// ringsHold reports whether a cache that held cached positions still
// holds, in every ring layer, the window of positions a step resuming at
// keep reads: a ring of r positions lost the positions below
// cached - r, and the step reads back to keep - window + 1.
func (m *Model) ringsHold(cached, keep int) bool {
	for l, r := range m.kvSpec.Ring {
		if r > 0 && cached-keep > r-m.cfg.LayerWindow(l) {
			return false
		}
	}
	return true
}

// recurrent reports whether the model's layers keep recurrent states
// (fusion.LayerState) beside keys and values: a slot's states then hold
// exactly sl.cached (the steppers keep them together) and cannot go back to
// a shorter prefix, so a slot whose cached tokens are not all a prefix of
// the next context resumes at its latest state checkpoint within the
// common prefix (checkpoint.go), or at position 0 (feed).
func (m *Model) recurrent() bool { return m.kvSpec.Recurrent() }

// distrust cuts sl's record of its cache after a failed step at pos: the
// positions from pos on may be partly written. A recurrent state may have
// moved in some layers and not others, so a hybrid's slot keeps nothing.
func (sl *slot) distrust(pos int) {
	if sl.recurrent {
		pos = 0
	}
	sl.cut(pos)
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// lockDevice and unlockDevice bracket backend calls that concurrent slots
// must not make at once (see Model.device).
func (m *Model) lockDevice() {
	if m.device != nil {
		m.device.Lock()
	}
}

func (m *Model) unlockDevice() {
	if m.device != nil {
		m.device.Unlock()
	}
}

// run runs tokens at pos through prog and, with logits non-nil, reads the
// logits back, holding the device for both.
func (m *Model) run(ctx context.Context, prog gpu.Program, tokens []int32, pos int, logits []float32) error {
	m.lockDevice()
	defer m.unlockDevice()
	m.ranSteps.Add(1)
	m.ranTokens.Add(int64(len(tokens)))
	if err := prog.Run(ctx, tokens, pos); err != nil {
		return fmt.Errorf("pipeline: run %d tokens at position %d: %w", len(tokens), pos, err)
	}
	if logits != nil {
		if _, err := prog.Logits(logits); err != nil {
			return fmt.Errorf("pipeline: logits: %w", err)
		}
	}
	return nil
}

// feed makes sl's cache hold context (every token from position 0) and
// writes the logits of its last position into logits. Tokens already cached
// as a common prefix are reused; at least the last token is always run. It
// returns how many tokens it ran. The caller holds sl.
func (m *Model) feed(ctx context.Context, sl *slot, context []int, logits []float32) (int, error) {
	if len(context) == 0 {
		return 0, fmt.Errorf("%w: nothing to run", ErrPrompt)
	}
	if len(context) > m.maxCache {
		return 0, fmt.Errorf("%w: %d tokens, cache holds %d", ErrPromptTooLong, len(context), m.maxCache)
	}
	keep := min(commonPrefix(sl.cached, context), len(context)-1)
	if keep < len(context) && context[keep] < 0 {
		// An image runs whole (its positions attend to each other):
		// resume at its start.
		_, j := mediaPos(context[keep])
		keep -= j
	}
	switch {
	case !m.ringsHold(len(sl.cached), keep):
		// A ring lost positions the step reads: run everything from
		// position 0.
		keep = 0
	case m.recurrent() && keep < len(sl.cached):
		// The recurrent states are past the kept prefix and cannot roll
		// back: resume at the latest checkpoint within it, or at 0,
		// which starts the states afresh.
		keep = m.rollback(sl, keep)
	}
	sl.cut(keep)
	rest := context[keep:]
	ran := 0
	for len(rest) > 0 {
		pos := len(sl.cached)
		var prog gpu.Program
		var n int
		var chunk []int32
		if rest[0] < 0 {
			rows, k, err := m.imageRun(rest)
			if err == nil {
				prog, err = m.imageProgram(sl, k)
			}
			if err == nil {
				m.lockDevice()
				err = prog.SetInput(rows)
				m.unlockDevice()
			}
			if err != nil {
				return ran, err
			}
			n, chunk = k, make([]int32, k)
		} else {
			// On a hybrid, chunks end where checkpoints are taken.
			prog, n = sl.pick(min(textRun(rest), m.states.stop(pos, len(context))-pos))
			chunk = make([]int32, n)
			for i, id := range rest[:n] {
				chunk[i] = int32(id)
			}
		}
		var out []float32
		if n == len(rest) {
			out = logits
		}
		if err := m.run(ctx, prog, chunk, pos, out); err != nil {
			// The cache may hold part of the chunk: trust none of it.
			sl.distrust(pos)
			return ran, err
		}
		sl.cached = append(sl.cached, rest[:n]...)
		rest = rest[n:]
		ran += n
		if m.states.checkpointAt(pos+n, len(context)) {
			m.checkpoint(sl)
		}
	}
	return ran, nil
}

// pick returns the program for the next chunk of a run of n tokens and the
// chunk's length: the decode program for one token, else the smallest
// prefill program that fits, else the largest one.
func (sl *slot) pick(n int) (gpu.Program, int) {
	if n == 1 || len(sl.prefill) == 0 {
		return sl.decode, 1
	}
	for _, p := range sl.prefill {
		if p.size >= n {
			return p.prog, n
		}
	}
	last := sl.prefill[len(sl.prefill)-1]
	return last.prog, last.size
}
