package compute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/tensors"
)

// BenchmarkSubmit times the host side of one submission per device: Run
// (the step buffer write and Submit, which on WebGPU encodes the whole
// recorded list again: command buffers cannot be reused there; on Vulkan
// submits the recorded buffer) of a graph of tiny dispatches, with the
// timer stopped while the device runs it. dispatches is the size of a
// stories260K decode step (64) and of 8 of them in one submission (512);
// submit-us/dispatch is the cost a dispatch adds to each submission.
func BenchmarkSubmit(b *testing.B) {
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			for _, n := range []int{64, 512} {
				b.Run(fmt.Sprintf("dispatches=%d", n), func(b *testing.B) { benchSubmit(b, dev, n) })
			}
		})
	}
}

func benchSubmit(b *testing.B, dev gpu.Device, dispatches int) {
	const cols = 64
	r := rand.New(rand.NewPCG(3, 3))
	g := &fusion.Graph{Tokens: 1}
	x := g.NewBuf("x", 1, cols)
	y := g.NewBuf("y", 1, cols)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
	out := y
	for i := 1; i < dispatches; i++ {
		out = g.Add(&fusion.AddOp{Out: y, A: x, B: y})
	}
	g.Logits = out
	be := backendOn(b, dev, compute.Options{})
	ctx := context.Background()
	p := compiled(b, be, g, []*tensors.Tensor{tensorOf(b, r, "x", vocab, cols, tensors.F32, 0, 0)}, nil)
	dst := make([]float32, cols)
	tk := []int32{1}
	for i := 0; i < b.N+1; i++ {
		if i == 1 {
			b.ResetTimer()
		}
		b.StartTimer()
		if err := p.Run(ctx, tk, 0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := p.Logits(dst); err != nil { // waits for the device
			b.Fatal(err)
		}
	}
	us := b.Elapsed().Seconds() * 1e6 / float64(b.N)
	b.ReportMetric(us, "submit-us")
	b.ReportMetric(us/float64(dispatches), "submit-us/dispatch")
}
