package cpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestPrefillGEMMMatchesDecode: in dynamic math a prefill product of int8
// and int4 weights with binary16 scales per 32 or one scale per row
// (binary16, or f32 as random int8 models have: the GEMM over repacked
// rows, where the CPU has it), and of f32 and f16 weights (the f32 GEMM,
// where the CPU has it), gives every token the values of that token's own
// decode product (the row kernels), within rounding, for ragged token
// counts, a row count that fills neither a packed group, a register tile
// nor a tile, and one or two threads.
func TestPrefillGEMMMatchesDecode(t *testing.T) {
	const rows, cols = 37, 96
	rng := rand.New(rand.NewPCG(3, 4))
	for _, wt := range []weightType{{"int8-block32", tensors.I8, 32}, {"int4-block32", tensors.I4, 32}, {"f32", tensors.F32, 0}, {"f16", tensors.F16, 0},
		{"int8-row", tensors.I8, 0}, {"int4-row", tensors.I4, 0}, {"int8-row-f32", tensors.I8, -1}} {
		var w *tensors.Tensor
		if wt.block < 0 {
			// One f32 scale per row, as the synthetic models' int8.
			var err error
			if w, err = tensors.Quantize("w", []int{rows, cols}, randVals(rng, rows*cols, 0.05), wt.dtype, 0, tensors.F32); err != nil {
				t.Fatal(err)
			}
			w.Scales.Name = model.ScaleName("w")
		} else {
			w = storeAs(t, "w", rows, cols, wt, rng)
		}
		for _, n := range []int{4, 7, 13} {
			x := f32Tensor(t, "x", []int{n, cols}, randVals(rng, n*cols, 1))
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/T=%d/threads=%d", wt.name, n, threads), func(t *testing.T) {
					prefill := dynamicProduct(t, n, rows, cols, []*tensors.Tensor{w, x}, threads)
					got := prefill.run(t, seq(n), 0)
					decode := dynamicProduct(t, 1, rows, cols, []*tensors.Tensor{w, x}, threads)
					for tok := range n {
						one := decode.run(t, []int32{int32(tok)}, 0)
						want := make([]float64, rows)
						for i, v := range one {
							want[i] = float64(v)
						}
						assertClose(t, fmt.Sprintf("token %d", tok), got[tok*rows:(tok+1)*rows], want, 1e-5)
					}
				})
			}
		}
	}
}

// TestKGEMMMatchesDotK: in dynamic math, products of Q2_K ... Q6_K
// weights (the K-quant GEMM over repacked rows where the CPU has it: four
// tokens at a time in prefill, one in decode) and of IQ4_XS and IQ3_S
// weights (their rows kernels) give every token exactly the
// bits of the pure-Go one-row kernel DotK on the stored rows and that
// token's Q8_K activations (prefill where it is dynamic), for ragged token
// counts, a row count that fills neither a packed group nor a tile, two
// blocks per row and one or two threads.
func TestKGEMMMatchesDotK(t *testing.T) {
	const rows, cols = 37, 512
	rng := rand.New(rand.NewPCG(5, 6))
	for _, wt := range []struct {
		weightType
		kq simd.KQuant
	}{{weightType{"q4_k", tensors.Q4K, 0}, simd.Q4K}, {weightType{"q5_k", tensors.Q5K, 0}, simd.Q5K}, {weightType{"q6_k", tensors.Q6K, 0}, simd.Q6K},
		{weightType{"q2_k", tensors.Q2K, 0}, simd.Q2K}, {weightType{"q3_k", tensors.Q3K, 0}, simd.Q3K},
		{weightType{"iq4_xs", tensors.IQ4_XS, 0}, simd.IQ4XS}, {weightType{"iq3_s", tensors.IQ3_S, 0}, simd.IQ3S}} {
		w := storeAs(t, "w", rows, cols, wt.weightType, rng)
		rb := len(w.Data) / rows
		for _, n := range []int{4, 7, 13} {
			xv := randVals(rng, n*cols, 1)
			x := f32Tensor(t, "x", []int{n, cols}, xv)
			q, d, qs := make([]int8, n*cols), make([]float32, n*cols/simd.QK), make([]int16, n*cols/simd.QKSum)
			simd.QuantizeQ8K(q, d, qs, xv)
			want := func(tok, r int) float32 {
				k := tok * cols
				return simd.Generic.DotK(wt.kq, w.Data[r*rb:(r+1)*rb], q[k:k+cols], d[k/simd.QK:(k+cols)/simd.QK], qs[k/simd.QKSum:(k+cols)/simd.QKSum])
			}
			// Without either kernel (Q2_K and Q3_K without AVX2)
			// prefill takes the weights exactly; IQ4_XS takes its
			// rows kernel per token where it has one, IQ3_S is exact.
			dynPrefill := simd.HasGemmK(wt.kq) || simd.HasKx4(wt.kq) || wt.kq == simd.IQ4XS && simd.HasKRows(wt.kq)
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/T=%d/threads=%d", wt.name, n, threads), func(t *testing.T) {
					got := dynamicProduct(t, n, rows, cols, []*tensors.Tensor{w, x}, threads).run(t, seq(n), 0)
					decode := dynamicProduct(t, 1, rows, cols, []*tensors.Tensor{w, x}, threads)
					for tok := range n {
						one := decode.run(t, []int32{int32(tok)}, 0)
						for r := range rows {
							if v := want(tok, r); dynPrefill && got[tok*rows+r] != v || one[r] != v {
								t.Fatalf("token %d row %d: prefill %g, decode %g, want exactly %g", tok, r, got[tok*rows+r], one[r], v)
							}
						}
					}
				})
			}
		}
	}
}

