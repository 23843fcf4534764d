package cpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// TestPrefillGEMMMatchesDecode: in dynamic math a prefill product of int8
// and int4 weights with binary16 scales per 32 (the GEMM over repacked
// rows, where the CPU has it) gives every token the values of that token's
// own decode product (the row kernels), within rounding, for ragged token
// counts, a row count that fills neither a packed group nor a tile, and
// one or two threads.
func TestPrefillGEMMMatchesDecode(t *testing.T) {
	const rows, cols = 37, 96
	rng := rand.New(rand.NewPCG(3, 4))
	for _, wt := range []weightType{{"int8-block32", tensors.I8, 32}, {"int4-block32", tensors.I4, 32}} {
		w := storeAs(t, "w", rows, cols, wt, rng)
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

// TestPrefillKGEMMMatchesDecode: in dynamic math a prefill product of
// Q4_K, Q5_K and Q6_K weights (the K-quant GEMM over repacked rows, where
// the CPU has it) gives every token exactly the bits of that token's own
// decode product (the K-quant row kernels), for ragged token counts, a
// row count that fills neither a packed group nor a tile, two blocks per
// row and one or two threads.
func TestPrefillKGEMMMatchesDecode(t *testing.T) {
	const rows, cols = 37, 512
	rng := rand.New(rand.NewPCG(5, 6))
	for _, wt := range []weightType{{"q4_k", tensors.Q4K, 0}, {"q5_k", tensors.Q5K, 0}, {"q6_k", tensors.Q6K, 0}} {
		w := storeAs(t, "w", rows, cols, wt, rng)
		for _, n := range []int{4, 7, 13} {
			x := f32Tensor(t, "x", []int{n, cols}, randVals(rng, n*cols, 1))
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/T=%d/threads=%d", wt.name, n, threads), func(t *testing.T) {
					got := dynamicProduct(t, n, rows, cols, []*tensors.Tensor{w, x}, threads).run(t, seq(n), 0)
					decode := dynamicProduct(t, 1, rows, cols, []*tensors.Tensor{w, x}, threads)
					for tok := range n {
						one := decode.run(t, []int32{int32(tok)}, 0)
						for i, v := range one {
							if g := got[tok*rows+i]; g != v {
								t.Fatalf("token %d row %d: prefill %g, decode %g", tok, i, g, v)
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
