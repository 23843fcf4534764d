package pipeline

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
