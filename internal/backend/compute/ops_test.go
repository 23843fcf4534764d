package compute_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/tensors"
)

// Tolerances, stated once:
//   - exact: ops that only move, scale or dequantize values (embedding,
//     copies) do the same f32 operations in the same order on both sides.
//   - f32sum: reductions (dot products, norms) accumulate in a different order
//     (and the CPU keeps some sums in float64): a few ulps of the largest
//     partial sum, ~1e-5 relative for the sizes used here.
//   - transc: exp/tanh/sin/cos of the GPU (lavapipe: LLVM's vector versions)
//     against Go's float64 math rounded to f32: a few ulps, plus the f32
//     rope angle (pos * freq) against the CPU's float64 angle.
var (
	exact  = tolerance{abs: 0, rel: 0}
	f32sum = tolerance{abs: 1e-5, rel: 1e-5}
	transc = tolerance{abs: 2e-6, rel: 2e-5}
)

const vocab = 11

// embedGraph starts a graph whose inputs come from embedding tables of
// random f32 values (the only way tokens bring data in).
func embedGraph(tokens int) *fusion.Graph { return &fusion.Graph{Tokens: tokens} }

func embedInput(g *fusion.Graph, name string, cols int) fusion.Buf {
	b := g.NewBuf(name, g.Tokens, cols)
	return g.Add(&fusion.EmbedOp{Out: b, Weight: name})
}

func toks(ids ...int32) []int32 { return ids }

func TestEmbed(t *testing.T) {
	type tc struct {
		dt     tensors.DType
		block  int
		st     tensors.DType
		cols   int
		scale  float32
		tokens int
	}
	var cases []tc
	for _, cols := range []int{1, 37, 64} {
		for _, dt := range []tensors.DType{tensors.F32, tensors.F16, tensors.BF16} {
			cases = append(cases, tc{dt, 0, 0, cols, 0, 3})
		}
	}
	for _, st := range []tensors.DType{tensors.F32, tensors.F16} {
		cases = append(cases,
			tc{tensors.I8, 0, st, 37, 0, 3}, tc{tensors.I8, 8, st, 64, 2.5, 4},
			tc{tensors.I4, 0, st, 38, 0, 3}, tc{tensors.I4, 16, st, 64, 0.5, 2}, tc{tensors.I4, 2, st, 6, 0, 3})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_b%d_%s_c%d_s%g", c.dt, c.block, c.st, c.cols, c.scale), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(c.cols)))
			g := embedGraph(c.tokens)
			out := g.NewBuf("x", c.tokens, c.cols)
			g.Logits = g.Add(&fusion.EmbedOp{Out: out, Weight: "tok", Scale: c.scale})
			ws := []*tensors.Tensor{tensorOf(t, r, "tok", vocab, c.cols, c.dt, c.block, c.st)}
			steps := []step{{toks(3, 0, 10, 7)[:c.tokens], 0}, {toks(5), 1}}
			// Dequantization is value * scale in f32 on both sides: exact.
			compare(t, g, ws, steps, exact, compute.Options{})
		})
	}
}

