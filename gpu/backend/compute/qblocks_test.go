package compute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/backend/compute"
	"github.com/gpurun/gpurun/gpu/internal/conformance"
)

// TestBlockTypeConformance runs the block-type parity cases (llama.cpp's
// Q2_K ... Q6_K, Q4_1, Q5_0, Q5_1 weights) against gpu/backend/cpu on WebGPU and Vulkan, also with
// weights split into row blocks of at most 4 KiB (Q5_0 rows of 110 bytes
// do not end on words).
func TestBlockTypeConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, opts := range []compute.Options{{}, {MaxBinding: 4096}} {
			t.Run(fmt.Sprintf("split%d", opts.MaxBinding), func(t *testing.T) {
				conformance.RunCases(t, conformance.BlockCases(), func(t testing.TB) gpu.Backend {
					return sharedBackend{backendOn(t, dev, opts)}
				})
			})
		}
	})
}

// BenchmarkMatVecBlocks and BenchmarkMatMulBlocks time one 2048x2048 MatMul
// (decode and a 32-token prefill) with llama.cpp's block types on each
// device, beside f32 and int4 block 32 for ratios within one run.
func BenchmarkMatVecBlocks(b *testing.B) { benchBlocksOnDevices(b, 1) }

func BenchmarkMatMulBlocks(b *testing.B) { benchBlocksOnDevices(b, 32) }

func benchBlocksOnDevices(b *testing.B, tokens int) {
	const rows, cols = 2048, 2048
	types := []tensors.DType{tensors.F32, tensors.I4, tensors.Q4K, tensors.Q5K, tensors.Q6K, tensors.Q5_0}
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			for _, dt := range types {
				b.Run(fmt.Sprintf("%s/t%d", dt, tokens), func(b *testing.B) {
					r := rand.New(rand.NewPCG(9, 9))
					var w *tensors.Tensor
					switch {
					case dt.Block():
						w = conformance.BlockMatrix(r, "w", rows, cols, dt)
					case dt == tensors.I4:
						w = tensorOf(b, r, "w", rows, cols, dt, 32, tensors.F16)
					default:
						w = tensorOf(b, r, "w", rows, cols, dt, 0, 0)
					}
					g := &fusion.Graph{Tokens: tokens}
					x := g.NewBuf("x", tokens, cols)
					g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
					g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("y", tokens, rows), In: x, Projection: fusion.Projection{Weight: "w"}})
					be := backendOn(b, dev, compute.Options{})
					ctx := context.Background()
					ws, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(b, r, "x", vocab, cols, tensors.F32, 0, 0), w})
					if err != nil {
						b.Fatal(err)
					}
					defer ws.Release()
					p, err := be.Compile(g, ws, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer p.Release()
					tk := make([]int32, tokens)
					out := make([]float32, tokens*rows)
					run := func() {
						if err := p.Run(ctx, tk, 0); err != nil {
							b.Fatal(err)
						}
					}
					run()
					if _, err := p.Logits(out); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						run()
					}
					if _, err := p.Logits(out); err != nil { // waits for the queue
						b.Fatal(err)
					}
					b.StopTimer()
					b.ReportMetric(float64(2*rows*cols*tokens*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}
