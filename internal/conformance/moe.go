package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// moeTol: a MoE row is a sum of up to 8 weighted down products (40 terms)
// of GLU rows (64-term dot products), summed in another order than the
// CPU's, after a softmax through the device's exp.
var moeTol = Tolerance{Abs: 5e-5, Rel: 5e-5}

// MoECases returns the parity cases of fusion.MoEOp: every stored type the
// GPU's expert kernels read (f32, f16, bf16, int8 and int4 with f16 block
// scales), several top-k counts (1, 2, 3 of 4 or 8 experts, and all 8),
// renormalization on and off, SiLU and GELU-tanh, decode (1 row) and
// prefill (5 and 40 rows) steps; and llama.cpp's block types (K-quants,
// Q4_1, Q5_0, Q5_1) kept in their blocks.
func MoECases() []Case {
	type route struct {
		experts, used int
		norm          bool
		act           string
	}
	routes := []route{{4, 1, false, "silu"}, {4, 2, true, "silu"}, {8, 3, true, "gelu_tanh"}, {8, 3, false, "silu"}, {8, 8, true, "silu"}}
	types := []weightType{
		{tensors.F32, 0, 0}, {tensors.F16, 0, 0}, {tensors.BF16, 0, 0},
		{tensors.I8, 8, tensors.F16}, {tensors.I4, 8, tensors.F16}, {tensors.I8, 0, tensors.F32},
	}
	var cs []Case
	for i, wt := range types {
		for j, rt := range routes {
			tokens := fusedTokens[(i+j)%len(fusedTokens)]
			tol := moeTol
			if rt.act == "gelu_tanh" {
				// gelu_tanh rounds its input to binary16 (gluCases).
				tol = Tolerance{Abs: 5e-5, Rel: 1e-3}
			}
			cs = append(cs, Case{
				Name:  fmt.Sprintf("moe/%s_e%d_k%d_norm%v_%s_t%d", wt, rt.experts, rt.used, rt.norm, rt.act, tokens),
				Build: moeBuild(wt, rt.experts, rt.used, rt.norm, rt.act, tokens, uint64(10*i+j), 64, 40),
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   tol,
			})
		}
	}
	// llama.cpp's block types (BlockTypes), experts 256 wide and of 256
	// units (one K-quant block per row of gate, up and down), each type
	// with a route and a step size in turn: 1 row runs the per-slot
	// kernels, 5 and 40 rows the grouped ones (and each case's second
	// step, of 1 row, the per-slot ones).
	// Prefill steps stay at 5 rows: see moeBlockTokens.
	for i, dt := range BlockTypes {
		if slices.Contains(GridTypes, dt) {
			continue
		}
		rt := routes[i%len(routes)]
		tokens := moeBlockTokens[i%len(moeBlockTokens)]
		tol := moeBlockTol
		if rt.act == "gelu_tanh" {
			tol.Rel = 1e-3 // its input rounded to binary16, as above
		}
		cs = append(cs, Case{
			Name:  fmt.Sprintf("moe/%s_e%d_k%d_norm%v_%s_t%d", dt, rt.experts, rt.used, rt.norm, rt.act, tokens),
			Build: moeBuild(weightType{dt, 0, 0}, rt.experts, rt.used, rt.norm, rt.act, tokens, uint64(100+i), 256, 256),
			Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
			Tol:   tol,
		})
	}
	return append(cs, moeOAICases()...)
}

