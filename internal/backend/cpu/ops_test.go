package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// The op tests run one- or few-op graphs whose inputs come from Embed
// tables (token t selects row t), and compare with float64 formulas written
// out here.

func randVals(rng *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * scale)
	}
	return out
}

func f32Tensor(t testing.TB, name string, shape []int, vals []float32) *tensors.Tensor {
	t.Helper()
	w, err := tensors.FromF32(name, shape, vals, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// harness compiles g against ws on a fresh CPU backend.
type harness struct {
	be   gpu.Backend
	prog gpu.Program
}

func compile(t testing.TB, g *fusion.Graph, ws []*tensors.Tensor, threads int) *harness {
	t.Helper()
	be := cpu.New(cpu.Options{Threads: threads})
	w, err := be.LoadWeights(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var kv gpu.KVCache
	if g.KV.MaxLen > 0 {
		if kv, err = be.NewKVCache(g.KV); err != nil {
			t.Fatal(err)
		}
	}
	p, err := be.Compile(g, w, kv)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{be: be, prog: p}
}

func (h *harness) run(t testing.TB, tokens []int32, pos int) []float32 {
	t.Helper()
	if err := h.prog.Run(context.Background(), tokens, pos); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 1<<16)
	n, err := h.prog.Logits(out)
	if err != nil {
		t.Fatal(err)
	}
	return out[:n]
}

func seq(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func assertClose(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		d := math.Abs(float64(got[i])-want[i]) / max(1, math.Abs(want[i]))
		if d > worst || d != d {
			worst, at = d, i
		}
	}
	if !(worst <= tol) {
		t.Errorf("%s: value %d = %g, want %g (rel diff %.3g > %g)", what, at, got[at], want[at], worst, tol)
	}
}

// TestMatMulStoredTypes multiplies by a weight in every stored type and
// compares with the float64 product of the weight as tensors dequantizes it
// (tensors.RowFloat32, an independent implementation), on the decode path
// (1-2 tokens) and the prefill path (row reuse), single and multi-threaded.
func TestMatMulStoredTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 96, 384 // 96*384*3 multiply-adds: above the parallel threshold
	wv := randVals(rng, rows*cols, 0.5)
	bias := randVals(rng, rows, 0.1)
	type stored struct {
		name  string
		make  func() (*tensors.Tensor, error)
		scale tensors.DType
	}
	quant := func(dt tensors.DType, block int, st tensors.DType) func() (*tensors.Tensor, error) {
		return func() (*tensors.Tensor, error) {
			return tensors.Quantize("w", []int{rows, cols}, wv, dt, block, st)
		}
	}
	plain := func(dt tensors.DType) func() (*tensors.Tensor, error) {
		return func() (*tensors.Tensor, error) { return tensors.FromF32("w", []int{rows, cols}, wv, dt) }
	}
	for _, s := range []stored{
		{"f32", plain(tensors.F32), 0},
		{"f16", plain(tensors.F16), 0},
		{"bf16", plain(tensors.BF16), 0},
		{"int8 per-channel f32", quant(tensors.I8, 0, tensors.F32), 0},
		{"int8 block32 f16", quant(tensors.I8, 32, tensors.F16), 0},
		{"int4 per-channel f32", quant(tensors.I4, 0, tensors.F32), 0},
		{"int4 block32 f16", quant(tensors.I4, 32, tensors.F16), 0},
		{"int4 block128 f32", quant(tensors.I4, 128, tensors.F32), 0},
		// Blocks that are not a multiple of the 32-element unrolled step
		// exercise the dot products' tail loops.
		{"int8 per-channel f16", quant(tensors.I8, 0, tensors.F16), 0},
		{"int8 block16 f16", quant(tensors.I8, 16, tensors.F16), 0},
		{"int8 block96 f32", quant(tensors.I8, 96, tensors.F32), 0},
		{"int4 block2 f16", quant(tensors.I4, 2, tensors.F16), 0},
		{"int4 block48 f16", quant(tensors.I4, 48, tensors.F16), 0},
	} {
		w, err := s.make()
		if err != nil {
			t.Fatal(err)
		}
		if w.Scales != nil {
			w.Scales.Name = "w_quantized_scale"
		}
		deq := make([]float32, rows*cols)
		for r := range rows {
			if err := w.RowFloat32(r, deq[r*cols:(r+1)*cols]); err != nil {
				t.Fatal(err)
			}
		}
		for _, tokens := range []int{1, 2, 3, 9} {
			for _, threads := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/T=%d/threads=%d", s.name, tokens, threads), func(t *testing.T) {
					xv := randVals(rng, tokens*cols, 1)
					g := &fusion.Graph{Tokens: tokens}
					x := g.NewBuf("x", tokens, cols)
					y := g.NewBuf("y", tokens, rows)
					g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
					g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w", Bias: "b"}})
					g.Logits = y
					h := compile(t, g, []*tensors.Tensor{w, f32Tensor(t, "x", []int{tokens, cols}, xv), f32Tensor(t, "b", []int{rows}, bias)}, threads)
					got := h.run(t, seq(tokens), 0)
					want := make([]float64, tokens*rows)
					for tk := range tokens {
						for r := range rows {
							sum := float64(bias[r])
							for i := range cols {
								sum += float64(deq[r*cols+i]) * float64(xv[tk*cols+i])
							}
							want[tk*rows+r] = sum
						}
					}
					assertClose(t, "matmul", got, want, 2e-5)
				})
			}
		}
	}
}

