package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// sinkCases are attentions with sinks (fusion.AttentionOp.Sinks, gpt-oss:
// a per-head logit in the softmax's max and denominator that weighs no
// value) over the geometries of the attention kernels: decode steps (the
// sink joins attn_combine once per head, not per chunk), prompts over
// several chunks (attn_tiled's running max and sum start from it), a
// sliding window, soft-capped scores (the sink is not capped), GQA groups
// past one head batch, f32 and f16 caches, and a ring layer. The sinks
// lie among the scores and above them (about -1 to 5 against scores of a
// few units), so they take a good share of each head's mass; one case's
// sinks are far above every score (exp overflows unless the max takes
// them in). Each case's Ablate drops the sinks: RunCases then checks that
// the backend's output is far from the CPU's without them. They are a
// family of their own ("attention_sinks/"), so HalfCases picks three of
// them and the attention cases it picked before.
func sinkCases() []Case {
	type tc struct {
		heads, kvHeads, hd int
		capv               float32
		window             int
		tokens             int // tokens per prefill chunk (the whole prompt when ring is 0)
		prefill, decode    int
		ring               int // 0: a full cache
		f16                bool
		offset             float32 // the sinks are offset + [-3, 3)
	}
	var table []tc
	for _, f16 := range []bool{false, true} {
		table = append(table,
			tc{4, 2, 8, 0, 0, 3, 3, 3, 0, f16, 2},      // decode after a short prompt (GQA)
			tc{12, 1, 8, 0, 0, 5, 5, 2, 0, f16, 2},     // a group of 12: two head batches
			tc{4, 2, 64, 0, 0, 130, 130, 2, 0, f16, 2}, // a prompt of three chunks (attn_tiled)
			tc{2, 1, 8, 0, 70, 140, 140, 2, 0, f16, 2}, // a window straddling chunk edges
			tc{6, 2, 8, 3, 0, 4, 4, 2, 0, f16, 4},      // soft-capped scores under an uncapped sink
			tc{4, 2, 8, 0, 5, 4, 40, 12, 8, f16, 2},    // a ring of 8: chunks wrapping, then decode
			tc{2, 1, 16, 0, 0, 70, 70, 2, 0, f16, 90})  // sinks far above every score
	}
	var cs []Case
	for _, c := range table {
		maxLen := c.prefill + c.decode + 1
		steps := chunkedSteps(c.prefill, c.tokens, c.decode)
		tol := attention
		if c.offset > 10 {
			// The outputs are about exp(score - sink) * v, far below 1e-30:
			// only an overflow or a NaN is off by more than this.
			tol = Tolerance{Abs: 1e-30}
		}
		cs = append(cs, Case{
			Name: fmt.Sprintf("attention_sinks/h%d_kv%d_d%d_cap%g_w%d_t%d_p%d_d%d_ring%d_f16%v_sink%g",
				c.heads, c.kvHeads, c.hd, c.capv, c.window, c.tokens, c.prefill, c.decode, c.ring, c.f16, c.offset),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(23, uint64(c.hd*1000+c.prefill*10+c.heads)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.f16}
				if c.ring > 0 {
					g.KV.Ring = []int{0, c.ring}
				}
				qc, kc := c.heads*c.hd, c.kvHeads*c.hd
				q, k, v := input(g, "q", qc), input(g, "k", kc), input(g, "v", kc)
				g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: c.kvHeads, HeadDim: c.hd})
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.tokens, qc), Q: q, Layer: 1,
					HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd},
					Scale:     0.9, Cap: c.capv, Window: c.window, Sinks: "sinks"})
				scaled := func(name string, cols int) *tensors.Tensor {
					return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
				}
				return g, []*tensors.Tensor{scaled("q", qc), scaled("k", kc), scaled("v", kc), vector(r, "sinks", c.heads, 3, c.offset)}
			},
			Steps:  steps,
			Tol:    tol,
			Ablate: dropSinks,
		})
	}
	return cs
}

// dropSinks removes the sinks of every attention of g.
func dropSinks(g *fusion.Graph) {
	for _, op := range g.Ops {
		if a, ok := op.(*fusion.AttentionOp); ok {
			a.Sinks = ""
		}
	}
}
