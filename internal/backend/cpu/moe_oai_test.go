package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// oaiRule is the part of gpt-oss's mixture of experts the float64
// reference can switch off, to show the comparison can fail.
type oaiRule struct {
	gatingSoftmax bool // qwen3moe's gating in place of softmax_weight
	noRouterBias  bool
	noGateBias    bool
	noDownBias    bool
	silu          bool // act(g) * u with silu, unclamped
}

// oaiRef is gpt-oss's MoE feed-forward (llama.cpp build_moe_ffn with
// LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT and LLM_FFN_SWIGLU_OAI_MOE)
// in float64, written from its formulas: logits = R·x + rb; the used
// largest logits; weights the softmax of those; per selected expert e
// g = G_e·x + gb_e, u = U_e·x + ub_e, x' = min(g, limit), y = clamp(u,
// ±limit), h = x'·σ(alpha·x')·(y + 1); out = Σ w_e (D_e·h + db_e).
func oaiRef(x, router, rb, gate, gb, up, ub, down, db []float32, dim, hidden, experts, used int, alpha, limit float64, rule oaiRule) []float64 {
	n := len(x) / dim
	out := make([]float64, n*dim)
	dot := func(w []float32, v []float64) float64 {
		var s float64
		for i := range v {
			s += float64(w[i]) * v[i]
		}
		return s
	}
	bias := func(b []float32, i int, off bool) float64 {
		if off {
			return 0
		}
		return float64(b[i])
	}
	for t := range n {
		xt := make([]float64, dim)
		for i := range xt {
			xt[i] = float64(x[t*dim+i])
		}
		logit := make([]float64, experts)
		for e := range experts {
			logit[e] = dot(router[e*dim:(e+1)*dim], xt) + bias(rb, e, rule.noRouterBias)
		}
		order := make([]int, experts)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return -cmpF(logit[a], logit[b]) })
		sel := order[:used]
		w := make([]float64, used)
		if rule.gatingSoftmax {
			var sum float64
			for e := range experts {
				sum += math.Exp(logit[e])
			}
			for i, e := range sel {
				w[i] = math.Exp(logit[e]) / sum
			}
		} else {
			var sum float64
			for i, e := range sel {
				w[i] = math.Exp(logit[e] - logit[sel[0]])
				sum += w[i]
			}
			for i := range w {
				w[i] /= sum
			}
		}
		for i, e := range sel {
			h := make([]float64, hidden)
			for r := range hidden {
				g := dot(gate[(e*hidden+r)*dim:(e*hidden+r+1)*dim], xt) + bias(gb, e*hidden+r, rule.noGateBias)
				u := dot(up[(e*hidden+r)*dim:(e*hidden+r+1)*dim], xt) + float64(ub[e*hidden+r])
				if rule.silu {
					h[r] = g / (1 + math.Exp(-g)) * u
					continue
				}
				xc := math.Min(g, limit)
				yc := math.Max(-limit, math.Min(u, limit))
				h[r] = xc / (1 + math.Exp(-alpha*xc)) * (yc + 1)
			}
			for r := range dim {
				d := dot(down[(e*dim+r)*hidden:(e*dim+r+1)*hidden], h) + bias(db, e*dim+r, rule.noDownBias)
				out[t*dim+r] += w[i] * d
			}
		}
	}
	return out
}

