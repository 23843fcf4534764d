package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// sampleRules are the rules of the sampling cases: each mode of
// internal/sampler alone and together, and top-k 1 (greedy).
var sampleRules = []fusion.Sampling{
	{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 42},
	{Temperature: 1, Seed: 1},
	{Temperature: 0.5, TopP: 0.5, Seed: 1 << 40},
	{Temperature: 2, TopK: 3, Seed: 7},
	{Temperature: 1.3, TopK: 1, Seed: 7},
	{Temperature: 0.7, TopP: 0.999, Seed: math.MaxUint64},
}

// SampleCases are the device-sampling cases: fusion.Sample after LastRow
// over rows of a few widths (around the kernel's 256 chunks, the widest
// row its 8-invocation module takes, shaders.SampleShortRow = 4096, and a
// real vocabulary, 32000), every rule of sampleRules, each row drawn at several
// steps (positions), so the ids depend on the Philox draw of each step.
func SampleCases() []Case {
	var cs []Case
	for _, cols := range []int{5, 255, 257, 512, 4096, 32000} {
		for ri, rule := range sampleRules {
			cs = append(cs, Case{
				Name: fmt.Sprintf("sample/c%d/r%d", cols, ri),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(11, uint64(cols)))
					vals := uniform(r, vocab*cols, 4)
					// Row 1 has ties and a NaN, row 2 a few outstanding ids.
					row := vals[cols : 2*cols]
					row[0] = float32(math.NaN())
					row[cols/2], row[cols-1] = 3, 3
					row = vals[2*cols : 3*cols]
					for i := 0; i < cols; i += 97 {
						row[i] = 6 + float32(i%5)*0.1
					}
					g := &fusion.Graph{Tokens: 2}
					x := input(g, "x", cols)
					last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("last", 1, cols), In: x})
					g.Logits = g.Add(&fusion.SampleOp{Out: g.NewBuf("id", 1, 1), In: last, Sampling: rule})
					return g, []*tensors.Tensor{mustTensor(tensors.FromF32("x", []int{vocab, cols}, vals, tensors.F32))}
				},
				Steps: sampleSteps(),
				Tol:   exact,
			})
		}
	}
	// Rows of 32000 whose most likely ids crowd into a few of the 256
	// chunks (more than the kernel notes per chunk while counting), each
	// row a different crowd.
	const cols = 32000
	for ri, rule := range []fusion.Sampling{{Temperature: 0.8, TopK: 40, Seed: 3}, {Temperature: 0.8, TopK: 60, TopP: 0.9, Seed: 4}} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("sample/crowded/r%d", ri),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(12, uint64(ri)))
				vals := uniform(r, vocab*cols, 4)
				for row := range vocab {
					at := row*cols + 1000*row
					for i := range 50 {
						vals[at+i] = 5 + float32(r.IntN(8))*0.25
					}
				}
				g := &fusion.Graph{Tokens: 2}
				x := input(g, "x", cols)
				last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("last", 1, cols), In: x})
				g.Logits = g.Add(&fusion.SampleOp{Out: g.NewBuf("id", 1, 1), In: last, Sampling: rule})
				return g, []*tensors.Tensor{mustTensor(tensors.FromF32("x", []int{vocab, cols}, vals, tensors.F32))}
			},
			Steps: sampleSteps(),
			Tol:   exact,
		})
	}
	return append(cs, modelLikeSampleCases()...)
}

// modelLikeSampleCases are rows shaped like a model's logits (normal, a few
// likely ids well above the rest), the rows the sample kernel's short path
// takes: its candidates (the first digit of top-k's key and above) fit, so
// it reads them instead of the row. Widths around its bitmap of 8192 ids
// (1000 is no multiple of a bitmap word or of the 256 chunks; 8193 and
// 32000 put the survivors in id order by rank instead), rules whose
// survivors are ranked directly or need more digits, whose top-p cut
// crosses chunks, and rows that leave the short path: row 1 ties at top-k's
// key and holds a NaN and -infs, row 2 has 300 ids tied at the top (more
// survivors than the kernel's workgroup: the general path's steps take
// over with top-k's key), row 3 crowds its likely ids into a few chunks.
func modelLikeSampleCases() []Case {
	rules := []fusion.Sampling{
		{Temperature: 0.8, TopK: 40, Seed: 9},
		{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 10},
		{Temperature: 1, TopK: 200, TopP: 0.95, Seed: 11},
		{Temperature: 0.6, TopK: 5, TopP: 0.5, Seed: 12},
		{Temperature: 1.5, TopK: 256, Seed: 13},
	}
	var cs []Case
	for _, cols := range []int{1000, 8192, 8193, 32000} {
		for ri, rule := range rules {
			cs = append(cs, Case{
				Name: fmt.Sprintf("sample/modellike/c%d/r%d", cols, ri),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(13, uint64(cols)))
					vals := make([]float32, vocab*cols)
					for i := range vals {
						vals[i] = float32(r.NormFloat64() * 2.5)
					}
					for row := range 4 {
						x := vals[row*cols : (row+1)*cols]
						// A few ids well above the rest, as a model's.
						for i := range 8 {
							x[r.IntN(cols)] = 9 + float32(i)*0.4
						}
						switch row {
						case 1:
							sorted := slices.Clone(x)
							slices.Sort(sorted)
							kth := sorted[cols-rule.TopK]
							for i := 0; i < cols; i += cols / 7 {
								x[i] = kth
							}
							x[3] = float32(math.NaN())
							x[cols-2] = float32(math.Inf(-1))
							x[cols/3] = float32(math.Inf(-1))
						case 2:
							for i := 0; i < 300; i++ {
								x[(i*cols)/300] = 11
							}
						case 3:
							at := cols / 3
							for i := range 60 {
								x[at+i] = 7 + float32(r.IntN(16))*0.125
							}
						}
					}
					g := &fusion.Graph{Tokens: 2}
					x := input(g, "x", cols)
					last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("last", 1, cols), In: x})
					g.Logits = g.Add(&fusion.SampleOp{Out: g.NewBuf("id", 1, 1), In: last, Sampling: rule})
					return g, []*tensors.Tensor{mustTensor(tensors.FromF32("x", []int{vocab, cols}, vals, tensors.F32))}
				},
				Steps: sampleSteps(),
				Tol:   exact,
			})
		}
	}
	return cs
}

// sampleSteps draws from rows 0 to 3 at positions 0, 1, 2, ... 23.
func sampleSteps() []Step {
	var steps []Step
	for i := range 24 {
		steps = append(steps, Step{Tokens: []int32{int32((i + 5) % vocab), int32(i % 4)}, Pos: i})
	}
	return steps
}
