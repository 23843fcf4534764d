package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"
)

// TestNarrowMatMul multiplies by narrow binary16 matrices (LoRA B: [out,
// rank]) in dynamic math, where decode steps (1 to 3 rows) take the
// transposed copy (colsT, a weighted sum of columns) and prefill the rows,
// and compares with the float64 product of the binary16 values, plain and
// accumulated, on one and three threads. A matrix too wide or too short
// for the transposed copy must not get one.
func TestNarrowMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, shape := range []struct {
		rows, cols int
		narrow     bool
	}{{300, 4, true}, {2048, 16, true}, {768, 64, true}, {100, 64, false}, {256, 65, false}} {
		rows, cols := shape.rows, shape.cols
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * 0.1)
		}
		w, err := tensors.FromF32("b", []int{rows, cols}, vals, tensors.F16)
		if err != nil {
			t.Fatal(err)
		}
		deq, err := w.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for _, tokens := range []int{1, 2, 3, 9} {
			for _, acc := range []bool{false, true} {
				for _, threads := range []int{1, 3} {
					t.Run(fmt.Sprintf("%dx%d/T=%d/acc=%v/threads=%d", rows, cols, tokens, acc, threads), func(t *testing.T) {
						xv := make([]float32, tokens*cols)
						yv := make([]float32, tokens*rows)
						for i := range xv {
							xv[i] = float32(rng.NormFloat64())
						}
						for i := range yv {
							yv[i] = float32(rng.NormFloat64())
						}
						g := &fusion.Graph{Tokens: tokens}
						x, y := g.NewBuf("x", tokens, cols), g.NewBuf("y", tokens, rows)
						g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
						g.Add(&fusion.EmbedOp{Out: y, Weight: "y"})
						g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "b"}, Accumulate: acc})
						g.Logits = y
						be := New(Options{Threads: threads, Math: MathDynamic})
						defer be.Close()
						xt, _ := tensors.FromF32("x", []int{tokens, cols}, xv, tensors.F32)
						yt, _ := tensors.FromF32("y", []int{tokens, rows}, yv, tensors.F32)
						ws, err := be.LoadWeights(context.Background(), []*tensors.Tensor{w, xt, yt})
						if err != nil {
							t.Fatal(err)
						}
						if got := ws.(*weights).byName["b"].colsT != nil; got != shape.narrow {
							t.Fatalf("transposed copy: %v, want %v", got, shape.narrow)
						}
						p, err := be.Compile(g, ws, nil)
						if err != nil {
							t.Fatal(err)
						}
						seq := make([]int32, tokens)
						for i := range seq {
							seq[i] = int32(i)
						}
						if err := p.Run(context.Background(), seq, 0); err != nil {
							t.Fatal(err)
						}
						got := make([]float32, tokens*rows)
						if _, err := p.Logits(got); err != nil {
							t.Fatal(err)
						}
						for tk := range tokens {
							for r := range rows {
								var want float64
								if acc {
									want = float64(yv[tk*rows+r])
								}
								for c := range cols {
									want += float64(deq[r*cols+c]) * float64(xv[tk*cols+c])
								}
								if d := math.Abs(float64(got[tk*rows+r]) - want); d > 1e-5*max(1, math.Abs(want)) {
									t.Fatalf("y[%d][%d] = %g, want %g", tk, r, got[tk*rows+r], want)
								}
							}
						}
					})
				}
			}
		}
	}
}
