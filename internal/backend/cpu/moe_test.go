package cpu_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// TestMoEReadsSelectedExperts runs a MoE op whose router always picks
// experts 3 and 2 of 4 with the bytes of experts 0 and 1 (values and
// scales) overwritten by NaN patterns: the output must be finite and equal
// the float64 reference, so only the selected experts' rows are read. It
// covers each kind of stored type the dense products take (the same kernels), the
// decode path (1 token) and the prefill path (5 tokens), and the weights
// with and without renormalization.
func TestMoEReadsSelectedExperts(t *testing.T) {
	const dim, hidden, experts, used = 64, 32, 4, 2
	rng := rand.New(rand.NewPCG(3, 4))
	emb := make([]float32, 5*dim)
	for i := range emb {
		emb[i] = 0.5 + rng.Float32()/2 // positive: the router's order is known
	}
	router := make([]float32, experts*dim)
	for e := range experts {
		for j := range dim {
			router[e*dim+j] = float32(e+1) * 0.01
		}
	}
	gate, up := randVals(rng, experts*hidden*dim, 0.2), randVals(rng, experts*hidden*dim, 0.2)
	down := randVals(rng, experts*dim*hidden, 0.2)
	type stored struct {
		name string
		make func(name string, shape []int, v []float32) (*tensors.Tensor, error)
	}
	plain := func(dt tensors.DType) func(string, []int, []float32) (*tensors.Tensor, error) {
		return func(n string, s []int, v []float32) (*tensors.Tensor, error) { return tensors.FromF32(n, s, v, dt) }
	}
	quant := func(dt tensors.DType) func(string, []int, []float32) (*tensors.Tensor, error) {
		return func(n string, s []int, v []float32) (*tensors.Tensor, error) {
			return tensors.Quantize(n, s, v, dt, 32, tensors.F16)
		}
	}
	// llama.cpp's block types (Q5_0: f16 d, 4 bytes of high bits, 16 of
	// nibbles per 32 values; Q8_0: f16 d, 32 int8, the type a GGUF's Q8_0
	// experts keep; MXFP4: an E8M0 exponent byte, 16 bytes of E2M1 codes,
	// gpt-oss's experts) take the path of the K-quants: random blocks
	// whose leading scale bytes are head (weights up to 16d, 128d and
	// 6*2^(e-127): about 0.06, 0.06 and 0.05), whatever the values.
	half := func(v float32) []byte { d := tensors.F16Bits(v); return []byte{byte(d), byte(d >> 8)} }
	blocks := func(dt tensors.DType, head []byte) func(string, []int, []float32) (*tensors.Tensor, error) {
		return func(n string, s []int, v []float32) (*tensors.Tensor, error) {
			bb := dt.BlockBytes()
			b := make([]byte, len(v)/32*bb)
			for i := range len(v) / 32 {
				blk := b[i*bb : (i+1)*bb]
				for j := range blk {
					blk[j] = byte(rng.Uint32())
				}
				copy(blk, head)
			}
			return &tensors.Tensor{Name: n, DType: dt, Shape: s, Data: b}, nil
		}
	}
	for _, st := range []stored{{"f32", plain(tensors.F32)}, {"f16", plain(tensors.F16)},
		{"int8 block32", quant(tensors.I8)}, {"int4 block32", quant(tensors.I4)},
		{"q5_0 blocks", blocks(tensors.Q5_0, half(0.004))}, {"q8_0 blocks", blocks(tensors.Q8_0, half(0.0005))},
		{"mxfp4 blocks", blocks(tensors.MXFP4, []byte{120})}} {
		for _, norm := range []bool{true, false} {
			for _, n := range []int{1, 5} {
				ws := []*tensors.Tensor{f32Tensor(t, "emb", []int{5, dim}, emb), f32Tensor(t, "router", []int{experts, dim}, router)}
				ts, ref := expertTensors(t, st.make, experts, hidden, dim, gate, up, down)
				// Experts 0 and 1 are the first half of the values and of
				// the scales: all-ones bytes are NaN in f32, f16 and the
				// f16 scales.
				poison := func(b []byte) []byte {
					b = slices.Clone(b)
					for i := range b[:len(b)/2] {
						b[i] = 0xff
					}
					return b
				}
				for _, tt := range ts {
					tt.Data = poison(tt.Data)
					if tt.Scales != nil {
						tt.Scales.Data = poison(tt.Scales.Data)
					}
				}
				ws = append(ws, ts...)
				g := &fusion.Graph{Tokens: n}
				x := g.NewBuf("x", n, dim)
				out := g.NewBuf("out", n, dim)
				g.Add(&fusion.EmbedOp{Out: x, Weight: "emb"})
				g.Add(&fusion.MoEOp{Out: out, In: x, Router: "router", Gate: "gate", Up: "up", Down: "down",
					Experts: experts, Used: used, Hidden: hidden, Act: fusion.ActSiLU, NormTopK: norm})
				g.Logits = out
				want := moeRef(emb[:n*dim], router, ref["gate"], ref["up"], ref["down"], dim, hidden, experts, used, norm)
				got := compile(t, g, ws, 2).run(t, seq(n), 0)
				assertClose(t, st.name, got, want, 1e-5)
				// Dynamic math quantizes each product's input to int8
				// (int8 and int4 weights): the expert products too.
				dyn := cpu.New(cpu.Options{Threads: 2, Math: cpu.MathDynamic})
				w, err := dyn.LoadWeights(context.Background(), ws)
				if err != nil {
					t.Fatal(err)
				}
				p, err := dyn.Compile(g, w, nil)
				if err != nil {
					t.Fatal(err)
				}
				h := &harness{be: dyn, prog: p}
				assertClose(t, st.name+" dynamic", h.run(t, seq(n), 0), want, 2e-2)
			}
		}
	}
}

