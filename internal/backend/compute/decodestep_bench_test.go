package compute_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/synthetic"
)

// BenchmarkDecodeStep110M times one decode step of the 110M llama shape
// (768 wide, 12 heads of 64, FFN 2048, int8 with a scale per row) cut to
// two layers and a 512-id vocabulary, fused as the pipeline fuses it, on
// each device, and reports each fused kernel's device time a step where
// the device has timestamps (kernel-ms per kernel name: lanes_rope_kv,
// the GLU and output products, attention): the kernels `gpurun bench
// --profile` lists for a whole model, in a second.
func BenchmarkDecodeStep110M(b *testing.B) {
	c, ok := synthetic.ByName("llama-110m")
	if !ok {
		b.Fatal("no llama-110m spec")
	}
	c.Layers, c.VocabSize = 2, 512
	ck, err := synthetic.Checkpoint(c, synthetic.Options{Quant: synthetic.QuantInt8, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	const pos = 16
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			be := backendOn(b, deviceAt(b, i), compute.Options{})
			g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 64})
			if err != nil {
				b.Fatal(err)
			}
			ws, err := be.LoadWeights(context.Background(), ck.Tensors)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Release()
			kv, err := be.NewKVCache(g.KV)
			if err != nil {
				b.Fatal(err)
			}
			defer kv.Release()
			p, err := be.Compile(gpu.Fuse(be, ws, g), ws, kv)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Release()
			ids := []int32{7}
			timeRuns(b, p, ids, pos, make([]float32, c.VocabSize))
			ops, err := p.Profile(context.Background(), ids, pos)
			if err != nil {
				return // no timestamps on this device
			}
			ms := map[string]float64{}
			for _, op := range ops {
				if len(op.Kernels) > 0 {
					ms[op.Kernels[0]] += float64(op.Nanos) / 1e6
				}
			}
			for k, v := range ms {
				b.ReportMetric(v, k+"-ms")
			}
		})
	}
}