// moeOAICases are gpt-oss's conventions (fusion.MoEOp with RouterBias,
// GatingSoftmaxWeight, expert biases and ActSwiGLUOAI): f32 experts, int8
// and int4 with scales (their gate and up biases copied next to the up
// scales) and two block types, decode and prefill (grouped) steps, with a
// limit that clamps many gate and up values (0.75) and gpt-oss's (7).
func moeOAICases() []Case {
	types := []weightType{{tensors.F32, 0, 0}, {tensors.I8, 8, tensors.F16}, {tensors.I4, 8, tensors.F16}}
	var cs []Case
	for i, wt := range types {
		for j, tokens := range fusedTokens {
			limit := []float32{0.75, 7}[(i+j)%2]
			cs = append(cs, Case{
				Name:  fmt.Sprintf("moe/%s_e8_k3_oai_limit%g_t%d", wt, limit, tokens),
				Build: moeOAIBuild(wt, 8, 3, limit, tokens, uint64(200+10*i+j), 64, 40, ""),
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   moeTol,
			})
		}
	}
	for i, dt := range []tensors.DType{tensors.Q8_0, tensors.Q4K} {
		for j, tokens := range moeBlockTokens {
			cs = append(cs, Case{
				Name:  fmt.Sprintf("moe/%s_e4_k2_oai_limit7_t%d", dt, tokens),
				Build: moeOAIBuild(weightType{dt, 0, 0}, 4, 2, 7, tokens, uint64(300+10*i+j), 256, 256, ""),
				Steps: []Step{{seq(tokens), 0}, {seq(1), 0}},
				Tol:   moeBlockTol,
			})
		}
	}
	// Some of the biases alone: each of moe_glu's two layouts (unscaled:
	// the gate bias at s, the up bias at s2; scaled: either after the up
	// scales) with one of its biases, and no router or down bias.
	for i, c := range []struct {
		wt     weightType
		tokens int
		omit   string
	}{
		{types[0], 1, "router up"}, {types[0], 5, "gate down"},
		{types[1], 1, "up down"}, {types[2], 5, "router gate"},
	} {
		cs = append(cs, Case{
			Name:  fmt.Sprintf("moe/%s_e8_k3_oai_limit0.75_no_%s_t%d", c.wt, strings.ReplaceAll(c.omit, " ", "_"), c.tokens),
			Build: moeOAIBuild(c.wt, 8, 3, 0.75, c.tokens, uint64(400+i), 64, 40, c.omit),
			Steps: []Step{{seq(c.tokens), 0}, {seq(1), 0}},
			Tol:   moeTol,
		})
	}
	return cs
}

// moeOAIBuild is moeBuild's graph with gpt-oss's conventions: router and
// expert biases (f32, random), softmax_weight gating and swiglu_oai of
// gpt-oss's alpha and the given limit, with a milder router; omit names
// the biases left out (of "router", "gate", "up", "down").
func moeOAIBuild(wt weightType, experts, used int, limit float32, tokens int, seed uint64, dim, hidden int, omit string) func() (*fusion.Graph, []*tensors.Tensor) {
	build := moeBuild(wt, experts, used, false, "silu", tokens, seed, dim, hidden)
	return func() (*fusion.Graph, []*tensors.Tensor) {
		g, ws := build()
		for _, o := range g.Ops {
			if m, ok := o.(*fusion.MoEOp); ok {
				m.Act, m.SwiGLUOAI = fusion.ActSwiGLUOAI, fusion.SwiGLUOAIParams{Alpha: fusion.SwiGLUOAIDefault.Alpha, Limit: limit}
				m.Gating = fusion.GatingSoftmaxWeight
				for _, b := range []struct {
					field *string
					name  string
				}{{&m.RouterBias, "router"}, {&m.GateBias, "gate"}, {&m.UpBias, "up"}, {&m.DownBias, "down"}} {
					if !slices.Contains(strings.Fields(omit), b.name) {
						*b.field = b.name + "_b"
					}
				}
			}
		}
		r := rand.New(rand.NewPCG(23, seed))
		// A router of logits about 1 in size, so the weights of the
		// selected experts are all far from 0 (moeBuild's, of logits
		// up to 3*sqrt(dim/64), gives its top expert almost all).
		for i, w := range ws {
			if w.Name == "router" {
				ws[i] = mustTensor(tensors.FromF32("router", []int{experts, dim}, uniform(r, experts*dim, 3/float32(math.Sqrt(float64(dim)))), tensors.F32))
			}
		}
		bias := func(name string, shape ...int) *tensors.Tensor {
			n := 1
			for _, d := range shape {
				n *= d
			}
			return mustTensor(tensors.FromF32(name, shape, uniform(r, n, 0.5), tensors.F32))
		}
		return g, append(ws, bias("router_b", experts), bias("gate_b", experts, hidden), bias("up_b", experts, hidden), bias("down_b", experts, dim))
	}
}

// moeBlockTokens are the block cases' first steps: decode (per-slot
// kernels) and a 5-row prefill (grouped). Not 40 rows: with experts 256
// wide and 256 units, a 40-row grouped step takes 3 to 17 s per case on
// SwiftShader (it once crashed the process: the wgpu fence timeout that
// internal/webgpu's TestLongSubmission covers); the dense cases cover 40-row
// grouped steps at 64 x 40.
var moeBlockTokens = []int{1, 5}

