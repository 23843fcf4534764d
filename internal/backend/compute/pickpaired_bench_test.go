package compute

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/sampler"
)

// BenchmarkPickPaired compares, per GPU backend, host-sampled and
// device-sampled decoding in pairs taken back to back (issue 39: device
// sampling at least as fast as host sampling), so both see the same load
// on a busy machine: each iteration decodes the same 8 positions once
// with host sampling (the logits program, a read of the logits and
// internal/sampler, as --host-sampling does) and once with the sampling
// program's RunSteps of 8 steps (the CLI's default), in alternating order.
// Metrics: the medians of host-ms/tok, device-ms/tok and of the
// per-iteration ratio host/device (above 1: the device path is faster).
// Run with -benchtime 40x; the model is stories260K, or
// GPURUN_BENCH_MODEL.
func BenchmarkPickPaired(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: 1, Seed: 1}
	const maxLen, n = 256, 8
	for _, d := range TestDevices {
		b.Run(d.Name, func(b *testing.B) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(b, d.Name, err)
			defer dev.Close()
			be := New(dev)
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Release()
			var release []func()
			defer func() {
				for _, r := range release {
					r()
				}
			}()
			compile := func(o arch.BuildOptions) *program {
				o.Tokens, o.MaxLen = 1, maxLen
				g, err := arch.Build(&ck.Config, o)
				if err != nil {
					b.Fatal(err)
				}
				kv, err := be.NewKVCache(g.KV)
				if err != nil {
					b.Fatal(err)
				}
				p, err := be.Compile(gpu.Fuse(be, w, g), w, kv)
				if err != nil {
					kv.Release()
					b.Fatal(err)
				}
				release = append(release, p.Release, kv.Release)
				return p.(*program)
			}
			logits := compile(arch.BuildOptions{})
			sample := compile(arch.BuildOptions{Sample: &rule})
			host := sampler.New(sampler.Options{Temperature: rule.Temperature, TopK: rule.TopK, TopP: rule.TopP, Seed: rule.Seed})
			row := make([]float32, ck.Config.VocabSize)
			hostRun := func(pos int) time.Duration {
				start := time.Now()
				for i := range n {
					if err := logits.Run(ctx, []int32{1}, pos+i); err != nil {
						b.Fatal(err)
					}
					if _, err := logits.Logits(row); err != nil {
						b.Fatal(err)
					}
					host.SampleAt(row, uint32(pos+i))
				}
				return time.Since(start)
			}
			deviceRun := func(pos int) time.Duration {
				start := time.Now()
				if _, err := sample.RunSteps(ctx, 1, pos, n, nil); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			// Record every span's list before timing.
			for pos := 0; pos+n <= maxLen; pos += n {
				hostRun(pos)
				deviceRun(pos)
			}
			var hs, ds, ratio []float64
			b.ResetTimer()
			for i := range b.N {
				pos := (i * n) % (maxLen - n)
				var h, dv time.Duration
				if i%2 == 0 {
					h, dv = hostRun(pos), deviceRun(pos)
				} else {
					dv, h = deviceRun(pos), hostRun(pos)
				}
				hs = append(hs, h.Seconds()*1e3/n)
				ds = append(ds, dv.Seconds()*1e3/n)
				ratio = append(ratio, h.Seconds()/dv.Seconds())
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			b.ReportMetric(med(hs), "host-ms/tok")
			b.ReportMetric(med(ds), "device-ms/tok")
			b.ReportMetric(med(ratio), "host/device")
		})
	}
}
