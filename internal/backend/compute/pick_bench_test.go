package compute

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/sampler"
)

// BenchmarkDecodePick compares, per GPU backend, the ways a decode step's
// token is picked (issue 39: device sampling at least as fast as host
// sampling): "host" runs the logits program and samples the read-back row
// on the host (internal/sampler, as --host-sampling does); "sample" and
// "argmax" pick on the device (fusion.Sample with the CLI's default rule,
// fusion.Argmax) through RunSteps with 1 or 8 steps per submission (the
// default --steps-per-submit). Each iteration decodes 64 tokens from
// position 0; the lists are recorded before the timer starts. Metric:
// wall-ms/tok. Run the cases of one backend back to back (-count 5, the
// medians) on a quiet machine: the model is stories260K, or
// GPURUN_BENCH_MODEL.
func BenchmarkDecodePick(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: 1, Seed: 1}
	const maxLen, tokens = 256, 64
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
			var release []func() // the programs and caches, before the weights and device
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
			argmax := compile(arch.BuildOptions{Argmax: true})
			host := sampler.New(sampler.Options{Temperature: rule.Temperature, TopK: rule.TopK, TopP: rule.TopP, Seed: rule.Seed})
			row := make([]float32, ck.Config.VocabSize)
			hostStep := func(pos int) {
				if err := logits.Run(ctx, []int32{1}, pos); err != nil {
					b.Fatal(err)
				}
				if _, err := logits.Logits(row); err != nil {
					b.Fatal(err)
				}
				host.SampleAt(row, uint32(pos))
			}
			steps := func(p *program, n int) func(pos int) {
				return func(pos int) {
					if _, err := p.RunSteps(ctx, 1, pos, n, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			cases := []struct {
				name string
				per  int // tokens per call
				run  func(pos int)
			}{
				{"host", 1, hostStep},
				{"sample/steps=1", 1, steps(sample, 1)},
				{"sample/steps=8", 8, steps(sample, 8)},
				{"argmax/steps=8", 8, steps(argmax, 8)},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					generate := func() {
						for pos := 0; pos < tokens; pos += c.per {
							c.run(pos)
						}
					}
					generate() // records every list the timed runs use
					b.ResetTimer()
					start := time.Now()
					for range b.N {
						generate()
					}
					b.ReportMetric(time.Since(start).Seconds()*1e3/float64(b.N*tokens), "wall-ms/tok")
				})
			}
		})
	}
}

// BenchmarkRecordSteps times recording a multi-step decode list (RunSteps'
// list for 8 steps of the sampling program; 1 step for comparison) for
// each GPU backend: the cost paid on the first submission of each span
// (every doubling of the cached length) during decoding. Metric:
// ms/list.
func BenchmarkRecordSteps(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: 1, Seed: 1}
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
			out, _ := pickedBuf(p.g)
			for _, n := range []int{1, 8} {
				b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
					var took time.Duration
					for range b.N {
						for k, c := range p.multi.lists { // the next stepList records anew
							c.Release()
							delete(p.multi.lists, k)
						}
						start := time.Now()
						if _, err := p.stepList(out, n, 1); err != nil {
							b.Fatal(err)
						}
						took += time.Since(start)
					}
					b.ReportMetric(took.Seconds()*1e3/float64(b.N), "ms/list")
				})
			}
		})
	}
}
