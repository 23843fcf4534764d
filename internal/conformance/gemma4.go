package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// Gemma4Cases are the ops Gemma 4 adds to a graph, each against the CPU
// reference: ScaleOp (a constant, a one-value weight, both, in place and
// not), ColumnsOp (a run of each row's columns), the unit RMS norm (no
// weight: V's norm), the global layers' proportional partial RoPE (plain
// RoPE with factors of 1e30 stopping the pairs past the rotated quarter),
// and a cache of per-layer head dims whose last layers have none and read
// other layers' caches in place (16- and 32-dim layers, a shared sliding
// layer reading a ring). The GELU of its GeGLU is elementwiseCases'
// gelu_tanh, its soft cap theirs too. Where a case's feature could be
// dropped silently (the weight of a scale, the rope factors, the layer a
// shared layer reads) its Ablate takes it out, so a backend ignoring it
// fails.
func Gemma4Cases() []Case {
	var cs []Case
	for _, c := range []struct {
		name    string
		scale   float32
		weight  bool
		inPlace bool
	}{{"const_inplace", 0.37, false, true}, {"weight", 0, true, false}, {"const_weight_inplace", 0.7071, true, true}} {
		cs = append(cs, Case{
			Name: "gemma4/scale_" + c.name,
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(40, 1))
				g := &fusion.Graph{Tokens: 3}
				const cols = 37
				x := input(g, "x", cols)
				out := x
				if !c.inPlace {
					out = g.NewBuf("y", 3, cols)
				}
				op := &fusion.ScaleOp{Out: out, In: x, Scale: c.scale}
				ws := []*tensors.Tensor{matrix(r, "x", vocab, cols, tensors.F32, 0, 0)}
				if c.weight {
					op.Weight = "s"
					ws = append(ws, vector(r, "s", 1, 0.5, 1.3))
				}
				g.Logits = g.Add(op)
				return g, ws
			},
			Steps:  []Step{{seq(3), 0}, {seq(1), 3}},
			Tol:    exact, // one f32 product of the same factor
			Ablate: ablateScaleWeight(c.weight),
		})
	}
	for _, c := range []struct{ in, cols, off int }{{37, 16, 5}, {96, 16, 0}, {96, 16, 80}, {45, 45, 0}} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("gemma4/columns_%d_of_%d_at%d", c.cols, c.in, c.off),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(40, uint64(c.in+c.off)))
				g := &fusion.Graph{Tokens: 3}
				x := input(g, "x", c.in)
				g.Logits = g.Add(&fusion.ColumnsOp{Out: g.NewBuf("y", 3, c.cols), In: x, Offset: c.off})
				return g, []*tensors.Tensor{matrix(r, "x", vocab, c.in, tensors.F32, 0, 0)}
			},
			Steps: []Step{{seq(3), 0}, {seq(2), 3}},
			Tol:   exact,
		})
	}
	for _, c := range []struct{ cols, head int }{{64, 16}, {37, 0}, {96, 32}} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("gemma4/unit_norm_c%d_head%d", c.cols, c.head),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(41, uint64(c.cols)))
				g := &fusion.Graph{Tokens: 3}
				x := input(g, "x", c.cols)
				g.Logits = g.Add(&fusion.NormOp{Out: g.NewBuf("n", 3, c.cols), In: x, Norm: fusion.NormRMS, Unit: true, Eps: 1e-6, HeadDim: c.head})
				return g, []*tensors.Tensor{matrix(r, "x", vocab, c.cols, tensors.F32, 0, 0)}
			},
			Steps: []Step{{seq(3), 0}},
			Tol:   dot,
		})
	}
	// Proportional partial RoPE: a 32-dim head rotated as a whole with
	// Gemma 4's factors [1 x4, 1e30 x12] (arch3/README.md), so pairs 0-3
	// turn at exponents over 32 dims and the rest stay put; in place and
	// not, at a late position.
	for _, inPlace := range []bool{false, true} {
		cs = append(cs, Case{
			Name: fmt.Sprintf("gemma4/rope_proportional_inplace%v", inPlace),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(42, 32))
				const heads, hd = 3, 32
				g := &fusion.Graph{Tokens: 3}
				x := input(g, "x", heads*hd)
				out := x
				if !inPlace {
					out = g.NewBuf("r", 3, heads*hd)
				}
				g.Logits = g.Add(&fusion.RopeOp{Out: out, In: x, Heads: heads, HeadDim: hd,
					RopeParams: fusion.RopeParams{Dims: hd, Base: 1e6, Style: fusion.RopeHalves, Factors: proportionalFactors(hd, hd/4)}})
				return g, []*tensors.Tensor{matrix(r, "x", vocab, heads*hd, tensors.F32, 0, 0)}
			},
			Steps: []Step{{seq(3), 90}, {seq(1), 93}},
			Tol:   transc,
			Ablate: func(g *fusion.Graph) {
				for _, op := range g.Ops {
					if o, ok := op.(*fusion.RopeOp); ok {
						o.Factors = nil
					}
				}
			},
		})
	}
	cs = append(cs, wideHeadCases()...)
	return append(cs, sharedKVCases()...)
}

