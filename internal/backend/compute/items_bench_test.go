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
)

// BenchmarkDecodeItems times each dispatch of a sampled decode step
// alone, per GPU backend: a list of 20 copies of the item's dispatch (its
// own bindings and grid) is submitted and waited for, so an item that
// costs far more than its work shows up on its own (issue 39: on lavapipe
// the one-workgroup embed cost 0.8-2 ms, the driver compiling it again at
// every bind, against ~25 us for last_row of the same shape). Metric:
// wall-us/dispatch per item, named by its index and kernel, and
// cpu-us/dispatch, the process's CPU time (the driver's threads
// included; steadier than wall time on a busy machine). The model is
// stories260K, or GPURUN_BENCH_MODEL.
func BenchmarkDecodeItems(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	rule := fusion.Sampling{Temperature: 0.8, TopK: 40, TopP: 1, Seed: 1}
	const reps = 20
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
			// A few steps, so attention's reads cover a cache.
			const steps = 8
			if _, err := p.RunSteps(ctx, 1, 0, steps, nil); err != nil {
				b.Fatal(err)
			}
			// The last step of a RunSteps leaves the step tensor done,
			// its rows 0, and every item that reads it (embed, the
			// pick) would time its early return: a one-step Run leaves
			// a live step (rows 1, no advance) the items repeat.
			if err := p.Run(ctx, []int32{1}, steps); err != nil {
				b.Fatal(err)
			}
			span := p.span(steps + 1)
			slot := 0
			for i, it := range p.items {
				if it.kernel == "" {
					continue
				}
				bind := append([]gpu.Binding{{Buf: p.params, Offset: int64(slot * paramSlot), Size: paramBytes}}, it.bindings...)
				slot++
				b.Run(fmt.Sprintf("%02d_%s", i, it.kernel), func(b *testing.B) {
					k, err := p.b.kernel(it.kernel, it.variant)
					if err != nil {
						b.Fatal(err)
					}
					x, y, z := it.grid(span)
					cmds, err := p.b.dev.NewCommands()
					if err != nil {
						b.Fatal(err)
					}
					defer cmds.Release()
					for range reps {
						if err := cmds.Dispatch(k, bind, x, y, z); err != nil {
							b.Fatal(err)
						}
					}
					if err := cmds.Finish(); err != nil {
						b.Fatal(err)
					}
					run := func() {
						if err := p.b.dev.Submit(cmds); err != nil {
							b.Fatal(err)
						}
						if err := p.b.dev.Wait(); err != nil {
							b.Fatal(err)
						}
					}
					run() // the driver's first use of the pipeline
					b.ResetTimer()
					start, cpu0 := time.Now(), ProcessCPU()
					for range b.N {
						run()
					}
					b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*reps), "wall-us/dispatch")
					b.ReportMetric(float64((ProcessCPU()-cpu0).Microseconds())/float64(b.N*reps), "cpu-us/dispatch")
				})
			}
		})
	}
}
