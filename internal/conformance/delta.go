package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// DeltaNetCases are Qwen3.5's ops as a backend plans them whole:
// fusion.DeltaNetOp with its recurrent state (KVSpec.State: the
// convolution window and a D×D matrix per value head) over a prefill in
// chunks, single decode steps, then the sequence restarted at position 0
// (the state reset, not read) and run on; a graph of one token runs the
// recurrent form throughout, a graph of several the chunked form (also
// for the one-row steps it runs), and a step of 37 rows spans two of the
// GPU kernel's 32-row chunks; taps f32, f16 (gpurun convert's f16 recipe)
// and bf16 (Hugging Face checkpoints). Ablate drops the decay (A zero: the state
// never fades), which the outputs must be far from. Then
// fusion.SigmoidGateOp (the gated attention's output gate) out of place,
// in place, and with a gate of one column (Qwen3.5 MoE's shared expert);
// and one DeltaNet case with f16 activations (half).
func DeltaNetCases() []Case {
	type tc struct {
		k, v, d, width  int
		tokens, prefill int
		dt              tensors.DType // of the taps
	}
	table := []tc{
		{1, 2, 16, 4, 1, 3, tensors.F32},    // decode only: the recurrent form reads the state every step
		{2, 4, 16, 4, 5, 13, tensors.F16},   // chunks of 5 and a partial one
		{1, 2, 32, 4, 40, 37, tensors.BF16}, // one prefill step over two 32-row chunks
	}
	var cs []Case
	for _, c := range table {
		const decode, again = 4, 3
		maxLen := c.prefill + decode + 1
		steps := chunkedSteps(c.prefill, c.tokens, decode)
		restart := chunkedSteps(again, c.tokens, 2)
		for i := range restart {
			for j := range restart[i].Tokens {
				restart[i].Tokens[j] = (restart[i].Tokens[j] + 4) % vocab
			}
		}
		steps = append(steps, restart...)
		cs = append(cs, Case{
			Name: fmt.Sprintf("deltanet/k%d_v%d_d%d_w%d_%s_t%d_p%d", c.k, c.v, c.d, c.width, c.dt, c.tokens, c.prefill),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(35, uint64(c.d*100+c.v*10+c.tokens)))
				op := &fusion.DeltaNetOp{Conv: "taps", DtBias: "dt_b", A: "a", Layer: 1,
					KeyHeads: c.k, ValueHeads: c.v, HeadDim: c.d, Width: c.width, Eps: 1e-6}
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: maxLen,
					State: []fusion.LayerState{{}, op.State()}}
				ch := op.Channels()
				op.QKV, op.Beta, op.Alpha = input(g, "qkv", ch), input(g, "beta", c.v), input(g, "alpha", c.v)
				op.Out = g.NewBuf("o", c.tokens, c.v*c.d)
				g.Logits = g.Add(op)
				around := func(n int, mid, spread float32) []float32 {
					v := uniform(r, n, spread)
					for i := range v {
						v[i] += mid
					}
					return v
				}
				f32 := func(name string, shape []int, vals []float32) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, shape, vals, tensors.F32))
				}
				return g, []*tensors.Tensor{
					f32("qkv", []int{vocab, ch}, uniform(r, vocab*ch, 1.5)),
					f32("beta", []int{vocab, c.v}, uniform(r, vocab*c.v, 2)),
					f32("alpha", []int{vocab, c.v}, uniform(r, vocab*c.v, 2)),
					// U(-1/sqrt(4), 1/sqrt(4)), PyTorch's Conv1d init.
					mustTensor(tensors.FromF32("taps", []int{ch, c.width}, uniform(r, ch*c.width, 0.5), c.dt)),
					f32("dt_b", []int{c.v}, around(c.v, 1, 0.1)),
					f32("a", []int{c.v}, around(c.v, -1.05, 0.95)), // -U(0.1, 2), as the converters' -exp(A_log)
					f32("a_zero", []int{c.v}, make([]float32, c.v)),
				}
			},
			Steps: steps,
			Tol:   dot,
			Ablate: func(g *fusion.Graph) {
				for _, op := range g.Ops {
					if d, ok := op.(*fusion.DeltaNetOp); ok {
						d.A = "a_zero"
					}
				}
			},
		})
	}
	cs = append(cs, half(cs[1]))
	for _, c := range []struct {
		name            string
		inPlace, oneCol bool
	}{{"apart", false, false}, {"in_place", true, false}, {"one_column", true, true}} {
		cs = append(cs, Case{
			Name: "sigmoid_gate/" + c.name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(36, uint64(len(c.name))))
				const cols = 70 // a partial second workgroup
				gc := cols
				if c.oneCol {
					gc = 1
				}
				g := &fusion.Graph{Tokens: 3}
				x, gate := input(g, "x", cols), input(g, "gate", gc)
				y := x
				if !c.inPlace {
					y = g.NewBuf("y", 3, cols)
				}
				g.Add(&fusion.SigmoidGateOp{Out: y, In: x, Gate: gate})
				// The logits: a copy of y (an in-place output is the
				// input's buffer, which the embedding wrote).
				g.Logits = g.Add(&fusion.AddOp{Out: g.NewBuf("logits", 3, cols), A: y, B: y})
				// Gates up to +-12 reach sigmoid's flat parts.
				return g, []*tensors.Tensor{
					mustTensor(tensors.FromF32("x", []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32)),
					mustTensor(tensors.FromF32("gate", []int{vocab, gc}, uniform(r, vocab*gc, 12), tensors.F32)),
				}
			},
			Steps: []Step{{seq(3), 0}, {seq(1), 3}},
			Tol:   transc,
		})
	}
	return cs
}