func TestNorms(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const T, cols = 3, 40
	xv := randVals(rng, T*cols, 2)
	for i := range cols {
		xv[i] += 5 // a row with a large mean
	}
	wv, bv := randVals(rng, cols, 1), randVals(rng, cols, 1)
	for _, kind := range []string{"rms", "layer"} {
		t.Run(kind, func(t *testing.T) {
			const eps = 1e-5
			g := &fusion.Graph{Tokens: T}
			x := g.NewBuf("x", T, cols)
			y := g.NewBuf("y", T, cols)
			g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
			op := &fusion.NormOp{Out: y, In: x, Weight: "w", Norm: mustParse(fusion.ParseNormKind(kind)), Eps: eps}
			if kind == "layer" {
				op.Bias = "b"
			}
			g.Add(op)
			g.Logits = y
			ws := []*tensors.Tensor{f32Tensor(t, "x", []int{T, cols}, xv), f32Tensor(t, "w", []int{cols}, wv), f32Tensor(t, "b", []int{cols}, bv)}
			got := compile(t, g, ws, 1).run(t, seq(T), 0)
			want := make([]float64, T*cols)
			for r := range T {
				row := xv[r*cols : (r+1)*cols]
				var mean, sq float64
				if kind == "layer" {
					for _, v := range row {
						mean += float64(v)
					}
					mean /= cols
				}
				for _, v := range row {
					sq += (float64(v) - mean) * (float64(v) - mean)
				}
				inv := 1 / math.Sqrt(sq/cols+eps)
				for i, v := range row {
					want[r*cols+i] = (float64(v) - mean) * inv * float64(wv[i])
					if kind == "layer" {
						want[r*cols+i] += float64(bv[i])
					}
				}
			}
			assertClose(t, kind, got, want, 1e-5)
		})
	}
}

