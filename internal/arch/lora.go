package arch

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
)

// LoRAPair is one adapter's unmerged update of a projection: the weights
// named A ([Rank, in]) and B ([out, Rank], already multiplied by the
// adapter's scale). The graph computes y = W·x + B·(A·x) as two small
// products after the projection's: t = A·x, then y += B·t (a MatMul with
// Accumulate), ops every backend runs.
type LoRAPair struct {
	A, B string
	Rank int
}

// loraUpdates emits the unmerged adapter updates of projections ps of
// input in (their products were just emitted): every pair's t = A·in (each
// into a buffer of its own), then every out += B·t in the same order, so
// each output gets its pairs' updates in order, as one pair after another
// would give them.
func (b *builder) loraUpdates(in fusion.Buf, ps []proj) {
	rows := b.g.Bufs[in].Rows
	type update struct {
		out, t fusion.Buf
		b      string
	}
	var ups []update
	for _, pr := range ps {
		for _, p := range b.lora[pr.w] {
			key := [3]int{rows, p.Rank, len(ups)}
			t, ok := b.loraBufs[key]
			if !ok {
				if b.loraBufs == nil {
					b.loraBufs = map[[3]int]fusion.Buf{}
				}
				t = b.g.NewBuf(fmt.Sprintf("lora_r%d_t%d_%d", p.Rank, rows, len(ups)), rows, p.Rank)
				b.loraBufs[key] = t
			}
			b.g.Add(&fusion.MatMulOp{Out: t, In: in, Projection: fusion.Projection{Weight: p.A}})
			ups = append(ups, update{pr.out, t, p.B})
		}
	}
	for _, u := range ups {
		b.g.Add(&fusion.MatMulOp{Out: u.out, In: u.t, Projection: fusion.Projection{Weight: u.b}, Accumulate: true})
	}
	for _, pr := range ps {
		sets := make([][]fusion.LoRAWeights, len(b.rowLoRA))
		any := false
		for j, set := range b.rowLoRA {
			for _, p := range set[pr.w] {
				sets[j] = append(sets[j], fusion.LoRAWeights{A: p.A, B: p.B, Rank: p.Rank})
				any = true
			}
		}
		if any {
			b.g.Add(&fusion.RowLoRAOp{Out: pr.out, In: in, Sets: sets})
		}
	}
}

// checkLoRA rejects pairs that cannot build.
func checkLoRA(lora map[string][]LoRAPair) error {
	for w, ps := range lora {
		for _, p := range ps {
			if p.A == "" || p.B == "" || p.Rank <= 0 {
				return fmt.Errorf("%w: LoRA pair on %s: weights %q, %q, rank %d", ErrOptions, w, p.A, p.B, p.Rank)
			}
		}
	}
	return nil
}
