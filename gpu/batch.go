package gpu

import (
	"context"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
)

// Row is one row of a batched step (fusion.Graph.Batch): a token of
// sequence Seq (an index into the KV caches the program was compiled
// against) at position Pos of that sequence. Adapter picks the row's set
// of unmerged LoRA updates in the graph's fusion.RowLoRAOp ops (an index
// into their Sets; an index past them, or a graph without those ops,
// applies none).
type Row struct {
	Token   int32
	Pos     int
	Seq     int
	Adapter int
}

// BatchProgram is a compiled batched graph. It is not safe for concurrent
// use, and no other program may use one of its caches during a RunBatch.
type BatchProgram interface {
	// RunBatch executes one step of len(rows) <= graph.Tokens rows naming
	// distinct sequences (CheckBatch). It fails with ErrCacheFull when a
	// row's position is past its cache.
	RunBatch(ctx context.Context, rows []Row) error
	// Logits copies the logits of the rows of the last RunBatch, row t at
	// t*cols, into dst and returns the count of float32 values copied.
	Logits(dst []float32) (int, error)
	Release()
}

// CheckBatch validates the rows of a batched step for a program compiled
// from g against seqs caches of maxLen positions: between 1 and g.Tokens
// rows, each naming a distinct sequence in range at a position that fits
// its cache. Every backend runs the same checks, so they all fail alike.
func CheckBatch(g *fusion.Graph, rows []Row, seqs, maxLen int) error {
	if len(rows) == 0 || len(rows) > g.Tokens {
		return fmt.Errorf("%w: %d rows for a batched graph of %d", ErrStep, len(rows), g.Tokens)
	}
	for i, r := range rows {
		if r.Seq < 0 || r.Seq >= seqs {
			return fmt.Errorf("%w: row %d: sequence %d of %d", ErrStep, i, r.Seq, seqs)
		}
		for _, o := range rows[:i] {
			if o.Seq == r.Seq {
				return fmt.Errorf("%w: row %d: sequence %d named twice", ErrStep, i, r.Seq)
			}
		}
		if r.Pos < 0 || r.Pos >= math.MaxInt32 {
			return fmt.Errorf("%w: row %d: position %d", ErrStep, i, r.Pos)
		}
		if r.Adapter < 0 {
			return fmt.Errorf("%w: row %d: adapter %d", ErrStep, i, r.Adapter)
		}
		if r.Pos >= maxLen {
			return fmt.Errorf("row %d: position %d: %w (%d positions)", i, r.Pos, ErrCacheFull, maxLen)
		}
	}
	return nil
}
