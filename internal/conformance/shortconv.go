package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// ShortConvCases are LFM2's gated short convolution with its recurrent
// state (fusion.ShortConvOp, KVSpec.State): per case a prefill in chunks
// (some shorter than the state's window, some longer), single decode
// steps, then the sequence restarted at position 0 (the state reset, not
// read) and run on, so the outputs after the first step depend on the
// state carried between steps, and those after the restart on its reset.
// Channel counts go around the kernel's workgroup of 64 (1, 5, 63, 65,
// 130: odd ones leave partial workgroups), widths 2 to 5 (LFM2's 3; 4 is
// Qwen3.5's and Mamba-2's convolution), taps f32, f16, bf16, int8 with a
// scale per row and int4 in blocks; they are in Cases, so HalfCases runs
// three of them with f16 activations. Ablate keeps only each channel's
// current tap (the reference without the window, the smallest convention
// effect arch3/README.md measures for LFM2): the outputs must be far from
// it.
func ShortConvCases() []Case {
	type tc struct {
		ch, width int
		dt        tensors.DType
		block     int           // quantized taps: taps per scale (0: per row)
		scale     tensors.DType // and the scales' type
		tokens    int           // the graph's rows: prefill chunks of at most this many
		prefill   int
	}
	table := []tc{
		{1, 3, tensors.F32, 0, 0, 4, 9},
		{5, 3, tensors.F32, 0, 0, 1, 3},   // decode only: every step reads the window from the state
		{63, 3, tensors.F32, 0, 0, 2, 7},  // chunks of 2: each spans the window of 2
		{65, 4, tensors.F32, 0, 0, 5, 13}, // chunks longer than the window, and a last partial one
		{64, 2, tensors.F16, 0, 0, 3, 8},
		{130, 5, tensors.BF16, 0, 0, 3, 10},       // chunks shorter than the window of 4
		{33, 3, tensors.I8, 0, tensors.F32, 4, 9}, // gpurun convert's int8 recipes: a scale per row
		{33, 4, tensors.I4, 2, tensors.F16, 4, 9}, // int4 in blocks of 2 with f16 scales
	}
	var cs []Case
	for _, c := range table {
		const decode, again = 6, 5 // decode steps, then steps after the restart
		maxLen := c.prefill + decode + 1
		steps := chunkedSteps(c.prefill, c.tokens, decode)
		restart := chunkedSteps(again, c.tokens, 2)
		for i := range restart {
			for j := range restart[i].Tokens {
				restart[i].Tokens[j] = (restart[i].Tokens[j] + 4) % vocab
			}
		}
		steps = append(steps, restart...)
		name := fmt.Sprintf("shortconv/c%d_w%d_%s_b%d_t%d_p%d", c.ch, c.width, c.dt, c.block, c.tokens, c.prefill)
		cs = append(cs, Case{
			Name: name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(23, uint64(c.ch*100+c.width)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 4, MaxLen: maxLen,
					State: []fusion.LayerState{{}, {ConvChannels: c.ch, ConvWindow: c.width - 1}}}
				bcx := input(g, "bcx", 3*c.ch)
				g.Logits = g.Add(&fusion.ShortConvOp{Out: g.NewBuf("conv", c.tokens, c.ch), In: bcx, Weight: "taps", Layer: 1, Channels: c.ch, Width: c.width})
				taps := uniform(r, c.ch*c.width, 1)
				current := make([]float32, len(taps)) // only tap width-1 (the current token's)
				for i := c.width - 1; i < len(taps); i += c.width {
					current[i] = taps[i]
				}
				tensor := func(name string, vals []float32) *tensors.Tensor {
					if c.dt.Quantized() {
						return mustTensor(tensors.Quantize(name, []int{c.ch, c.width}, vals, c.dt, c.block, c.scale))
					}
					return mustTensor(tensors.FromF32(name, []int{c.ch, c.width}, vals, c.dt))
				}
				return g, []*tensors.Tensor{
					mustTensor(tensors.FromF32("bcx", []int{vocab, 3 * c.ch}, uniform(r, vocab*3*c.ch, 2), tensors.F32)),
					tensor("taps", taps), tensor("taps_current", current),
				}
			},
			Steps: steps,
			Tol:   dot,
			Ablate: func(g *fusion.Graph) {
				for _, op := range g.Ops {
					if sc, ok := op.(*fusion.ShortConvOp); ok {
						sc.Weight = "taps_current"
					}
				}
			},
		})
	}
	return cs
}
