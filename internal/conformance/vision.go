package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// VisionCases are the ops of a vision encoder and of the text step that
// takes its embeddings (llama.cpp's clip graphs, Gemma 3's image decode):
//
//   - self_attention (fusion.SelfAttnOp): every row of the step sees every
//     row, no cache, no positions: a ViT's shape (16 patches, 4 heads of
//     12), a decode-sized step (3 rows: the split kernels under Auto), GQA,
//     and 70 rows (two key chunks); each case runs at position 0 and again
//     at a later position, which must not matter.
//   - avg_pool (fusion.AvgPoolOp): grids of 4 and 6 cells a side pooled by
//     2 and 3, rows past the pooled grid zero.
//   - input (fusion.InputOp): a step over rows the host gives
//     (Case.Inputs), added to an embedding so a wrong row shows.
//   - attention_noncausal (fusion.AttentionOp.NonCausal): a step whose rows
//     see the whole step (an image's positions), after a causal prompt in
//     the cache, with a sliding window that drops only keys too far back
//     (Gemma 3's local layers), on f32 and f16 caches and on a ring; Ablate
//     makes it causal, which must move the output past the tolerance.
func VisionCases() []Case {
	var cs []Case
	for _, c := range []struct{ tokens, heads, kvHeads, hd int }{
		{16, 4, 4, 12}, {3, 4, 2, 8}, {70, 2, 1, 16}, {5, 6, 3, 7},
	} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("self_attention/t%d_h%d_kv%d_d%d", c.tokens, c.heads, c.kvHeads, c.hd),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(41, uint64(c.tokens*100+c.hd)))
				g := &fusion.Graph{Tokens: c.tokens}
				qc, kc := c.heads*c.hd, c.kvHeads*c.hd
				q, k, v := input(g, "q", qc), input(g, "k", kc), input(g, "v", kc)
				g.Logits = g.Add(&fusion.SelfAttnOp{Out: g.NewBuf("o", c.tokens, qc), Q: q, K: k, V: v,
					HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}, Scale: 0.7})
				scaled := func(name string, cols int) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
				}
				return g, []*tensors.Tensor{scaled("q", qc), scaled("k", kc), scaled("v", kc)}
			},
			Steps: []Step{{Tokens: seq(c.tokens)}, {Tokens: lateSeq(c.tokens), Pos: 9}},
			Tol:   attention,
		})
	}
	for _, c := range []struct{ side, kernel, cols int }{{4, 2, 20}, {6, 3, 70}, {2, 1, 5}} {
		n := c.side * c.side
		cs = append(cs, Case{
			Name: fmt.Sprintf("avg_pool/side%d_k%d_c%d", c.side, c.kernel, c.cols),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(43, uint64(c.side)))
				g := &fusion.Graph{Tokens: n}
				x := input(g, "x", c.cols)
				g.Logits = g.Add(&fusion.AvgPoolOp{Out: g.NewBuf("o", n, c.cols), In: x, Side: c.side, Kernel: c.kernel})
				return g, []*tensors.Tensor{matrix(r, "x", vocab, c.cols, tensors.F32, 0, 0)}
			},
			Steps: []Step{{Tokens: seq(n)}, {Tokens: lateSeq(n), Pos: 3}},
			Tol:   exact,
		})
	}
	for _, c := range []struct{ tokens, cols int }{{4, 9}, {16, 64}} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("input/t%d_c%d", c.tokens, c.cols),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(47, uint64(c.tokens)))
				g := &fusion.Graph{Tokens: c.tokens}
				x := g.Add(&fusion.InputOp{Out: g.NewBuf("x", c.tokens, c.cols)})
				e := input(g, "e", c.cols)
				g.Logits = g.Add(&fusion.AddOp{Out: g.NewBuf("o", c.tokens, c.cols), A: x, B: e})
				return g, []*tensors.Tensor{matrix(r, "e", vocab, c.cols, tensors.F32, 0, 0)}
			},
			// Then fewer rows, with new input; then the same input again.
			Steps: []Step{{Tokens: seq(c.tokens)}, {Tokens: seq(c.tokens - 1)}, {Tokens: lateSeq(c.tokens - 1)}},
			Inputs: [][]float32{
				uniform(rand.New(rand.NewPCG(1, 1)), c.tokens*c.cols, 3),
				uniform(rand.New(rand.NewPCG(1, 2)), (c.tokens-1)*c.cols, 3),
			},
			Tol: exact,
		})
	}
	type nc struct {
		heads, kvHeads, hd int
		window, ring       int
		prompt, image      int // causal prompt rows before, non-causal rows of the step
		f16                bool
	}
	for _, c := range []nc{
		{4, 1, 16, 0, 0, 7, 16, false}, // Gemma 3's global layer: the image after its text
		{4, 1, 16, 8, 0, 7, 16, false}, // its local layers: the window binds inside the image
		{4, 1, 16, 8, 0, 7, 16, true},
		{2, 2, 8, 0, 0, 3, 3, false},   // a decode-sized step (split kernels under Auto)
		{2, 1, 8, 5, 24, 40, 6, false}, // a ring layer, the prompt past a wrap
		{3, 1, 64, 0, 0, 60, 70, true}, // rows over two key chunks
	} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("attention_noncausal/h%d_kv%d_d%d_w%d_ring%d_p%d_t%d_f16%v", c.heads, c.kvHeads, c.hd, c.window, c.ring, c.prompt, c.image, c.f16),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(53, uint64(c.hd*100+c.image+c.window)))
				g := &fusion.Graph{Tokens: c.image}
				g.KV = fusion.KVSpec{Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: c.prompt + c.image + 1, F16: c.f16}
				if c.ring > 0 {
					g.KV.Ring = []int{c.ring}
				}
				qc, kc := c.heads*c.hd, c.kvHeads*c.hd
				q, k, v := input(g, "q", qc), input(g, "k", kc), input(g, "v", kc)
				g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 0, KVHeads: c.kvHeads, HeadDim: c.hd})
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.image, qc), Q: q, Layer: 0,
					HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd},
					Scale:     0.8, Window: c.window, NonCausal: true})
				scaled := func(name string, cols int) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
				}
				return g, []*tensors.Tensor{scaled("q", qc), scaled("k", kc), scaled("v", kc)}
			},
			// The prompt in steps of the graph's rows (each non-causal too;
			// the last one short), then the image's step.
			Steps:  append(chunkedSteps(c.prompt, c.image, 0), Step{Tokens: lateSeq(c.image), Pos: c.prompt}),
			Tol:    attention,
			Ablate: causal,
		})
	}
	return cs
}

// causal makes every attention of g causal.
func causal(g *fusion.Graph) {
	for _, op := range g.Ops {
		if a, ok := op.(*fusion.AttentionOp); ok {
			a.NonCausal = false
		}
	}
}

// VisionHalfCases is the f16-activation policy over the vision ops (half):
// the ViT-shaped self-attention, a pooling, the input rows and Gemma 3's
// windowed non-causal step.
func VisionHalfCases() []Case {
	var out []Case
	for _, c := range VisionCases() {
		switch c.Name {
		case "self_attention/t16_h4_kv4_d12", "avg_pool/side4_k2_c20", "input/t4_c9",
			"attention_noncausal/h4_kv1_d16_w8_ring0_p7_t16_f16true":
			out = append(out, half(c))
		}
	}
	return out
}
