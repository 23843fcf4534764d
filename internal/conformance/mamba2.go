package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// Mamba2Cases are Granite 4.0 H's Mamba-2 mixer with its recurrent state
// (fusion.Mamba2Op: the convolution's window and a head dim x d_state
// matrix per head): per case a prefill in chunks (some shorter than the
// window, some longer), single decode steps, then the sequence restarted
// at position 0 (the state reset, not read) and run on, so the outputs
// after the first step depend on the state carried between steps and
// those after the restart on its reset. Inner widths and convolution
// channels go around the kernels' workgroups of 64 (inner 8, 48, 130:
// partial workgroups; heads of 1 to 16 rows), d_state 1 to 16, widths 2
// to 4 (Granite's 4), taps f32, f16 and bf16; one group, as Granite's and
// as the GPU kernels take. They are in Cases, so HalfCases runs three of
// them with f16 activations. Ablate drops the D skip
// (a convention arch3/README.md measures at 1.2 on Granite): the outputs
// must be far from it.
func Mamba2Cases() []Case {
	type tc struct {
		inner, heads, state, width int
		dt                         tensors.DType
		tokens, prefill            int
	}
	table := []tc{
		{8, 1, 1, 2, tensors.F32, 4, 9},
		{8, 2, 4, 4, tensors.F32, 1, 3},     // decode only: every step reads the state
		{48, 3, 16, 4, tensors.F32, 2, 7},   // chunks of 2, shorter than the window of 3
		{130, 10, 8, 3, tensors.F32, 5, 13}, // partial workgroups, chunks longer than the window
		{64, 4, 16, 4, tensors.F16, 3, 8},
		{32, 2, 12, 4, tensors.BF16, 6, 11},
	}
	var cs []Case
	for _, c := range table {
		const decode, again = 6, 5
		maxLen := c.prefill + decode + 1
		steps := chunkedSteps(c.prefill, c.tokens, decode)
		restart := chunkedSteps(again, c.tokens, 2)
		for i := range restart {
			for j := range restart[i].Tokens {
				restart[i].Tokens[j] = (restart[i].Tokens[j] + 4) % vocab
			}
		}
		steps = append(steps, restart...)
		name := fmt.Sprintf("mamba2/i%d_h%d_n%d_w%d_%s_t%d_p%d", c.inner, c.heads, c.state, c.width, c.dt, c.tokens, c.prefill)
		cs = append(cs, Case{
			Name: name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(29, uint64(c.inner*100+c.state)))
				op := &fusion.Mamba2Op{Conv: "taps", ConvBias: "conv_b", DtBias: "dt_b", A: "a", D: "d", Norm: "norm",
					Layer: 1, Inner: c.inner, Heads: c.heads, Groups: 1, State: c.state, Width: c.width, Eps: 1e-5}
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: maxLen,
					State: []fusion.LayerState{{}, op.LayerState()}}
				op.In = input(g, "zx", op.InCols())
				op.Out = g.NewBuf("y", c.tokens, c.inner)
				g.Logits = g.Add(op)
				cc, h := op.ConvChannels(), c.heads
				around := func(n int, mid, spread float32) []float32 {
					v := uniform(r, n, spread)
					for i := range v {
						v[i] += mid
					}
					return v
				}
				f32 := func(name string, vals []float32) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, []int{len(vals)}, vals, tensors.F32))
				}
				return g, []*tensors.Tensor{
					mustTensor(tensors.FromF32("zx", []int{vocab, op.InCols()}, uniform(r, vocab*op.InCols(), 1.5), tensors.F32)),
					mustTensor(tensors.FromF32("taps", []int{cc, c.width}, uniform(r, cc*c.width, 0.6), c.dt)),
					f32("conv_b", uniform(r, cc, 0.1)),
					f32("dt_b", around(h, 0, 1)),     // softplus of dt + bias over both signs
					f32("a", around(h, -1.05, 0.95)), // -U(0.1, 2), as the converters' -exp(A_log)
					f32("d", around(h, 1, 0.2)),
					f32("norm", around(c.inner, 1, 0.1)),
					f32("d_zero", make([]float32, h)),
				}
			},
			Steps: steps,
			Tol:   dot,
			Ablate: func(g *fusion.Graph) {
				for _, op := range g.Ops {
					if m, ok := op.(*fusion.Mamba2Op); ok {
						m.D = "d_zero"
					}
				}
			},
		})
	}
	return cs
}