// dynamicProduct compiles y = W·x for tokens rows of x (embedded from the
// f32 table "x") in dynamic math.
func dynamicProduct(t *testing.T, tokens, rows, cols int, ws []*tensors.Tensor, threads int) *harness {
	t.Helper()
	g := &fusion.Graph{Tokens: tokens}
	x := g.NewBuf("x", tokens, cols)
	y := g.NewBuf("y", tokens, rows)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
	g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w"}})
	g.Logits = y
	be := cpu.New(cpu.Options{Threads: threads, Math: cpu.MathDynamic})
	t.Cleanup(func() { be.Close() })
	w, err := be.LoadWeights(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	p, err := be.Compile(g, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{be: be, prog: p}
}

// TestPackedDecodeMatchesRowKernels: in dynamic math a decode product of
// int8 and int4 weights with binary16 scales per 32 (int4: the one-token
// GEMM over the packed copy where the CPU has it, a partial last group
// included; int8: the SIMD row kernels) gives each row the value of the pure-Go row kernel (DotQ8 / DotQ4) on
// the stored weights and the token's int8 activations, within rounding,
// for a row count that fills no packed group and one or two threads.
func TestPackedDecodeMatchesRowKernels(t *testing.T) {
	const rows, cols = 37, 96
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wt := range []weightType{{"int8-block32", tensors.I8, 32}, {"int4-block32", tensors.I4, 32}} {
		w := storeAs(t, "w", rows, cols, wt, rng)
		ws := make([]uint16, len(w.Scales.Data)/2)
		for i := range ws {
			ws[i] = uint16(w.Scales.Data[2*i]) | uint16(w.Scales.Data[2*i+1])<<8
		}
		const n = 3
		xv := randVals(rng, n*cols, 1)
		x := f32Tensor(t, "x", []int{n, cols}, xv)
		nb := cols / simd.QBlock
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads=%d", wt.name, threads), func(t *testing.T) {
				decode := dynamicProduct(t, 1, rows, cols, []*tensors.Tensor{w, x}, threads)
				for tok := range n {
					q, d := make([]int8, cols), make([]float32, nb)
					simd.QuantizeQ8(q, d, xv[tok*cols:(tok+1)*cols], wt.dtype == tensors.I4)
					want := make([]float64, rows)
					for r := range rows {
						s := ws[r*nb : (r+1)*nb]
						if wt.dtype == tensors.I4 {
							want[r] = float64(simd.Generic.DotQ4(w.Data[r*cols/2:(r+1)*cols/2], s, 1, q, d))
						} else {
							wr := w.Data[r*cols : (r+1)*cols]
							want[r] = float64(simd.Generic.DotQ8(unsafeInt8(wr), s, 1, q, d))
						}
					}
					assertClose(t, fmt.Sprintf("token %d", tok), decode.run(t, []int32{int32(tok)}, 0), want, 1e-5)
				}
			})
		}
	}
}

func unsafeInt8(b []byte) []int8 {
	out := make([]int8, len(b))
	for i, v := range b {
		out[i] = int8(v)
	}
	return out
}

// TestMixedLayoutStep: in one decode step whose input first meets an int8
// matrix with one scale per row (row kernels, natural order, no block
// sums) and then an int4 matrix repacked for the GEMM (natural order, block
// sums), the second product still gets its block sums: each output equals
// its matrix's product alone.
func TestMixedLayoutStep(t *testing.T) {
	const rows, cols, n = 37, 96, 3
	rng := rand.New(rand.NewPCG(9, 10))
	w8 := storeAs(t, "w8", rows, cols, weightType{"int8-row", tensors.I8, cols}, rng)
	w4 := storeAs(t, "w4", rows, cols, weightType{"int4-block32", tensors.I4, 32}, rng)
	x := f32Tensor(t, "x", []int{n, cols}, randVals(rng, n*cols, 1))
	g := &fusion.Graph{Tokens: 1}
	xb := g.NewBuf("x", 1, cols)
	y8, y4 := g.NewBuf("y8", 1, rows), g.NewBuf("y4", 1, rows)
	g.Add(&fusion.EmbedOp{Out: xb, Weight: "x"})
	g.Add(&fusion.MultiMatMulOp{In: xb, Outs: []fusion.Product{
		{Out: y8, Projection: fusion.Projection{Weight: "w8"}},
		{Out: y4, Projection: fusion.Projection{Weight: "w4"}},
	}})
	g.Logits = y4
	be := cpu.New(cpu.Options{Threads: 1, Math: cpu.MathDynamic})
	t.Cleanup(func() { be.Close() })
	ws, err := be.LoadWeights(context.Background(), []*tensors.Tensor{w8, w4, x})
	if err != nil {
		t.Fatal(err)
	}
	p, err := be.Compile(g, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	mixed := &harness{be: be, prog: p}
	alone := dynamicProduct(t, 1, rows, cols, []*tensors.Tensor{renamed(w4, "w"), x}, 1)
	for tok := range n {
		want := alone.run(t, []int32{int32(tok)}, 0)
		w64 := make([]float64, rows)
		for i, v := range want {
			w64[i] = float64(v)
		}
		assertClose(t, fmt.Sprintf("token %d", tok), mixed.run(t, []int32{int32(tok)}, 0), w64, 0)
	}
}

func renamed(t *tensors.Tensor, name string) *tensors.Tensor {
	c := *t
	c.Name = name
	if t.Scales != nil {
		s := *t.Scales
		s.Name = model.ScaleName(name)
		c.Scales = &s
	}
	return &c
}
