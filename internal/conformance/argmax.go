package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// argmaxRows are the rows of the argmax cases' table, each a way to get
// greedy sampling wrong; row r is what token r embeds.
var argmaxRows = []struct {
	name string
	edit func(v []float32)
}{
	{"random", nil},
	{"ties", func(v []float32) {
		// The same maximum early, in the middle and last: the lowest wins.
		for _, i := range []int{len(v) / 3, len(v) - 1, len(v) / 2} {
			v[i] = 7
		}
	}},
	{"negative", func(v []float32) {
		for i := range v {
			v[i] = -1 - float32(i%11)*0.25 - float32(i)*1e-6
		}
	}},
	{"nan then max", func(v []float32) { v[0] = float32(math.NaN()); v[len(v)-1] = 9; v[len(v)/2] = float32(math.NaN()) }},
	{"all nan", func(v []float32) {
		for i := range v {
			v[i] = float32(math.NaN())
		}
	}},
	{"all -inf", func(v []float32) {
		for i := range v {
			v[i] = float32(math.Inf(-1))
		}
	}},
	{"max last", func(v []float32) { v[len(v)-1] = 3 }},
	{"max first", func(v []float32) { v[0] = 3 }},
	{"huge", func(v []float32) { v[len(v)/4] = math.MaxFloat32; v[len(v)/5] = float32(math.Inf(1)) }},
}

// ArgmaxCases are the greedy-sampling cases: fusion.Argmax after LastRow
// over rows of sizes around the kernel's workgroup of 64 and of a real
// vocabulary (32000), each row of argmaxRows once.
func ArgmaxCases() []Case {
	var cs []Case
	for _, cols := range []int{1, 5, 63, 64, 65, 129, 32000} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("argmax/c%d", cols),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(9, uint64(cols)))
				vals := uniform(r, vocab*cols, 2)
				for i, row := range argmaxRows {
					if row.edit != nil {
						row.edit(vals[i*cols : (i+1)*cols])
					}
				}
				g := &fusion.Graph{Tokens: 2}
				x := input(g, "x", cols)
				last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("last", 1, cols), In: x})
				g.Logits = g.Add(&fusion.ArgmaxOp{Out: g.NewBuf("id", 1, 1), In: last})
				return g, []*tensors.Tensor{mustTensor(tensors.FromF32("x", []int{vocab, cols}, vals, tensors.F32))}
			},
			Steps: argmaxSteps(),
			Tol:   exact,
		})
	}
	return cs
}

// argmaxSteps picks every row of argmaxRows as the last token of a step.
func argmaxSteps() []Step {
	var steps []Step
	for i := range argmaxRows {
		steps = append(steps, Step{Tokens: []int32{int32((i + 5) % vocab), int32(i)}, Pos: 0})
	}
	return steps
}