// attentionWider: attention with 512-dim heads, eight times the terms per
// score of the 64-dim cases' attention tolerance.
var attentionWider = Tolerance{Abs: 8e-5, Rel: 2e-4}

// wideHeadCases: Gemma 4 E2B's 512-dim global heads, two passes of output
// dims in the per-head and combine kernels (4 dims per invocation and
// pass), eight query heads on one kv head, a prefill over two chunks and
// decode steps, f32 and f16 caches, with and without a window.
func wideHeadCases() []Case {
	var cs []Case
	for _, f16 := range []bool{false, true} {
		for _, window := range []int{0, 40} {
			const heads, kvHeads, hd, prefill, decode = 8, 1, 512, 70, 3
			cs = append(cs, Case{
				Name: fmt.Sprintf("gemma4/attention_h%d_kv%d_d%d_w%d_f16%v", heads, kvHeads, hd, window, f16),
				Build: func() (*fusion.Graph, []*tensors.Tensor) {
					r := rand.New(rand.NewPCG(44, uint64(window)))
					g := &fusion.Graph{Tokens: prefill}
					g.KV = fusion.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, MaxLen: prefill + decode + 1, F16: f16}
					var ws []*tensors.Tensor
					in := func(name string, cols int) fusion.Buf {
						// Scores of 512 terms of +-0.25 values: spread
						// enough that the softmax weighs positions unevenly.
						ws = append(ws, mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 0.25), tensors.F32)))
						return input(g, name, cols)
					}
					q, k, v := in("q", heads*hd), in("k", kvHeads*hd), in("v", kvHeads*hd)
					g.Add(&fusion.StoreKVOp{K: k, V: v, KVHeads: kvHeads, HeadDim: hd})
					g.Logits = g.Add(&fusion.AttentionOp{Out: g.NewBuf("o", prefill, heads*hd), Q: q,
						HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd}, Scale: 1, Window: window})
					return g, ws
				},
				Steps: chunkedSteps(prefill, prefill, decode),
				Tol:   attentionWider,
			})
		}
	}
	return cs
}

// ablateScaleWeight drops a ScaleOp's weight (when the case has one).
func ablateScaleWeight(weight bool) func(*fusion.Graph) {
	if !weight {
		return nil
	}
	return func(g *fusion.Graph) {
		for _, op := range g.Ops {
			if o, ok := op.(*fusion.ScaleOp); ok {
				o.Weight = ""
			}
		}
	}
}

// proportionalFactors are the rope factors of a head of hd dims of which
// only the first rot are rotated: 1 for the first rot/2 pairs, 1e30 (no
// turn) for the others (the Gemma 4 converter's rope_freqs).
func proportionalFactors(hd, rot int) []float32 {
	f := make([]float32, hd/2)
	for i := range f {
		f[i] = 1
		if i >= rot/2 {
			f[i] = 1e30
		}
	}
	return f
}