// TestMoEGptOSS runs MoE ops of gpt-oss's conventions (router and expert
// biases, softmax_weight gating, swiglu_oai) against oaiRef, over f32,
// f16 and Q8_0 experts, decode and prefill rows, a limit that clamps
// many gate and up values and gpt-oss's own; and shows that the
// reference with one of the rules switched (qwen3moe's gating, a bias
// dropped, silu) is far from what the backend gives.
func TestMoEGptOSS(t *testing.T) {
	const dim, hidden, experts, used = 64, 32, 8, 3
	rng := rand.New(rand.NewPCG(7, 8))
	emb := randVals(rng, 5*dim, 1)
	router := randVals(rng, experts*dim, 0.15)
	rb := randVals(rng, experts, 0.5)
	gate, up := randVals(rng, experts*hidden*dim, 0.2), randVals(rng, experts*hidden*dim, 0.2)
	gb, ub := randVals(rng, experts*hidden, 0.5), randVals(rng, experts*hidden, 0.5)
	down, db := randVals(rng, experts*dim*hidden, 0.2), randVals(rng, experts*dim, 0.5)
	// Q8_0 blocks (f16 d, 32 int8) of the values, rounded here: the
	// reference reads the blocks back through tensors' decoder.
	q8 := func(n string, s []int, v []float32) (*tensors.Tensor, error) {
		bb := tensors.Q8_0.BlockBytes()
		b := make([]byte, len(v)/32*bb)
		for i := range len(v) / 32 {
			blk, vs := b[i*bb:(i+1)*bb], v[i*32:(i+1)*32]
			var amax float64
			for _, x := range vs {
				amax = max(amax, math.Abs(float64(x)))
			}
			d := tensors.F16Bits(float32(amax / 127))
			blk[0], blk[1] = byte(d), byte(d>>8)
			for j, x := range vs {
				blk[2+j] = byte(int8(math.Round(float64(x) / (amax / 127))))
			}
		}
		return &tensors.Tensor{Name: n, DType: tensors.Q8_0, Shape: s, Data: b}, nil
	}
	for _, st := range []struct {
		name string
		make func(name string, shape []int, v []float32) (*tensors.Tensor, error)
	}{
		{"f32", func(n string, s []int, v []float32) (*tensors.Tensor, error) {
			return tensors.FromF32(n, s, v, tensors.F32)
		}},
		{"f16", func(n string, s []int, v []float32) (*tensors.Tensor, error) {
			return tensors.FromF32(n, s, v, tensors.F16)
		}},
		{"q8_0", q8},
	} {
		ws := []*tensors.Tensor{f32Tensor(t, "emb", []int{5, dim}, emb), f32Tensor(t, "router", []int{experts, dim}, router),
			f32Tensor(t, "rb", []int{experts}, rb), f32Tensor(t, "gb", []int{experts, hidden}, gb),
			f32Tensor(t, "ub", []int{experts, hidden}, ub), f32Tensor(t, "db", []int{experts, dim}, db)}
		ts, ref := expertTensors(t, st.make, experts, hidden, dim, gate, up, down)
		ws = append(ws, ts...)
		for _, params := range []fusion.SwiGLUOAIParams{{Alpha: 1.702, Limit: 0.75}, fusion.SwiGLUOAIDefault} {
			for _, n := range []int{1, 5} {
				name := fmt.Sprintf("%s/limit%g/t%d", st.name, params.Limit, n)
				g := &fusion.Graph{Tokens: n}
				x := g.NewBuf("x", n, dim)
				out := g.NewBuf("out", n, dim)
				g.Add(&fusion.EmbedOp{Out: x, Weight: "emb"})
				g.Add(&fusion.MoEOp{Out: out, In: x, Router: "router", Gate: "gate", Up: "up", Down: "down",
					Experts: experts, Used: used, Hidden: hidden, Act: fusion.ActSwiGLUOAI, SwiGLUOAI: params,
					Gating: fusion.GatingSoftmaxWeight, RouterBias: "rb", GateBias: "gb", UpBias: "ub", DownBias: "db"})
				g.Logits = out
				got := compile(t, g, ws, 2).run(t, seq(n), 0)
				ref := func(r oaiRule) []float64 {
					return oaiRef(emb[:n*dim], router, rb, ref["gate"], gb, ref["up"], ub, ref["down"], db,
						dim, hidden, experts, used, float64(params.Alpha), float64(params.Limit), r)
				}
				assertClose(t, name, got, ref(oaiRule{}), 1e-5)
				// Dynamic math: each product's input quantized to int8
				// (per 32 values: the gated rows reach ±56, so an error
				// is measured against the largest output).
				dyn := cpu.New(cpu.Options{Threads: 2, Math: cpu.MathDynamic})
				dw, err := dyn.LoadWeights(context.Background(), ws)
				if err != nil {
					t.Fatal(err)
				}
				dp, err := dyn.Compile(g, dw, nil)
				if err != nil {
					t.Fatal(err)
				}
				dgot, want := (&harness{be: dyn, prog: dp}).run(t, seq(n), 0), ref(oaiRule{})
				var worst, scale float64
				for i := range want {
					worst, scale = max(worst, math.Abs(float64(dgot[i])-want[i])), max(scale, math.Abs(want[i]))
				}
				if !(worst <= 2e-2*scale) {
					t.Errorf("%s dynamic: error %.3g of outputs up to %.3g", name, worst, scale)
				}
				for _, sw := range []struct {
					name string
					rule oaiRule
				}{
					{"qwen3moe gating", oaiRule{gatingSoftmax: true}},
					{"no router bias", oaiRule{noRouterBias: true}},
					{"no gate bias", oaiRule{noGateBias: true}},
					{"no down bias", oaiRule{noDownBias: true}},
					{"silu", oaiRule{silu: true}},
				} {
					want := ref(sw.rule)
					var worst float64
					for i := range want {
						worst = max(worst, math.Abs(float64(got[i])-want[i])/max(1, math.Abs(want[i])))
					}
					if worst < 1e-2 {
						t.Errorf("%s: the reference with %s is within %.3g of the backend", name, sw.name, worst)
					}
				}
			}
		}
	}
}