// TestRope rotates by the textbook formula for both pairings, with partial
// rotary, at a nonzero start position.
func TestRope(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const T, heads, headDim, pos = 3, 2, 8, 7
	const cols = heads * headDim
	xv := randVals(rng, T*cols, 1)
	for _, tc := range []struct {
		style string
		dims  int
		base  float64
	}{{"interleaved", 8, 10000}, {"halves", 8, 10000}, {"interleaved", 4, 500000}, {"halves", 6, 10000}, {"halves", 0, 10000}} {
		t.Run(fmt.Sprintf("%s/%d/%g", tc.style, tc.dims, tc.base), func(t *testing.T) {
			g := &fusion.Graph{Tokens: T}
			x := g.NewBuf("x", T, cols)
			y := g.NewBuf("y", T, cols)
			g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
			g.Add(&fusion.RopeOp{Out: y, In: x, Heads: heads, HeadDim: headDim,
				RopeParams: fusion.RopeParams{Dims: tc.dims, Base: float32(tc.base), Style: mustParse(fusion.ParseRopeStyle(tc.style))}})
			g.Logits = y
			got := compile(t, g, []*tensors.Tensor{f32Tensor(t, "x", []int{T, cols}, xv)}, 1).run(t, seq(T), pos)
			want := make([]float64, T*cols)
			for i, v := range xv {
				want[i] = float64(v)
			}
			for r := range T {
				for h := range heads {
					head := want[r*cols+h*headDim : r*cols+(h+1)*headDim]
					for i := 0; i < tc.dims/2; i++ {
						a, b := 2*i, 2*i+1
						if tc.style == "halves" {
							a, b = i, i+tc.dims/2
						}
						theta := float64(pos+r) / math.Pow(tc.base, float64(2*i)/float64(tc.dims))
						x0, x1 := head[a], head[b]
						head[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
						head[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
					}
				}
			}
			assertClose(t, "rope", got, want, 1e-5)
		})
	}
}

// TestAttention writes keys and values over two steps and checks every
// query row against a float64 softmax attention with GQA, soft cap and
// sliding window, with an f32 cache and with an f16 one (whose reference
// reads keys and values rounded by roundHalf).
func TestAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const heads, kvHeads, headDim, maxLen = 4, 2, 8, 16
	const qCols, kvCols = heads * headDim, kvHeads * headDim
	const total = 9 // positions written: a prefill of 6 then 3
	qv, kv, vv := randVals(rng, total*qCols, 1), randVals(rng, total*kvCols, 1), randVals(rng, total*kvCols, 1)
	// Sink logits of the size of the scores and above, so that they take
	// a good share of each head's mass (gpt-oss's run from about -1 to 4).
	sinks := []float32{2.5, -1, 0.75, 4}
	type tc struct {
		name   string
		scale  float32
		cap    float32
		window int
		ring   int // 0: a linear cache
		f16    bool
		sinks  bool
	}
	var cases []tc
	for _, f16 := range []bool{false, true} {
		for _, sk := range []bool{false, true} {
			cases = append(cases, tc{"plain", 0.35, 0, 0, 0, f16, sk}, tc{"soft cap", 0.35, 0.5, 0, 0, f16, sk},
				tc{"window 3", 0.35, 0, 3, 0, f16, sk}, tc{"window 1", 1, 0, 1, 0, f16, sk}, tc{"cap and window", 0.2, 2, 4, 0, f16, sk},
				tc{"ring 8 window 3", 0.35, 0, 3, 8, f16, sk})
		}
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/f16=%v/sinks=%v", tc.name, tc.f16, tc.sinks), func(t *testing.T) {
			const T = 6
			g := &fusion.Graph{Tokens: T, KV: fusion.KVSpec{Layers: 2, KVHeads: kvHeads, HeadDim: headDim, MaxLen: maxLen, F16: tc.f16}}
			if tc.ring > 0 {
				g.KV.Ring = []int{0, tc.ring}
			}
			q, k, v := g.NewBuf("q", T, qCols), g.NewBuf("k", T, kvCols), g.NewBuf("v", T, kvCols)
			o := g.NewBuf("o", T, qCols)
			g.Add(&fusion.EmbedOp{Out: q, Weight: "q"})
			g.Add(&fusion.EmbedOp{Out: k, Weight: "k"})
			g.Add(&fusion.EmbedOp{Out: v, Weight: "v"})
			g.Add(&fusion.StoreKVOp{K: k, V: v, Layer: 1, KVHeads: kvHeads, HeadDim: headDim})
			at := &fusion.AttentionOp{Out: o, Q: q, Layer: 1, HeadShape: fusion.HeadShape{Heads: heads, KVHeads: kvHeads, HeadDim: headDim},
				Scale: tc.scale, Cap: tc.cap, Window: tc.window}
			ws := []*tensors.Tensor{f32Tensor(t, "q", []int{total, qCols}, qv), f32Tensor(t, "k", []int{total, kvCols}, kv), f32Tensor(t, "v", []int{total, kvCols}, vv)}
			if tc.sinks {
				at.Sinks = "sinks"
				ws = append(ws, f32Tensor(t, "sinks", []int{heads}, sinks))
			}
			g.Add(at)
			g.Logits = o
			h := compile(t, g, ws, 2)
			got := h.run(t, seq(6), 0)
			got = append(got, h.run(t, []int32{6, 7, 8}, 6)...)
			cached := func(x float32) float64 {
				if tc.f16 {
					return roundHalf(float64(x))
				}
				return float64(x)
			}
			// want follows the formula: with a sink s_h, m = max(max_j
			// score_j, s_h) and out = sum_j e^(score_j-m) v_j /
			// (sum_j e^(score_j-m) + e^(s_h-m)), s_h taken unscaled.
			reference := func(withSinks bool) []float64 {
				want := make([]float64, total*qCols)
				for p := range total {
					for hd := range heads {
						kvh := hd / (heads / kvHeads)
						var scores []float64
						lo := 0
						if tc.window > 0 {
							lo = max(0, p-tc.window+1)
						}
						best := math.Inf(-1)
						for j := lo; j <= p; j++ {
							var s float64
							for d := range headDim {
								s += float64(qv[p*qCols+hd*headDim+d]) * cached(kv[j*kvCols+kvh*headDim+d])
							}
							s *= float64(tc.scale)
							if tc.cap > 0 {
								s = float64(tc.cap) * math.Tanh(s/float64(tc.cap))
							}
							scores = append(scores, s)
							best = max(best, s)
						}
						var sum float64
						if withSinks {
							best = max(best, float64(sinks[hd]))
							sum = math.Exp(float64(sinks[hd]) - best)
						}
						for i := range scores {
							scores[i] = math.Exp(scores[i] - best)
							sum += scores[i]
						}
						for i, e := range scores {
							for d := range headDim {
								want[p*qCols+hd*headDim+d] += e / sum * cached(vv[(lo+i)*kvCols+kvh*headDim+d])
							}
						}
					}
				}
				return want
			}
			assertClose(t, "attention", got, reference(tc.sinks), 1e-5)
			if tc.sinks {
				// The sinks matter: the output without them is far off.
				worst := 0.0
				for i, w := range reference(false) {
					worst = max(worst, math.Abs(float64(got[i])-w))
				}
				if worst < 0.05 {
					t.Errorf("attention with sinks is within %g of attention without them", worst)
				}
			}
		})
	}
}

