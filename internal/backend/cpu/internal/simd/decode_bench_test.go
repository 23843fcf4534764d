package simd

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkDecodeRows runs every decode (several-rows) kernel over 768-wide
// rows (the 110M shape) per block type and implementation, on a matrix of
// about 256 KiB, which stays in L2, and one of about 64 MiB, which streams
// from memory (or a large L3). The bytes are the weight bytes streamed:
// MB/s is their rate on the wall clock, and cpu-GB/s their rate per second
// of the benchmark thread's own CPU time (where threadTime can read it),
// which a machine shared with other processes disturbs less.
func BenchmarkDecodeRows(b *testing.B) {
	const cols = 768
	r := rngFor(b)
	xf := randF32(r, cols)
	kq, kd, ks := quantK(xf)
	q, d := quant32(xf)
	qe := make([]int8, cols) // evens first, for DotQ4Rows
	QuantizeQ8(qe, make([]float32, cols/QBlock), xf, true)
	impls := Impls()
	if len(impls) > 1 {
		impls = impls[1:] // the pure-Go kernels would take minutes on 64 MiB
	}
	type kernel struct {
		name     string
		rowBytes int
		setup    func(rows int) func(k *Impl, r0 int, out []float32)
	}
	var kernels []kernel
	for _, kt := range kTypes {
		kernels = append(kernels, kernel{kt.t.String(), cols / QK * kt.t.BlockBytes(), func(rows int) func(*Impl, int, []float32) {
			w := randKBlocks(r, kt.t, rows*cols/QK, 0)
			rb := cols / QK * kt.t.BlockBytes()
			return func(k *Impl, r0 int, out []float32) { k.DotKRows(kt.t, w[r0*rb:], kq, kd, ks, out) }
		}})
	}
	for _, qt := range q32Types {
		kernels = append(kernels, kernel{qt.t.String(), cols / QBlock * qt.t.BlockBytes(), func(rows int) func(*Impl, int, []float32) {
			w := randQ32Blocks(r, qt.t, qt.scales, rows*cols/QBlock, 0)
			rb := cols / QBlock * qt.t.BlockBytes()
			return func(k *Impl, r0 int, out []float32) { k.DotQ32Rows(qt.t, w[r0*rb:], q, d, out) }
		}})
	}
	unitScales := func(n int) []uint16 {
		ws := make([]uint16, n)
		for i := range ws {
			ws[i] = 0x2000
		}
		return ws
	}
	kernels = append(kernels,
		kernel{"q8_0", cols + 2*cols/QBlock, func(rows int) func(*Impl, int, []float32) {
			w, ws := randI8(r, rows*cols), unitScales(rows*cols/QBlock)
			const nb = cols / QBlock
			return func(k *Impl, r0 int, out []float32) {
				k.DotQ8Rows(w[r0*cols:], ws[r0*nb:(r0+len(out))*nb], q, d, out)
			}
		}},
		kernel{"q4_0", cols/2 + 2*cols/QBlock, func(rows int) func(*Impl, int, []float32) {
			w, ws := randBytes(r, rows*cols/2), unitScales(rows*cols/QBlock)
			const nb = cols / QBlock
			return func(k *Impl, r0 int, out []float32) {
				k.DotQ4Rows(w[r0*cols/2:], ws[r0*nb:(r0+len(out))*nb], qe, d, out)
			}
		}})
	for _, kn := range kernels {
		for _, size := range []struct {
			name  string
			bytes int
		}{{"L2", 256 << 10}, {"mem", 64 << 20}} {
			rows := max(64, size.bytes/kn.rowBytes/64*64)
			run := kn.setup(rows)
			out := make([]float32, 64)
			for _, k := range impls {
				b.Run(fmt.Sprintf("%s/%s/%s", kn.name, size.name, k.Name), func(b *testing.B) {
					b.SetBytes(int64(rows * kn.rowBytes))
					b.ReportAllocs()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0, ok := threadTime()
					for b.Loop() {
						// 64 rows per call, as the decode loop makes them
						for r0 := 0; r0 < rows; r0 += 64 {
							run(k, r0, out)
						}
					}
					if t1, ok1 := threadTime(); ok && ok1 && t1 > t0 {
						b.ReportMetric(float64(b.N)*float64(rows*kn.rowBytes)/(t1-t0).Seconds()/1e9, "cpu-GB/s")
					}
				})
			}
		}
	}
}