func TestMatMul(t *testing.T) {
	type tc struct {
		dt      tensors.DType
		block   int
		st      tensors.DType
		in, out int
		tokens  int
		bias    bool
		lastRow bool
		maxBind int64 // force a row split of the weight
	}
	var cases []tc
	for _, tokens := range []int{1, 5} { // matvec, tiled matmul
		for _, dt := range []tensors.DType{tensors.F32, tensors.F16, tensors.BF16} {
			cases = append(cases, tc{dt, 0, 0, 37, 19, tokens, tokens == 1, false, 0}, tc{dt, 0, 0, 64, 130, tokens, true, false, 0})
		}
		for _, st := range []tensors.DType{tensors.F32, tensors.F16} {
			cases = append(cases,
				tc{tensors.I8, 0, st, 37, 19, tokens, false, false, 0},
				tc{tensors.I8, 16, st, 48, 21, tokens, true, false, 0},
				tc{tensors.I4, 0, st, 38, 17, tokens, false, false, 0},
				tc{tensors.I4, 8, st, 64, 33, tokens, true, false, 0},
				// Shapes of whole 16-byte chunks: the chunked paths and
				// the tiled matmul (rows not a multiple of a tile,
				// columns not a multiple of a tiled step).
				tc{tensors.I4, 32, st, 96, 70, tokens, true, false, 0},
				tc{tensors.I4, 0, st, 64, 33, tokens, false, false, 0},
				tc{tensors.I8, 32, st, 64, 67, tokens, false, false, 0},
				tc{tensors.I8, 0, st, 48, 9, tokens, true, false, 0})
		}
		cases = append(cases, tc{tensors.F32, 0, 0, 40, 70, tokens, true, false, 0}, tc{tensors.BF16, 0, 0, 48, 65, tokens, false, false, 0})
		// Weights split by rows into several bindings: 37 int8 columns
		// make rows that end off word boundaries.
		cases = append(cases,
			tc{tensors.I8, 0, tensors.F32, 37, 50, tokens, true, false, 37 * 8},
			tc{tensors.F16, 0, 0, 33, 50, tokens, false, false, 33 * 2 * 7},
			tc{tensors.I4, 2, tensors.F16, 6, 45, tokens, true, false, 24})
	}
	cases = append(cases, tc{tensors.F32, 0, 0, 24, 13, 6, true, true, 0},
		// More tokens than one 32-token block of the tiled kernel.
		tc{tensors.F16, 0, 0, 37, 70, 40, true, false, 0},
		tc{tensors.I4, 16, tensors.F16, 48, 33, 40, false, false, 0},
		tc{tensors.I4, 32, tensors.F16, 64, 130, 40, true, false, 0},
		tc{tensors.F32, 0, 0, 36, 70, 40, false, false, 36 * 4 * 20},
		// Decode rows of 16K elements (every lane of a row group loops
		// over many chunks).
		tc{tensors.I8, 32, tensors.F16, 16416, 9, 1, true, false, 0},
		tc{tensors.F32, 0, 0, 16388, 5, 1, false, false, 0})
	for _, c := range cases {
		name := fmt.Sprintf("%s_b%d_%s_%dx%d_t%d_bias%v_last%v_split%d", c.dt, c.block, c.st, c.out, c.in, c.tokens, c.bias, c.lastRow, c.maxBind)
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(2, uint64(c.in*1000+c.out)))
			g := embedGraph(c.tokens)
			x := embedInput(g, "x", c.in)
			rows := c.tokens
			if c.lastRow {
				l := g.NewBuf("last", 1, c.in)
				x = g.Add(&fusion.LastRowOp{Out: l, In: x})
				rows = 1
			}
			out := g.NewBuf("y", rows, c.out)
			op := &fusion.MatMulOp{Out: out, In: x, Projection: fusion.Projection{Weight: "w"}}
			ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, c.in, tensors.F32, 0, 0), tensorOf(t, r, "w", c.out, c.in, c.dt, c.block, c.st)}
			if c.bias {
				op.Bias = "b"
				ws = append(ws, vecOf(t, r, "b", c.out, 1, 0))
			}
			g.Logits = g.Add(op)
			tk := make([]int32, c.tokens)
			for i := range tk {
				tk[i] = int32((i*7 + 1) % vocab)
			}
			steps := []step{{tk, 0}, {tk[:1], 0}}
			// f32 dot products of up to 64 terms of |x|,|w| <= 1, in another
			// order (per-element vs per-block scaling too): f32sum.
			// With and without subgroup operations (the same kernels on
			// devices without them).
			for _, o := range []compute.Options{{}, {Subgroups: compute.SubgroupsOff}} {
				o.MaxBinding = c.maxBind
				compare(t, g, ws, steps, tolerance{abs: 2e-5, rel: 2e-5}, o)
			}
		})
	}
}

func TestNorm(t *testing.T) {
	cases := []struct {
		kind   string
		bias   bool
		cols   int
		tokens int
	}{
		{"rms", false, 1, 2}, {"rms", false, 5, 3}, {"rms", false, 300, 2},
		{"layer", false, 7, 3}, {"layer", true, 7, 3}, {"layer", true, 130, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_bias%v_%d", c.kind, c.bias, c.cols), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(c.cols)))
			g := embedGraph(c.tokens)
			x := embedInput(g, "x", c.cols)
			op := &fusion.NormOp{Out: g.NewBuf("n", c.tokens, c.cols), In: x, Weight: "w", Norm: mustParse(fusion.ParseNormKind(c.kind)), Eps: 1e-5}
			ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, c.cols, tensors.F32, 0, 0), vecOf(t, r, "w", c.cols, 0.5, 1)}
			if c.bias {
				op.Bias = "b"
				ws = append(ws, vecOf(t, r, "b", c.cols, 1, 0))
			}
			g.Logits = g.Add(op)
			compare(t, g, ws, []step{{toks(1, 2, 3)[:c.tokens], 0}}, f32sum, compute.Options{})
		})
	}
	// In place: the output aliases the input.
	t.Run("in_place", func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 99))
		g := embedGraph(2)
		x := embedInput(g, "x", 20)
		g.Logits = g.Add(&fusion.NormOp{Out: x, In: x, Weight: "w", Norm: fusion.NormRMS, Eps: 1e-6})
		ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, 20, tensors.F32, 0, 0), vecOf(t, r, "w", 20, 0.5, 1)}
		compare(t, g, ws, []step{{toks(4, 9), 0}}, f32sum, compute.Options{})
	})
}