// moeRef is MoEOp's contract in float64.
func moeRef(x, router, gate, up, down []float32, dim, hidden, experts, used int, norm bool) []float64 {
	n := len(x) / dim
	out := make([]float64, n*dim)
	dot := func(w []float32, v []float64) float64 {
		var s float64
		for i := range v {
			s += float64(w[i]) * v[i]
		}
		return s
	}
	for t := range n {
		xt := make([]float64, dim)
		for i := range xt {
			xt[i] = float64(x[t*dim+i])
		}
		p := make([]float64, experts)
		var sum float64
		for e := range experts {
			p[e] = math.Exp(dot(router[e*dim:], xt))
			sum += p[e]
		}
		order := make([]int, experts)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return -cmpF(p[a], p[b]) })
		sel := order[:used]
		var ssum float64
		for _, e := range sel {
			ssum += p[e] / sum
		}
		for _, e := range sel {
			w := p[e] / sum
			if norm {
				w /= ssum
			}
			h := make([]float64, hidden)
			for r := range hidden {
				g := dot(gate[(e*hidden+r)*dim:], xt)
				u := dot(up[(e*hidden+r)*dim:], xt)
				h[r] = g / (1 + math.Exp(-g)) * u
			}
			for r := range dim {
				out[t*dim+r] += w * dot(down[(e*dim+r)*hidden:], h)
			}
		}
	}
	return out
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expertTensors makes the stacked expert tensors "gate", "up" ([experts,
// hidden, dim]) and "down" ([experts, dim, hidden]) from their values with
// mk, and returns them with the values they hold (as stored: rounded or
// quantized), by name, for a reference.
func expertTensors(t *testing.T, mk func(string, []int, []float32) (*tensors.Tensor, error), experts, hidden, dim int, gate, up, down []float32) ([]*tensors.Tensor, map[string][]float32) {
	t.Helper()
	var ts []*tensors.Tensor
	ref := map[string][]float32{}
	for _, w := range []struct {
		name  string
		shape []int
		v     []float32
	}{{"gate", []int{experts, hidden, dim}, gate}, {"up", []int{experts, hidden, dim}, up}, {"down", []int{experts, dim, hidden}, down}} {
		tt, err := mk(w.name, w.shape, w.v)
		if err != nil {
			t.Fatal(err)
		}
		if ref[w.name], err = tt.Float32(); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tt)
	}
	return ts, ref
}
