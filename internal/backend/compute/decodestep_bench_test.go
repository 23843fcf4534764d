package compute_test

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/synthetic"
)

// BenchmarkDecodeStep110M times one decode step of the 110M llama shape
// (768 wide, 12 heads of 64, FFN 2048, int8 with a scale per row) cut to
// two layers and a 512-id vocabulary, fused as the pipeline fuses it, on
// each device, and reports each kernel's device time a step where the
// device has timestamps (the median of 15 profiled steps, ms, per kernel
// name: lanes_rope_kv, the GLU and output products, attention): the
// kernels `gpurun bench --profile` lists for a whole model, in a second.
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
	g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 64})
	if err != nil {
		b.Fatal(err)
	}
	const pos = 16
	ids := []int32{7}
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			p := fusedCompiled(b, backendOn(b, deviceAt(b, i), compute.Options{}), g, ck.Tensors)
			timeRuns(b, p, ids, pos, make([]float32, c.VocabSize))
			byKernel, _ := profiledMs(p, ids, pos, 15, func(t gpu.OpTime) string {
				if len(t.Kernels) == 0 {
					return ""
				}
				return t.Kernels[0]
			})
			for k, ms := range byKernel {
				b.ReportMetric(ms[len(ms)/2], k+"-ms")
			}
		})
	}
}
