package compute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/tensors"
)

// BenchmarkGreedyPick times what greedy decoding adds after the logits of a
// step exist, per device and vocabulary size: "host" reads the whole row
// back and scans it, "device" runs fusion.Argmax and reads one value. Both
// include the same embedding lookup that produces the row.
func BenchmarkGreedyPick(b *testing.B) {
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
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
	row := g.Add(&fusion.EmbedOp{Out: g.NewBuf("row", 1, n), Weight: "x"})
	g.Logits = row
	if onDevice {
		g.Logits = g.Add(&fusion.ArgmaxOp{Out: g.NewBuf("id", 1, 1), In: row})
	}
	be := backendOn(b, dev, compute.Options{})
	ctx := context.Background()
	p := compiled(b, be, g, []*tensors.Tensor{tensorOf(b, r, "x", 2, n, tensors.F32, 0, 0)}, nil)
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

// BenchmarkSamplePick is BenchmarkGreedyPick for sampling at temperature
// 0.8 and top-k 40, with top-p 0.9 ("k40p0.9") and without (the CLI's
// default rule, "k40"): "host" reads the row back and runs
// internal/sampler, "device" runs fusion.Sample and reads one value. The logits
// are normal (standard deviation 2.5), shaped like a model's rather than
// uniform; cpu-us/op is the process's CPU time per pick (a software
// driver's threads included), steadier than wall time on a busy machine.
func BenchmarkSamplePick(b *testing.B) {
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			for _, n := range []int{512, 32000} {
				for _, topP := range []float32{0.9, 1} {
					name := "k40"
					if topP < 1 {
						name = fmt.Sprintf("k40p%v", topP)
					}
					for _, onDevice := range []bool{false, true} {
						mode := "host"
						if onDevice {
							mode = "device"
						}
						rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: topP, Seed: 5}
						b.Run(fmt.Sprintf("v%d/%s/%s", n, name, mode), func(b *testing.B) { benchSamplePick(b, dev, n, rule, onDevice) })
					}
				}
			}
		})
	}
}

func benchSamplePick(b *testing.B, dev gpu.Device, n int, rule fusion.Sampling, onDevice bool) {
	r := rand.New(rand.NewPCG(4, uint64(n)))
	g := &fusion.Graph{Tokens: 1}
	row := g.Add(&fusion.EmbedOp{Out: g.NewBuf("row", 1, n), Weight: "x"})
	g.Logits = row
	if onDevice {
		g.Logits = g.Add(&fusion.SampleOp{Out: g.NewBuf("id", 1, 1), In: row, Sampling: rule})
	}
	be := backendOn(b, dev, compute.Options{})
	ctx := context.Background()
	vals := make([]float32, 2*n)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * 2.5)
	}
	xt, err := tensors.FromF32("x", []int{2, n}, vals, tensors.F32)
	if err != nil {
		b.Fatal(err)
	}
	ws, err := be.LoadWeights(ctx, []*tensors.Tensor{xt})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Release()
	p, err := be.Compile(g, ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Release()
	s := sampler.New(sampler.Options{Temperature: rule.Temperature, TopK: rule.TopK, TopP: rule.TopP, Seed: rule.Seed})
	out := make([]float32, n)
	pick := func(pos int) int {
		if err := p.Run(ctx, []int32{1}, pos); err != nil {
			b.Fatal(err)
		}
		k, err := p.Logits(out)
		if err != nil {
			b.Fatal(err)
		}
		if onDevice {
			return int(out[0])
		}
		return s.SampleAt(out[:k], uint32(pos+1))
	}
	b.ResetTimer()
	cpu0 := compute.ProcessCPU()
	for i := range b.N {
		pick(i % 64)
	}
	cpu := compute.ProcessCPU() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e3, "cpu-us/op")
}
