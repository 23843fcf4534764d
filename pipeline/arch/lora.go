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

// loraUpdates emits the unmerged adapter updates of projection w (out =
// w·in was just emitted).
func (b *builder) loraUpdates(out, in fusion.Buf, w string) {
	for _, p := range b.lora[w] {
		rows := b.g.Bufs[in].Rows
		key := [2]int{rows, p.Rank}
		t, ok := b.loraBufs[key]
		if !ok {
			if b.loraBufs == nil {
				b.loraBufs = map[[2]int]fusion.Buf{}
			}
			t = b.g.NewBuf(fmt.Sprintf("lora_r%d_t%d", p.Rank, rows), rows, p.Rank)
			b.loraBufs[key] = t
		}
		b.g.Add(&fusion.MatMulOp{Out: t, In: in, Projection: fusion.Projection{Weight: p.A}})
		b.g.Add(&fusion.MatMulOp{Out: out, In: t, Projection: fusion.Projection{Weight: p.B}, Accumulate: true})
	}
	sets := make([][]fusion.LoRAWeights, len(b.rowLoRA))
	any := false
	for j, set := range b.rowLoRA {
		for _, p := range set[w] {
			sets[j] = append(sets[j], fusion.LoRAWeights{A: p.A, B: p.B, Rank: p.Rank})
			any = true
		}
	}
	if any {
		b.g.Add(&fusion.RowLoRAOp{Out: out, In: in, Sets: sets})
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
