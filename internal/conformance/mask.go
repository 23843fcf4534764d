package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// MaskCases are the token-mask cases (gpu.Program.SetTokenMask): fusion.Argmax and
// fusion.Sample under masks that allow half the tokens, one token, all but
// the row's largest, a few, none set again (cleared), over rows of 5, 65
// and 32000 ids. Each step's id must be the CPU backend's, which sets the
// logits the mask rules out to -inf as the host does for a grammar.
func MaskCases() []Case {
	var cs []Case
	for _, cols := range []int{5, 65, 32000} {
		for _, pick := range []struct {
			name string
			rule *fusion.Sampling
		}{
			{"argmax", nil},
			{"sample", &fusion.Sampling{Temperature: 1, Seed: 5}},
			{"sample-topk-topp", &fusion.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, Seed: 6}},
		} {
			steps, masks := maskSteps(cols)
			cs = append(cs, Case{
				Name: fmt.Sprintf("mask/%s/c%d", pick.name, cols),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(13, uint64(cols)))
					vals := uniform(r, vocab*cols, 4)
					g := &fusion.Graph{Tokens: 2}
					x := input(g, "x", cols)
					last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("last", 1, cols), In: x})
					if pick.rule == nil {
						g.Logits = g.Add(&fusion.ArgmaxOp{Out: g.NewBuf("id", 1, 1), In: last})
					} else {
						g.Logits = g.Add(&fusion.SampleOp{Out: g.NewBuf("id", 1, 1), In: last, Sampling: *pick.rule})
					}
					return g, []*tensors.Tensor{mustTensor(tensors.FromF32("x", []int{vocab, cols}, vals, tensors.F32))}
				},
				Steps: steps,
				Masks: masks,
				Tol:   exact,
			})
		}
	}
	return cs
}

// maskSteps draws from rows 0 to 3 under a sequence of masks, each kind
// twice, the mask cleared in between.
func maskSteps(cols int) ([]Step, []StepMask) {
	r := rand.New(rand.NewPCG(17, uint64(cols)))
	words := (cols + 63) / 64
	allow := func(keep func(i int) bool) []uint64 {
		m := make([]uint64, words)
		for i := range cols {
			if keep(i) {
				m[i/64] |= 1 << (i % 64)
			}
		}
		if slices.Equal(m, make([]uint64, words)) {
			m[0] = 1 // never an empty mask: the caller rejects those
		}
		return m
	}
	masks := [][]uint64{
		allow(func(int) bool { return r.IntN(2) == 0 }),
		allow(func(i int) bool { return i == cols-1 }),
		allow(func(i int) bool { return i != cols/2 && i%3 != 0 }),
		nil,
		allow(func(int) bool { return r.IntN(20) == 0 }),
		allow(func(i int) bool { return i == 0 || i == cols/3 }),
	}
	var steps []Step
	var set []StepMask
	for i := range 2 * len(masks) {
		steps = append(steps, Step{Tokens: []int32{int32((i + 5) % vocab), int32(i % 4)}, Pos: i})
		set = append(set, StepMask{Set: true, Allowed: masks[i%len(masks)]})
	}
	// One step after the last without setting anything: the mask stays.
	steps = append(steps, Step{Tokens: []int32{0, 1}, Pos: len(steps)})
	set = append(set, StepMask{})
	return steps, set
}