func TestRope(t *testing.T) {
	cases := []struct {
		style           string
		heads, hd, dims int
		inPlace         bool
		pos             int
	}{
		{"interleaved", 2, 8, 8, true, 0}, {"interleaved", 3, 8, 4, false, 5},
		{"halves", 2, 8, 8, false, 3}, {"halves", 3, 10, 6, true, 40}, {"halves", 1, 4, 0, false, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%dx%d_r%d_inplace%v_pos%d", c.style, c.heads, c.hd, c.dims, c.inPlace, c.pos), func(t *testing.T) {
			r := rand.New(rand.NewPCG(4, uint64(c.hd)))
			g := embedGraph(3)
			cols := c.heads * c.hd
			x := embedInput(g, "x", cols)
			out := x
			if !c.inPlace {
				out = g.NewBuf("r", 3, cols)
			}
			g.Logits = g.Add(&fusion.RopeOp{Out: out, In: x, Heads: c.heads, HeadDim: c.hd,
				RopeParams: fusion.RopeParams{Dims: c.dims, Base: 10000, Style: mustParse(fusion.ParseRopeStyle(c.style))}})
			ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, cols, tensors.F32, 0, 0)}
			compare(t, g, ws, []step{{toks(1, 2, 3), c.pos}, {toks(4), c.pos + 3}}, transc, compute.Options{})
		})
	}
}

func TestElementwise(t *testing.T) {
	type tc struct {
		kind  fusion.Kind
		act   string
		alias int // -1 none, 0/1 output aliases that input, 2 both inputs and output are one buffer
		cols  int
	}
	var cases []tc
	for _, act := range []string{"silu", "gelu_tanh", "gelu", "relu"} {
		cases = append(cases, tc{fusion.GLU, act, -1, 37}, tc{fusion.Activation, act, -1, 70})
	}
	cases = append(cases, tc{fusion.GLU, "silu", 1, 9}, tc{fusion.Activation, "gelu", 0, 9},
		tc{fusion.Add, "", -1, 37}, tc{fusion.Add, "", 0, 37}, tc{fusion.Add, "", 1, 5}, tc{fusion.Add, "", 2, 5},
		tc{fusion.SoftCap, "", -1, 37}, tc{fusion.SoftCap, "", 0, 8})
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%s_alias%d_%d", c.kind, c.act, c.alias, c.cols), func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(c.cols)))
			g := embedGraph(3)
			a := embedInput(g, "a", c.cols)
			b := embedInput(g, "b", c.cols)
			in0, in1 := a, b
			if c.alias == 2 {
				in1 = a
			}
			out := g.NewBuf("y", 3, c.cols)
			switch c.alias {
			case 0, 2:
				out = a
			case 1:
				out = b
			}
			var op fusion.Op
			switch c.kind {
			case fusion.GLU:
				op = &fusion.GLUOp{Out: out, Gate: in0, Up: in1, Act: mustParse(fusion.ParseAct(c.act))}
			case fusion.Activation:
				op = &fusion.ActivationOp{Out: out, In: in0, Act: mustParse(fusion.ParseAct(c.act))}
			case fusion.Add:
				op = &fusion.AddOp{Out: out, A: in0, B: in1}
			case fusion.SoftCap:
				op = &fusion.SoftCapOp{Out: out, In: in0, Cap: 1.5}
			}
			g.Logits = g.Add(op)
			// Inputs up to +-12 reach both sides of the gelu_tanh cut-offs
			// at +-10 and the flat parts of tanh.
			ta := tensorOf(t, r, "a", vocab, c.cols, tensors.F32, 0, 0)
			vals := randF32(r, vocab*c.cols, 12)
			ta, _ = tensors.FromF32("a", []int{vocab, c.cols}, vals, tensors.F32)
			ws := []*tensors.Tensor{ta, tensorOf(t, r, "b", vocab, c.cols, tensors.F32, 0, 0)}
			tol := transc
			if c.act == "gelu_tanh" {
				// Both sides round to binary16 after the f32 formula; a tanh
				// ulp apart can land on neighbouring halves: 2^-10 relative.
				tol = tolerance{abs: 1e-6, rel: 1e-3}
			}
			if c.act == "gelu" {
				// erf by Abramowitz-Stegun 7.1.26 (abs error 1.5e-7 on erf,
				// times |x|/2 <= 6).
				tol = tolerance{abs: 1e-6, rel: 2e-5}
			}
			compare(t, g, ws, []step{{toks(1, 2, 3), 0}, {toks(7), 3}}, tol, compute.Options{})
		})
	}
}