// TestElementwise checks the activation, GLU, add, soft cap and last-row
// ops against float64 formulas.
func TestElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const T, cols = 4, 24
	av, bv := randVals(rng, T*cols, 3), randVals(rng, T*cols, 1)
	gelu := func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }
	geluTanh := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	acts := map[string]func(float64) float64{
		"silu":      func(x float64) float64 { return x / (1 + math.Exp(-x)) },
		"relu":      func(x float64) float64 { return max(x, 0) },
		"gelu":      gelu,
		"gelu_tanh": geluTanh,
	}
	for _, tc := range []struct {
		name string
		op   fusion.Op // Out and In filled in below
		rows int
		want func(a, b float64) float64
		tol  float64
	}{
		{"add", &fusion.AddOp{}, T, func(a, b float64) float64 { return a + b }, 1e-6},
		{"softcap", &fusion.SoftCapOp{Cap: 1.5}, T, func(a, _ float64) float64 { return 1.5 * math.Tanh(a/1.5) }, 1e-6},
		{"silu", &fusion.ActivationOp{Act: fusion.ActSiLU}, T, func(a, _ float64) float64 { return acts["silu"](a) }, 1e-6},
		{"relu", &fusion.ActivationOp{Act: fusion.ActReLU}, T, func(a, _ float64) float64 { return acts["relu"](a) }, 0},
		{"gelu", &fusion.ActivationOp{Act: fusion.ActGELU}, T, func(a, _ float64) float64 { return gelu(a) }, 1e-6},
		// The fp16 table: one binary16 rounding of the input (relative
		// 2^-11, times gelu's slope up to ~1.13) and one of the output.
		{"gelu_tanh", &fusion.ActivationOp{Act: fusion.ActGELUTanh}, T, func(a, _ float64) float64 { return geluTanh(a) }, 2e-3},
		{"glu silu", &fusion.GLUOp{Act: fusion.ActSiLU}, T, func(a, b float64) float64 { return acts["silu"](a) * b }, 1e-6},
		{"glu gelu_tanh", &fusion.GLUOp{Act: fusion.ActGELUTanh}, T, func(a, b float64) float64 { return geluTanh(a) * b }, 2e-3},
		{"last row", &fusion.LastRowOp{}, 1, func(a, _ float64) float64 { return a }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fusion.Graph{Tokens: T}
			a, b := g.NewBuf("a", T, cols), g.NewBuf("b", T, cols)
			out := g.NewBuf("out", tc.rows, cols)
			g.Add(&fusion.EmbedOp{Out: a, Weight: "a"})
			g.Add(&fusion.EmbedOp{Out: b, Weight: "b"})
			op := fusion.Clone(tc.op)
			switch o := op.(type) {
			case *fusion.AddOp:
				o.Out, o.A, o.B = out, a, b
			case *fusion.GLUOp:
				o.Out, o.Gate, o.Up = out, a, b
			case *fusion.SoftCapOp:
				o.Out, o.In = out, a
			case *fusion.ActivationOp:
				o.Out, o.In = out, a
			case *fusion.LastRowOp:
				o.Out, o.In = out, a
			}
			g.Add(op)
			g.Logits = out
			ws := []*tensors.Tensor{f32Tensor(t, "a", []int{T, cols}, av), f32Tensor(t, "b", []int{T, cols}, bv)}
			got := compile(t, g, ws, 1).run(t, seq(T), 0)
			var want []float64
			first := 0
			if tc.rows == 1 {
				first = (T - 1) * cols
			}
			for i := first; i < T*cols; i++ {
				want = append(want, tc.want(float64(av[i]), float64(bv[i])))
			}
			assertClose(t, tc.name, got, want, tc.tol)
		})
	}
}