// sharedKVCases: a cache of per-layer head dims [16, 32, 16, 0, 0]
// (fusion.KVSpec.HeadDims). Layers 0-2 store their own keys and values;
// layer 3 (sliding, 16 dims) attends to layer 2's cache and layer 4
// (global, 32 dims) to layer 1's, each with queries of its own; the
// logits are the two outputs added (4 heads of 16 and 2 of 32 in one
// row). With rings, layers 0 and 2 are sliding layers on rings that the
// steps wrap and layer 3 reads layer 2's ring through its window; with an
// f16 cache the halves of both head dims are packed per layer. Ablate
// points layer 3 at layer 0 (same head dim, other keys): a backend binding
// the wrong cache fails.
func sharedKVCases() []Case {
	type tc struct {
		ring, f16       bool
		tokens          int
		prefill, decode int
	}
	var cs []Case
	for _, c := range []tc{{false, false, 8, 16, 6}, {false, true, 8, 16, 6}, {true, false, 4, 24, 12}, {true, true, 4, 24, 12}, {false, false, 70, 70, 3}} {
		const window, kvHeads = 5, 1
		maxLen := c.prefill + c.decode + 1
		cs = append(cs, Case{
			Name: fmt.Sprintf("gemma4/shared_kv_ring%v_f16%v_t%d_p%d_d%d", c.ring, c.f16, c.tokens, c.prefill, c.decode),
			Build: func() (*fusion.Graph, []*tensors.Tensor) {
				r := rand.New(rand.NewPCG(43, uint64(c.tokens*10+c.prefill)))
				g := &fusion.Graph{Tokens: c.tokens}
				g.KV = fusion.KVSpec{Layers: 5, KVHeads: kvHeads, HeadDim: 32, HeadDims: []int{16, 32, 16, 0, 0}, MaxLen: maxLen, F16: c.f16}
				if c.ring {
					ring := window + c.tokens - 1
					g.KV.Ring = []int{ring, 0, ring, 0, 0}
				}
				var ws []*tensors.Tensor
				in := func(name string, cols int) fusion.Buf {
					ws = append(ws, mustTensor(tensors.FromF32(name, []int{vocab, cols}, uniform(r, vocab*cols, 2), tensors.F32)))
					return input(g, name, cols)
				}
				for l, hd := range []int{16, 32, 16} {
					k, v := in(fmt.Sprintf("k%d", l), kvHeads*hd), in(fmt.Sprintf("v%d", l), kvHeads*hd)
					g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: l, KVHeads: kvHeads, HeadDim: hd})
				}
				q3, q4 := in("q3", 4*16), in("q4", 2*32)
				o3, o4 := g.NewBuf("o3", c.tokens, 64), g.NewBuf("o4", c.tokens, 64)
				win := 0
				if c.ring {
					win = window
				}
				g.Add(&fusion.AttentionOp{Out: o3, Q: q3, Layer: 2, HeadShape: fusion.HeadShape{Heads: 4, KVHeads: kvHeads, HeadDim: 16}, Scale: 1, Window: win})
				g.Add(&fusion.AttentionOp{Out: o4, Q: q4, Layer: 1, HeadShape: fusion.HeadShape{Heads: 2, KVHeads: kvHeads, HeadDim: 32}, Scale: 1})
				g.Logits = g.Add(&fusion.AddOp{Out: g.NewBuf("y", c.tokens, 64), A: o3, B: o4})
				return g, ws
			},
			Steps: chunkedSteps(c.prefill, c.tokens, c.decode),
			Tol:   attention,
			Ablate: func(g *fusion.Graph) {
				for _, op := range g.Ops {
					if o, ok := op.(*fusion.AttentionOp); ok && o.Layer == 2 {
						o.Layer = 0
					}
				}
			},
		})
	}
	return cs
}
