package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// WideCases: products with rows as wide as real models' (2048-16384
// elements; the other cases' are at most a few hundred), so every lane of
// internal/backend/compute' matvec_lanes groups (64 lanes a row) loops over many chunks
// and the sums run long: plain, with bias and residual, GLU with the norm
// prologue (its sum of squares over a long row), and a fused MatMulRopeKV
// (lanes_rope_kv) read as q and as attention; decode steps and a prefill
// of 9 tokens (matmul's tiles partly filled). Not in FusedCases: their rows
// exceed the 1 KiB row blocks of its split runs.
func WideCases() []Case {
	type tc struct {
		kind    string // matmul, acc, glu (norm prologue), rope_q, rope_attn
		wt      weightType
		in, out int
		tokens  int
	}
	f32, i8f32, i8b32, i4b32 := weightType{tensors.F32, 0, 0}, weightType{tensors.I8, 0, tensors.F32},
		weightType{tensors.I8, 32, tensors.F16}, weightType{tensors.I4, 32, tensors.F16}
	table := []tc{
		{"matmul", f32, 4096, 70, 1}, {"acc", i8f32, 2048, 300, 1}, {"matmul", i8b32, 2048, 300, 1}, {"acc", i4b32, 2048, 600, 1},
		{"glu", f32, 4096, 37, 1}, {"glu", i8b32, 2048, 150, 1}, {"glu", i4b32, 2048, 300, 1},
		{"rope_q", f32, 4096, 64, 1}, {"rope_attn", i8b32, 16384, 64, 1},
		// More rows than one dispatch's 65535 row groups of 2 rows cover:
		// the weights are bound in row blocks (as a 262144-row vocabulary).
		{"matmul", i8b32, 64, 140000, 1},
		// Prefills of 9 tokens.
		{"matmul", f32, 4096, 70, 9}, {"acc", i8b32, 2048, 300, 9}, {"glu", f32, 4096, 37, 9}, {"glu", i4b32, 2048, 300, 9},
	}
	var cs []Case
	for _, c := range table {
		// Sums of 2048-16384 products, 32-256 times the terms of the other
		// cases' (rounding errors grow about as the square root of the
		// terms: 4-16 times dot's), and GLU multiplies two of them: an
		// output near 0 can be the product of sums of magnitude 10-30, whose
		// errors do not shrink with it (hence the absolute term). A wrong
		// row or scale is off by O(1).
		tol := Tolerance{Abs: 1e-3, Rel: 2e-4}
		cs = append(cs, Case{
			Name: fmt.Sprintf("wide/%s_%s_in%d_out%d_t%d", c.kind, c.wt, c.in, c.out, c.tokens),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(14, uint64(c.in+c.out)))
				g := &fusion.Graph{Tokens: c.tokens}
				x := input(g, "x", c.in)
				ws := []*tensors.Tensor{matrix(r, "x", vocab, c.in, tensors.F32, 0, 0),
					matrix(r, "w", c.out, c.in, c.wt.dt, c.wt.block, c.wt.scale)}
				pro := &fusion.RMSPrologue{Weight: "g", Eps: 1e-5}
				switch c.kind {
				case "matmul":
					g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("o", c.tokens, c.out), In: x, Projection: fusion.Projection{Weight: "w"}})
				case "acc":
					res := input(g, "res", c.out)
					ws = append(ws, matrix(r, "res", vocab, c.out, tensors.F32, 0, 0), vector(r, "b", c.out, 1, 0))
					g.Logits = g.Add(&fusion.MatMulOp{Out: res, In: x, Projection: fusion.Projection{Weight: "w", Bias: "b"}, Accumulate: true})
				case "glu":
					ws = append(ws, vector(r, "g", c.in, 0.5, 1), matrix(r, "u", c.out, c.in, c.wt.dt, c.wt.block, c.wt.scale))
					g.Logits = g.Add(&fusion.MatMulGLUOp{Out: g.NewBuf("o", c.tokens, c.out), In: x, Gate: fusion.Projection{Weight: "w"},
						Up: fusion.Projection{Weight: "u"}, Act: fusion.ActSiLU, Prologue: pro})
				case "rope_q", "rope_attn":
					// 8 heads of 8 dims (2 KV heads): Q 64 rows, K and V 16.
					const heads, kvHeads, hd = 8, 2, 8
					shape := fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}
					g.KV = fusion.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, MaxLen: 8}
					ws = append(ws, vector(r, "g", c.in, 0.5, 1), matrix(r, "wk", kvHeads*hd, c.in, c.wt.dt, c.wt.block, c.wt.scale),
						matrix(r, "wv", kvHeads*hd, c.in, c.wt.dt, c.wt.block, c.wt.scale))
					q := g.NewBuf("q", 1, heads*hd)
					g.Logits = g.Add(&fusion.MatMulRopeKVOp{Out: q, In: x, Q: fusion.Projection{Weight: "w"}, K: fusion.Projection{Weight: "wk"},
						V: fusion.Projection{Weight: "wv"}, HeadShape: shape, Prologue: pro,
						RopeParams: fusion.RopeParams{Dims: hd, Base: 10000, Style: fusion.RopeInterleaved}})
					if c.kind == "rope_attn" {
						g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", 1, heads*hd), Q: q, HeadShape: shape, Scale: 0.35})
					}
				}
				return g, ws
			},
			Steps: []Step{{seq(c.tokens), 0}, {[]int32{4}, c.tokens}, {[]int32{2}, c.tokens + 1}},
			Tol:   tol,
		})
	}
	return cs
}
