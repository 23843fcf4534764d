package compute

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
)

// BenchmarkStepsPaired asks, per GPU backend that keeps timestamps,
// whether a longer multi-step list costs more per token (issue 39: on
// lavapipe the CLI decoded slower with 8 steps per submission than with
// 1): each iteration runs the same 8 positions as 8 one-step submissions
// and as one 8-step submission of the sampling program (RunSteps through
// TimeSteps, so each submission's device time is read), back to back, so
// the two see the same load. Metrics: the medians of device-us/tok for
// each and of their per-iteration ratios (8 steps over 1; wall-ratio the
// same for wall time). Run on a quiet machine with -benchtime 30x.
func BenchmarkStepsPaired(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: 1, Seed: 1}
	const pos0, n = 4, 8
	for _, d := range TestDevices {
		b.Run(d.Name, func(b *testing.B) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(b, d.Name, err)
			defer dev.Close()
			be := New(dev)
			defer be.Close()
			if !be.(*backend).devCaps.Timestamps {
				b.Skip("the device keeps no timestamps")
			}
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Release()
			g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 256, Sample: &rule})
			if err != nil {
				b.Fatal(err)
			}
			kv, err := be.NewKVCache(g.KV)
			if err != nil {
				b.Fatal(err)
			}
			defer kv.Release()
			pr, err := be.Compile(gpu.Fuse(be, w, g), w, kv)
			if err != nil {
				b.Fatal(err)
			}
			defer pr.Release()
			p := pr.(*program)
			// run decodes positions pos0..pos0+n-1, per steps a submission:
			// device and wall microseconds per token.
			run := func(per int) (float64, float64) {
				start := time.Now()
				var dt uint64
				for pos := pos0; pos < pos0+n; pos += per {
					_, d, err := p.TimeSteps(ctx, 1, pos, per, nil)
					if err != nil {
						b.Fatal(err)
					}
					dt += d
				}
				return float64(dt) / 1e3 / n, float64(time.Since(start).Nanoseconds()) / 1e3 / n
			}
			run(1) // records both lists
			run(n)
			var one, many, ratio, wall []float64
			b.ResetTimer()
			for range b.N {
				d1, w1 := run(1)
				dn, wn := run(n)
				one, many = append(one, d1), append(many, dn)
				ratio, wall = append(ratio, dn/d1), append(wall, wn/w1)
			}
			med := func(v []float64) float64 {
				sort.Float64s(v)
				return v[len(v)/2]
			}
			b.ReportMetric(med(one), "device-us/tok(1)")
			b.ReportMetric(med(many), "device-us/tok(8)")
			b.ReportMetric(med(ratio), "ratio")
			b.ReportMetric(med(wall), "wall-ratio")
		})
	}
}