func TestLastRow(t *testing.T) {
	for _, tokens := range []int{1, 4} {
		t.Run(fmt.Sprint(tokens), func(t *testing.T) {
			r := rand.New(rand.NewPCG(6, uint64(tokens)))
			g := embedGraph(tokens)
			x := embedInput(g, "x", 70)
			g.Logits = g.Add(&fusion.LastRowOp{Out: g.NewBuf("l", 1, 70), In: x})
			ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, 70, tensors.F32, 0, 0)}
			steps := []step{{toks(1, 2, 3, 4)[:tokens], 0}, {toks(9), 0}}
			compare(t, g, ws, steps, exact, compute.Options{})
		})
	}
}

// TestAttention stores K and V for a prefill and several decode steps and
// attends over the cache: GQA, soft cap, sliding window, head dims past 64
// (more than one output dim per invocation), caches longer than one chunk,
// each with an f32 and an f16 cache; the f16 cases add odd head dims (a
// half-filled last word) and the largest head dim (two packed words per
// invocation).
func TestAttention(t *testing.T) {
	type tc struct {
		heads, kvHeads, hd int
		capv               float32
		window             int
		prefill            int
		decode             int
		f16                bool
	}
	var cases []tc
	for _, f16 := range []bool{false, true} {
		cases = append(cases,
			tc{4, 2, 8, 0, 0, 3, 3, f16},
			tc{4, 4, 16, 0, 0, 5, 2, f16},
			tc{6, 2, 8, 30, 0, 4, 2, f16},
			tc{2, 1, 8, 0, 3, 4, 3, f16},
			tc{2, 1, 72, 0, 0, 2, 1, f16},
			tc{2, 2, 8, 0, 0, 70, 2, f16}) // 72 positions: two 64-position chunks
	}
	cases = append(cases, tc{3, 3, 7, 0, 0, 3, 2, true}, tc{2, 1, 1, 0, 0, 2, 2, true}, tc{2, 1, 256, 0, 0, 3, 1, true})
	for _, c := range cases {
		t.Run(fmt.Sprintf("h%d_kv%d_d%d_cap%g_w%d_p%d_f16%v", c.heads, c.kvHeads, c.hd, c.capv, c.window, c.prefill, c.f16), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(c.hd*100+c.prefill)))
			maxLen := c.prefill + c.decode + 1
			g := embedGraph(c.prefill)
			g.KV = fusion.KVSpec{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, MaxLen: maxLen, F16: c.f16}
			q := embedInput(g, "q", c.heads*c.hd)
			k := embedInput(g, "k", c.kvHeads*c.hd)
			v := embedInput(g, "v", c.kvHeads*c.hd)
			g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: c.kvHeads, HeadDim: c.hd})
			out := g.NewBuf("o", c.prefill, c.heads*c.hd)
			g.Logits = g.Add(&fusion.AttentionOp{Out: out, Q: q, Layer: 1,
				HeadShape: fusion.HeadShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd}, Scale: 0.9, Cap: c.capv, Window: c.window})
			rv := func(name string, cols int) *tensors.Tensor {
				tt, err := tensors.FromF32(name, []int{vocab, cols}, randF32(r, vocab*cols, 2), tensors.F32)
				if err != nil {
					t.Fatal(err)
				}
				return tt
			}
			ws := []*tensors.Tensor{rv("q", c.heads*c.hd), rv("k", c.kvHeads*c.hd), rv("v", c.kvHeads*c.hd)}
			pre := make([]int32, c.prefill)
			for i := range pre {
				pre[i] = int32(r.IntN(vocab))
			}
			steps := []step{{pre, 0}}
			for d := 0; d < c.decode; d++ {
				steps = append(steps, step{toks(int32(r.IntN(vocab))), c.prefill + d})
			}
			// Scores are f32 dot products (f32sum), then exp and a
			// streaming (rescaled) softmax sum: transcendental tolerance.
			// An f16 cache holds the same halves on both sides (both round
			// to nearest even), so the tolerance is the same; hd 256 sums
			// 256 products per score in another order.
			tol := tolerance{abs: 1e-5, rel: 5e-5}
			if c.hd > 128 {
				tol = tolerance{abs: 4e-5, rel: 1e-4}
			}
			compare(t, g, ws, steps, tol, compute.Options{})
		})
	}
}
