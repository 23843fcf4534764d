package compute_test

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

// BenchmarkMatVec and BenchmarkMatMul time one MatMul op (plus a tiny
// embedding lookup feeding it) per device (WebGPU, Vulkan) and weight type:
// weight bytes read per second and multiply-adds per second, at the shapes
// of internal/backend/cpu's BenchmarkMatMul (2048x2048; decode and a 32-token prefill) so
// the backends compare in one run. On lavapipe these measure the CPU
// emulation, not a GPU. Decode on a device with subgroups (Vulkan) also
// runs without them (matvec_lanes beside matvec_sg).
func BenchmarkMatVec(b *testing.B) { benchOnDevices(b, 1, 2048, 2048) }

func BenchmarkMatMul(b *testing.B) { benchOnDevices(b, 32, 2048, 2048) }

// BenchmarkMatVec768 is BenchmarkMatVec at the 110M shape's 768 columns
// (48 chunks of 16 elements for int8: the rows where laneCount takes 16
// lanes, not 32).
func BenchmarkMatVec768(b *testing.B) { benchOnDevices(b, 1, 768, 768) }

func benchOnDevices(b *testing.B, tokens, rows, cols int) {
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			b.Run("auto", func(b *testing.B) { benchMatMul(b, dev, compute.Options{}, tokens, rows, cols) })
			if tokens == 1 && dev.Caps().SubgroupSize > 0 {
				// The decode kernel's portable reduction, beside the
				// subgroup one the run above used.
				b.Run("nosubgroups", func(b *testing.B) {
					benchMatMul(b, dev, compute.Options{Subgroups: compute.SubgroupsOff}, tokens, rows, cols)
				})
			}
		})
	}
}

// reportKernel adds the profile of one step of the matrix product (device
// time from timestamps, and the work the backend counts for it) where the
// device has timestamps: what `gpurun bench --profile` prints per kernel.
func reportKernel(b *testing.B, p gpu.Program, tokens []int32) {
	ops, err := p.Profile(context.Background(), tokens, 0)
	if err != nil {
		return // no timestamps on this device
	}
	for _, op := range ops {
		if op.Kind == fusion.MatMul && op.Nanos > 0 {
			ns := float64(op.Nanos)
			b.ReportMetric(ns/1e6, "kernel-ms")
			b.ReportMetric(float64(op.Bytes)/ns, "kernel-GB/s")
			b.ReportMetric(float64(op.FLOPs)/ns, "kernel-GFLOP/s")
		}
	}
}

// benchType is a weight layout of the matrix benchmarks.
type benchType struct {
	name  string
	dt    tensors.DType
	block int
	st    tensors.DType
}

func benchMatMul(b *testing.B, dev gpu.Device, opts compute.Options, tokens, rows, cols int) {
	types := []benchType{
		{"f32", tensors.F32, 0, 0}, {"f16", tensors.F16, 0, 0}, {"bf16", tensors.BF16, 0, 0},
		{"int8", tensors.I8, 0, tensors.F32}, {"int8_b32_f16", tensors.I8, 32, tensors.F16},
		{"int4", tensors.I4, 0, tensors.F32}, {"int4_b32_f16", tensors.I4, 32, tensors.F16},
	}
	for _, ty := range types {
		b.Run(fmt.Sprintf("%s/%dx%d/t%d", ty.name, rows, cols, tokens), func(b *testing.B) {
			benchOne(b, dev, opts, ty, tokens, rows, cols, false)
		})
	}
}

// BenchmarkMatVecF16 times the decode kernel for f16
// activations in f16 arithmetic (matvec_sg_h) and in f32 (matvec_sg),
// alternating per weight type, on Vulkan devices reporting f16.
func BenchmarkMatVecF16(b *testing.B) {
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			if caps := dev.Caps(); !caps.F16() || caps.SubgroupSize == 0 {
				b.Skipf("%s: no f16-arithmetic variant", dev.Info().Name)
			}
			for _, ty := range []benchType{{"f16", tensors.F16, 0, 0}, {"int8", tensors.I8, 0, tensors.F32},
				{"int8_b32_f16", tensors.I8, 32, tensors.F16}, {"int4_b32_f16", tensors.I4, 32, tensors.F16}} {
				for _, m := range []compute.F16Mode{compute.F16Auto, compute.F16Off} {
					b.Run(fmt.Sprintf("%s/2048x2048/%s", ty.name, m), func(b *testing.B) {
						benchOne(b, dev, compute.Options{F16: m}, ty, 1, 2048, 2048, true)
					})
				}
			}
		})
	}
}

// benchOne times one MatMul of ty weights (rows x cols) over tokens rows
// of activations, x an f16 activation when half.
func benchOne(b *testing.B, dev gpu.Device, opts compute.Options, ty benchType, tokens, rows, cols int, half bool) {
	r := rand.New(rand.NewPCG(9, 9))
	benchWeights(b, dev, opts, r, tensorOf(b, r, "w", rows, cols, ty.dt, ty.block, ty.st), tokens, rows, cols, half)
}

// benchWeights times one MatMul of the weights w (rows x cols) over tokens
// rows of activations (an embedding drawn from r), x an f16 activation
// when half.
func benchWeights(b *testing.B, dev gpu.Device, opts compute.Options, r *rand.Rand, w *tensors.Tensor, tokens, rows, cols int, half bool) {
	g := &fusion.Graph{Tokens: tokens}
	x := g.NewBuf("x", tokens, cols)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
	y := g.NewBuf("y", tokens, rows)
	g.Logits = g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w"}})
	if half {
		g.Bufs[x].F16 = true // the logits y stay f32
	}
	be := backendOn(b, dev, opts)
	p := compiled(b, be, g, []*tensors.Tensor{tensorOf(b, r, "x", vocab, cols, tensors.F32, 0, 0), w}, nil)
	tk := make([]int32, tokens)
	sec := timeRuns(b, p, tk, 0, make([]float32, tokens*rows))
	b.ReportMetric(float64(len(w.Data))/sec/1e9, "GB/s")
	b.ReportMetric(2*float64(rows*cols*tokens)/sec/1e9, "GFLOP/s")
	reportKernel(b, p, tk)
}
