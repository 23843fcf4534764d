package cpu

import "github.com/gpurun/gpurun/fusion"

// loraMats is one unmerged update of a fusion.RowLoRAOp: A [rank, in] and
// B [out, rank].
type loraMats struct {
	a, b *matrix
	rank int
}

// newRowLoRA looks up the matrices of op's sets (validation checked them).
func newRowLoRA(ws *weights, op *fusion.RowLoRAOp) [][]loraMats {
	sets := make([][]loraMats, len(op.Sets))
	for j, set := range op.Sets {
		for _, pw := range set {
			sets[j] = append(sets[j], loraMats{a: ws.byName[pw.A], b: ws.byName[pw.B], rank: pw.Rank})
		}
	}
	return sets
}

// rowLoRA adds to each of the n rows of out its adapter set's updates
// (fusion.RowLoRAOp): per row, t = A·x as a MatMul of one row, then
// out += B·t as an accumulating one, as the unbatched graph of that
// adapter computes them. The weights are F32 (lora.Unmerged), so no input
// is quantized.
func (p *program) rowLoRA(s *step, out, x []float32, inCols, outCols, n int) {
	if len(s.lora) == 0 {
		return
	}
	maxRank := 0
	for _, set := range s.lora {
		for _, m := range set {
			maxRank = max(maxRank, m.rank)
		}
	}
	if cap(p.loraT) < maxRank {
		p.loraT = make([]float32, maxRank)
	}
	for r := range n {
		j := p.rowAdapter[r]
		if j >= len(s.lora) {
			continue
		}
		xr, or := x[r*inCols:(r+1)*inCols], out[r*outCols:(r+1)*outCols]
		for _, m := range s.lora[j] {
			t := p.loraT[:m.rank]
			p.mm = mmTask{p: p, out: t, outCols: m.rank, in: xr, inCols: inCols, n: 1, w: m.a}
			p.matMul(&p.mm)
			p.mm = mmTask{p: p, out: or, outCols: outCols, in: t, inCols: m.rank, n: 1, w: m.b, acc: true}
			p.matMul(&p.mm)
		}
	}
}
