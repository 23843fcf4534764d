package compute

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// BenchmarkDecodeOverhead measures the host's share of a greedy decode
// step on each GPU backend: the fused decode program runs RunSteps with N
// steps per submission (1 and 8) and a timestamp before the first and
// after the last dispatch of the submission, so the device time of the N
// steps is known; the host overhead is the wall time of RunSteps (the step
// tensor write, the submission, the wait and the read of the ids) minus
// that device time. Metrics per token: wall-ms/tok, device-ms/tok and
// host-% (the overhead as a share of the wall time).
//
// The model is stories260K, or the GGUF or llama2.c file named by
// GPURUN_BENCH_MODEL (e.g. the 110M shape of ../shared/tools).
func BenchmarkDecodeOverhead(b *testing.B) {
	ck := benchCheckpoint(b)
	ctx := context.Background()
	for _, d := range TestDevices {
		b.Run(d.Name, func(b *testing.B) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(b, d.Name, err)
			defer dev.Close()
			if !dev.Caps().Timestamps {
				b.Skipf("%s: no timestamps on %s", d.Name, dev.Info().Name)
			}
			be := New(dev)
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Release()
			const maxLen = 256
			g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: maxLen, Argmax: true})
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
			p.multi.stamps = true
			for _, n := range []int{1, 8} {
				b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
					var wall, device time.Duration
					pos := 0
					run := func() {
						if pos+n > maxLen {
							pos = 0 // the cache's contents do not matter here
						}
						start := time.Now()
						if _, err := p.RunSteps(ctx, 1, pos, n, nil); err != nil {
							b.Fatal(err)
						}
						wall += time.Since(start)
						ts, err := dev.ReadTimestamps(2)
						if err != nil {
							b.Fatal(err)
						}
						device += time.Duration(ts[1] - ts[0])
						pos += n
					}
					run() // records the list
					wall, device = 0, 0
					b.ResetTimer()
					for range b.N {
						run()
					}
					tok := float64(b.N * n)
					b.ReportMetric(wall.Seconds()*1e3/tok, "wall-ms/tok")
					b.ReportMetric(device.Seconds()*1e3/tok, "device-ms/tok")
					b.ReportMetric(100*(wall-device).Seconds()/wall.Seconds(), "host-%")
				})
			}
		})
	}
}

// benchCheckpoint loads GPURUN_BENCH_MODEL (GGUF or llama2.c), else
// stories260K.
func benchCheckpoint(b *testing.B) *model.Checkpoint {
	path := os.Getenv("GPURUN_BENCH_MODEL")
	if path == "" {
		ck, err := llama2c.Load(testmodels.Path(b, "stories260K.bin"))
		if err != nil {
			b.Fatal(err)
		}
		return ck
	}
	ck, err := gguf.Load(path)
	if err != nil {
		if ck, err2 := llama2c.Load(path); err2 == nil {
			return ck
		}
		b.Fatalf("GPURUN_BENCH_MODEL: %v", err)
	}
	return ck
}
