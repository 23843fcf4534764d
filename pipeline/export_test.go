package pipeline

import "context"

func t0() context.Context { return context.Background() }

// BatchStats returns how many batched rounds m ran and their rows in all.
func BatchStats(m *Model) (rounds, rows int64) {
	if m.batch == nil {
		return 0, 0
	}
	return m.batch.rounds.Load(), m.batch.rowsRun.Load()
}

// BatchPays and WeightBytes expose the default batching rule.
var (
	BatchPays   = batchPays
	WeightBytes = weightBytes
)

// PrefixStats returns how many prefix cache entries m used and made.
func PrefixStats(m *Model) (hits, saves int) {
	if m.prefix == nil {
		return 0, 0
	}
	m.prefix.mu.Lock()
	defer m.prefix.mu.Unlock()
	return m.prefix.hits, m.prefix.saves
}

// PrefillLogits makes a slot hold context as a Generate would (the prefix
// cache included) and returns the logits of its last position and the
// tokens it ran.
func PrefillLogits(m *Model, context []int) ([]float32, int, error) {
	sl, err := m.acquire(t0(), context)
	if err != nil {
		return nil, 0, err
	}
	defer m.release(sl)
	m.preparePrefix(sl, context)
	logits := make([]float32, m.cfg.VocabSize)
	ran, err := m.feed(t0(), sl, context, logits)
	return logits, ran, err
}

// RunCounts returns how many steps m's Model.run ran and their tokens.
func RunCounts(m *Model) (steps, tokens int64) { return m.ranSteps.Load(), m.ranTokens.Load() }

// NoWindows turns m's windows of decode steps off (window.go): its
// multi-step generations submit one at a time, as where the backend does
// not read ahead.
func NoWindows(m *Model) { m.noWindows = true }
