//go:build cgo

package vulkan

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

// BenchmarkMatMul times the GPU backend's matrix kernels on this device:
// one step of Embed -> MatMul per iteration, including the small logits
// readback that waits for it. Reports weight bandwidth (GB/s) and
// arithmetic rate (GFLOP/s, 2 flops per multiply-add).
func BenchmarkMatMul(b *testing.B) {
	type tc struct {
		dt             tensors.DType
		block          int
		rows, cols, tk int
	}
	var cases []tc
	for _, tk := range []int{1, 16} { // matrix-vector (decode), matrix-matrix (prefill)
		for _, dt := range []tensors.DType{tensors.F32, tensors.F16, tensors.I8, tensors.I4} {
			block := 0
			if dt == tensors.I4 {
				block = 32
			}
			cases = append(cases, tc{dt, block, 1024, 1024, tk}, tc{dt, block, 2048, 2048, tk})
		}
	}
	d := backendDevice(b)
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s_%dx%d_t%d", c.dt, c.rows, c.cols, c.tk), func(b *testing.B) {
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, uint64(c.rows)))
			vals := make([]float32, c.rows*c.cols)
			for i := range vals {
				vals[i] = r.Float32()*2 - 1
			}
			var w *tensors.Tensor
			var err error
			if c.dt.Quantized() {
				w, err = tensors.Quantize("w", []int{c.rows, c.cols}, vals, c.dt, c.block, tensors.F32)
			} else {
				w, err = tensors.FromF32("w", []int{c.rows, c.cols}, vals, c.dt)
			}
			if err != nil {
				b.Fatal(err)
			}
			x, err := tensors.FromF32("x", []int{4, c.cols}, vals[:4*c.cols], tensors.F32)
			if err != nil {
				b.Fatal(err)
			}
			g := &fusion.Graph{Tokens: c.tk}
			in := g.Add(&fusion.EmbedOp{Out: g.NewBuf("x", c.tk, c.cols), Weight: "x"})
			g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("y", c.tk, c.rows), In: in, Projection: fusion.Projection{Weight: "w"}})

			be := compute.New(d)
			defer be.Close()
			ws, err := be.LoadWeights(ctx, []*tensors.Tensor{x, w})
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Release()
			p, err := be.Compile(g, ws, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Release()
			tokens := make([]int32, c.tk)
			for i := range tokens {
				tokens[i] = int32(i % 4)
			}
			out := make([]float32, c.tk*c.rows)
			b.ResetTimer()
			for b.Loop() {
				if err := p.Run(ctx, tokens, 0); err != nil {
					b.Fatal(err)
				}
				if _, err := p.Logits(out); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			weightBytes := float64(len(w.Data))
			if w.Scales != nil {
				weightBytes += float64(len(w.Scales.Data))
			}
			b.ReportMetric(weightBytes/sec/1e9, "GB/s")
			b.ReportMetric(2*float64(c.rows*c.cols*c.tk)/sec/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDispatchRoundTrip measures the device's fixed costs: a recorded
// list of `dispatches` tiny dispatches, submitted and read back (4 bytes).
func BenchmarkDispatchRoundTrip(b *testing.B) {
	for _, dispatches := range []int{1, 32} {
		b.Run(fmt.Sprintf("dispatches%d", dispatches), func(b *testing.B) {
			d := backendDevice(b)
			k := addKernel(b, d)
			p := params(b, d, 1, 1)
			data := newBuffer(b, d, 4)
			c := record(b, d, func(c gpu.Commands) error {
				for range dispatches {
					if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, 1, 1, 1); err != nil {
						return err
					}
				}
				return nil
			})
			dst := make([]byte, 4)
			for b.Loop() {
				if err := d.Submit(c); err != nil {
					b.Fatal(err)
				}
				if err := d.Read(data, 0, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