// moeBlockTol: block-type weights are dequantized bit for bit, but their
// rows are 256 long (sums of 256 products in another order than the
// CPU's) and reach about 1 in magnitude.
var moeBlockTol = Tolerance{Abs: 1e-4, Rel: 1e-4}

// moeBuild makes a graph of one MoE op over embedded rows (dim wide,
// hidden units per expert) with random weights of type wt (a llama.cpp
// block type: BlockMatrix's values).
func moeBuild(wt weightType, experts, used int, norm bool, act string, tokens int, seed uint64, dim, hidden int) func() (*fusion.Graph, []*tensors.Tensor) {
	return func() (*fusion.Graph, []*tensors.Tensor) {
		r := rand.New(rand.NewPCG(17, seed))
		g := &fusion.Graph{Tokens: tokens}
		x := input(g, "x", dim)
		g.Logits = g.Add(&fusion.MoEOp{Out: g.NewBuf("y", tokens, dim), In: x, Router: "router", Gate: "gate", Up: "up", Down: "down",
			Experts: experts, Used: used, Hidden: hidden, Act: mustParse(fusion.ParseAct(act)), NormTopK: norm})
		stack := func(name string, rows, cols int) *tensors.Tensor {
			shape := []int{experts, rows, cols}
			if wt.dt.Block() {
				t := BlockMatrix(r, name, experts*rows, cols, wt.dt)
				t.Shape = shape
				return t
			}
			vals := uniform(r, experts*rows*cols, 0.5)
			if wt.dt.Quantized() {
				return mustTensor(tensors.Quantize(name, shape, vals, wt.dt, wt.block, wt.scale))
			}
			return mustTensor(tensors.FromF32(name, shape, vals, wt.dt))
		}
		return g, []*tensors.Tensor{matrix(r, "x", vocab, dim, tensors.F32, 0, 0), matrix(r, "router", experts, dim, tensors.F32, 0, 0),
			stack("gate", hidden, dim), stack("up", hidden, dim), stack("down", dim, hidden)}
	}
}

// MoEGraph is a MoE case's graph (f32 weights, top-2 of 4 experts,
// renormalized) for the given rows, and its weights.
func MoEGraph(tokens int) (*fusion.Graph, []*tensors.Tensor) {
	return moeBuild(weightType{tensors.F32, 0, 0}, 4, 2, true, "silu", tokens, 0, 64, 40)()
}

// MoEOAIGraph is a gpt-oss MoE case's graph (f32 weights and biases,
// top-3 of 8 experts, swiglu_oai of limit 7) for the given rows, and its
// weights: the router bias is "router_b", the expert biases "gate_b",
// "up_b" and "down_b".
func MoEOAIGraph(tokens int) (*fusion.Graph, []*tensors.Tensor) {
	return moeOAIBuild(weightType{tensors.F32, 0, 0}, 8, 3, 7, tokens, 0, 64, 40, "")()
}

// Worst runs case c on internal/backend/cpu and, with its graph edited by edit
// (nil: as built), on the backend, and returns the largest
// |got - cpu| / (Abs + Rel*|cpu|) over every step's logits: at most 1 where
// RunCases would pass. It shows a case can fail: an edit of the rule the
// op computes (its top-k count, its renormalization) must move the result
// past the tolerance.
func Worst(t *testing.T, c Case, newBackend Factory, edit func(*fusion.Graph)) float64 {
	t.Helper()
	g, ws := c.Build()
	ref := runSteps(t, cpu.New(cpu.Options{Threads: 1}), g, ws, c.Steps, c.Masks)
	g2, ws2 := c.Build()
	if edit != nil {
		edit(g2)
	}
	be := newBackend(t)
	defer be.Close()
	got := runSteps(t, be, g2, ws2, c.Steps, c.Masks)
	var worst float64
	for s := range c.Steps {
		for i := range ref[s] {
			d := math.Abs(float64(got[s][i]) - float64(ref[s][i]))
			lim := c.Tol.Abs + c.Tol.Rel*math.Abs(float64(ref[s][i]))
			if math.IsNaN(d) {
				return math.Inf(1)
			}
			worst = max(worst, d/lim)
		}
	}
	return worst
}
