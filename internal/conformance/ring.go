package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// RingCases are sliding-window layers on a ring cache (fusion.KVSpec.Ring:
// the layer keeps its last ring positions in 2*ring mirrored slots). Each
// case stores keys and values through one of the three store paths
// (StoreKV, RopeStoreKV, MatMulRopeKV) and reads them with a windowed
// Attention, step after step well past the ring's length: decode steps
// wrapping round it several times, and prefill chunks that cross the wrap
// (at aligned and unaligned offsets, the ring as tight as validation
// allows, window + tokens - 1). The reference is the CPU backend on the
// same graph with a full cache (RunCases drops the ring for it), so a ring
// that lost or misplaced a position shows as other attention outputs.
func RingCases() []Case {
	type tc struct {
		store           string // "kv", "rope_kv" or "matmul_rope_kv"
		heads, kvHeads  int
		hd              int
		window, tokens  int
		ring            int // 0: window + tokens - 1
		f16             bool
		prefill, decode int // positions run as chunks of tokens, then single decode steps
	}
	var table []tc
	for _, f16 := range []bool{false, true} {
		table = append(table,
			tc{"kv", 4, 2, 8, 5, 4, 0, f16, 40, 12},            // ring of 8: chunks of 4 wrap 5 times, then decode
			tc{"kv", 2, 1, 8, 4, 5, 0, f16, 45, 9},             // chunks of 5 on a ring of 8 cross the wrap unaligned
			tc{"kv", 2, 1, 8, 6, 1, 0, f16, 0, 30},             // decode only, ring of 6: five wraps
			tc{"kv", 4, 1, 64, 70, 8, 0, f16, 240, 6},          // window over chunk edges, ring of 77 (tiled prefill)
			tc{"kv", 2, 2, 16, 3, 2, 40, f16, 120, 90},         // a ring roomier than it must be
			tc{"rope_kv", 4, 2, 8, 5, 3, 0, f16, 36, 10},       // RopeStoreKV
			tc{"matmul_rope_kv", 4, 2, 8, 4, 3, 0, f16, 30, 9}, // lanes_rope_kv (decode-sized chunks)
			tc{"matmul_rope_kv", 4, 2, 8, 6, 1, 0, f16, 0, 25})
	}
	table = append(table, tc{"kv", 3, 3, 7, 5, 4, 0, true, 32, 6}) // odd head dim: half-filled last words
	var cs []Case
	for _, c := range table {
		ring := c.ring
		if ring == 0 {
			ring = c.window + c.tokens - 1
		}
		maxLen := c.prefill + c.decode + 1
		steps := chunkedSteps(c.prefill, c.tokens, c.decode)
		tol := attention
		if c.store == "matmul_rope_kv" {
			tol = Tolerance{Abs: 4e-5, Rel: 1e-4} // the products' errors, then attention's
			if c.f16 {
				// A product within its error of a binary16 tie rounds to
				// the neighbouring half on one side (with a full cache
				// too): one half ulp of a cached value, relative 2^-11.
				tol = Tolerance{Abs: 1e-4, Rel: 1e-3}
			}
		}
		cs = append(cs, Case{
			Name: fmt.Sprintf("ring/%s_h%d_kv%d_d%d_w%d_t%d_ring%d_f16%v_p%d_d%d", c.store, c.heads, c.kvHeads, c.hd, c.window, c.tokens, ring, c.f16, c.prefill, c.decode),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(17, uint64(c.hd*1000+c.window*10+c.tokens)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.f16, Ring: []int{0, ring}}
				qc, kc := c.heads*c.hd, c.kvHeads*c.hd
				shape := fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}
				rp := fusion.RopeParams{Dims: c.hd - c.hd%2, Base: 10000, Style: fusion.RopeHalves}
				var q fusion.Buf
				var ws []*tensors.Tensor
				switch c.store {
				case "matmul_rope_kv":
					const in = 64
					x := input(g, "x", in)
					q = g.NewBuf("q", c.tokens, qc)
					ws = []*tensors.Tensor{matrix(r, "x", vocab, in, tensors.F32, 0, 0),
						matrix(r, "wq", qc, in, tensors.F32, 0, 0), matrix(r, "wk", kc, in, tensors.F32, 0, 0), matrix(r, "wv", kc, in, tensors.F32, 0, 0)}
					g.Add(&fusion.MatMulRopeKVOp{Out: q, In: x, Q: fusion.Projection{Weight: "wq"}, K: fusion.Projection{Weight: "wk"},
						V: fusion.Projection{Weight: "wv"}, Layer: 1, HeadShape: shape, RopeParams: rp})
				default:
					q = input(g, "q", qc)
					k, v := input(g, "k", kc), input(g, "v", kc)
					scaled := func(name string, cols int) *tensors.Tensor {
						return mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32))
					}
					ws = []*tensors.Tensor{scaled("q", qc), scaled("k", kc), scaled("v", kc)}
					if c.store == "kv" {
						g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: c.kvHeads, HeadDim: c.hd})
					} else {
						g.Add(&fusion.RopeStoreKVOp{Q: q, K: k, V: v, Layer: 1, HeadShape: shape, RopeParams: rp})
					}
				}
				g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", c.tokens, qc), Q: q, Layer: 1,
					HeadShape: shape, Scale: 0.9, Window: c.window})
				return g, ws
			},
			Steps: steps,
			Tol:   tol,
		})
	}
	return cs
}

// chunkedSteps is a prefill of prefill positions in steps of at most
// chunk tokens, then decode one-token steps, with ids spread over the
// vocabulary.
func chunkedSteps(prefill, chunk, decode int) []Step {
	var steps []Step
	for p := 0; p < prefill; p += chunk {
		toks := make([]int32, min(chunk, prefill-p))
		for i := range toks {
			toks[i] = int32((7*(p+i) + 3) % vocab)
		}
		steps = append(steps, Step{toks, p})
	}
	for d := range decode {
		steps = append(steps, Step{[]int32{int32((5*d + 2) % vocab)}, prefill + d})
	}
	return steps
}
