package kernels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/kernels"
	"github.com/gpurun/gpurun/tensors"
)

// BenchmarkGreedyPick times what greedy decoding adds after the logits of a
// step exist, per device and vocabulary size: "host" reads the whole row
// back and scans it, "device" runs fusion.Argmax and reads one value. Both
// include the same embedding lookup that produces the row.
func BenchmarkGreedyPick(b *testing.B) {
	for i, d := range devices {
		b.Run(d.name, func(b *testing.B) {
			dev := deviceAt(b, i)
			for _, n := range []int{512, 32000, 256000} {
				for _, onDevice := range []bool{false, true} {
					mode := "host"
					if onDevice {
						mode = "device"
					}
					b.Run(fmt.Sprintf("v%d/%s", n, mode), func(b *testing.B) { benchGreedyPick(b, dev, n, onDevice) })
				}
			}
		})
	}
}

func benchGreedyPick(b *testing.B, dev gpu.Device, n int, onDevice bool) {
	r := rand.New(rand.NewPCG(4, uint64(n)))
	g := &fusion.Graph{Tokens: 1}
	row := g.Add(fusion.Op{Kind: fusion.Embed, Out: g.NewBuf("row", 1, n), Weight: "x"})
	g.Logits = row
	if onDevice {
		g.Logits = g.Add(fusion.Op{Kind: fusion.Argmax, Out: g.NewBuf("id", 1, 1), In: []fusion.Buf{row}})
	}
	be := backendOn(b, dev, kernels.Options{})
	ctx := context.Background()
	ws, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(b, r, "x", 2, n, tensors.F32, 0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Release()
	p, err := be.Compile(g, ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Release()
	out := make([]float32, n)
	pick := func() int {
		if err := p.Run(ctx, []int32{1}, 0); err != nil {
			b.Fatal(err)
		}
		k, err := p.Logits(out)
		if err != nil {
			b.Fatal(err)
		}
		if onDevice {
			return int(out[0])
		}
		best := 0
		for i, v := range out[:k] {
			if v > out[best] {
				best = i
			}
		}
		return best
	}
	want := pick()
	b.ResetTimer()
	for range b.N {
		if got := pick(); got != want {
			b.Fatalf("pick %d, first %d", got, want)
		}
	}
}
