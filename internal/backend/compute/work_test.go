package compute

import (
	"testing"

	"github.com/gpurun/gpurun/fusion"
)

// TestOpWorkAttention: the bytes and FLOPs an attention step is counted
// for, with and without a sliding window, from the op's contract: q and
// out once, each attended cached key and value once per KV head, 4 FLOPs
// per query head, attended position and head dimension.
func TestOpWorkAttention(t *testing.T) {
	g := &fusion.Graph{Tokens: 2}
	q := g.NewBuf("q", 2, 32)
	out := g.NewBuf("out", 2, 32)
	op := &fusion.AttentionOp{Out: out, Q: q, HeadShape: fusion.HeadShape{Heads: 4, KVHeads: 2, HeadDim: 8}, Scale: 1}
	for _, c := range []struct {
		name        string
		window      int
		bytes, flop int64
	}{
		// pos 5, 2 tokens: rows attend 6 and 7 positions; 7 cached.
		{"full", 0, 2*2*32*4 + 2*7*16*2, 4 * 4 * 8 * (6 + 7)},
		// window 3: both rows attend 3 positions, 3..6 are read.
		{"window", 3, 2*2*32*4 + 2*4*16*2, 4 * 4 * 8 * (3 + 3)},
	} {
		op.Window = c.window
		got := opWork(g, op, 5, 2, 2)
		if got.Bytes != c.bytes || got.FLOPs != c.flop {
			t.Errorf("%s: %d bytes %d FLOPs, want %d and %d", c.name, got.Bytes, got.FLOPs, c.bytes, c.flop)
		}
	}
}