// TestEmbedScale: Scale multiplies, 0 means 1, and bf16/int8 tables are
// dequantized.
func TestEmbedScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const vocab, cols = 5, 16
	vals := randVals(rng, vocab*cols, 1)
	q, err := tensors.Quantize("e", []int{vocab, cols}, vals, tensors.I8, 0, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	q.Scales.Name = "e_quantized_scale"
	deq := make([]float32, vocab*cols)
	for r := range vocab {
		if err := q.RowFloat32(r, deq[r*cols:(r+1)*cols]); err != nil {
			t.Fatal(err)
		}
	}
	for _, scale := range []float32{0, 1, 8} {
		g := &fusion.Graph{Tokens: 3}
		x := g.NewBuf("x", 3, cols)
		g.Add(&fusion.EmbedOp{Out: x, Weight: "e", Scale: scale})
		g.Logits = x
		tokens := []int32{4, 0, 4}
		got := compile(t, g, []*tensors.Tensor{q}, 1).run(t, tokens, 0)
		var want []float64
		s := float64(scale)
		if scale == 0 {
			s = 1
		}
		for _, id := range tokens {
			for i := range cols {
				want = append(want, s*float64(deq[int(id)*cols+i]))
			}
		}
		assertClose(t, fmt.Sprint("scale ", scale), got, want, 1e-7)
	}
}
