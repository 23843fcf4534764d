package simd

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkQDecode runs the one-token Q8_0/Q4_0 products decode makes, on
// 768-wide rows (the 110M shape): the GEMM over packed groups (Gemm with
// one token; Q4_0's decode form where the CPU has the GEMM) and the rows
// kernels (DotQ8Rows/DotQ4Rows; Q8_0's decode form), on a matrix that
// stays in L2 (256 KiB) and one that streams from memory (64 MiB).
// cpu-GB/s counts the bytes each form reads per second of the thread's own
// CPU time; GGUF-GB/s the GGUF bytes of the rows covered (18 or 34 per 32
// values): the figure to set against llama.cpp.
func BenchmarkQDecode(b *testing.B) {
	const cols = 768
	const nb = cols / QBlock
	r := rngFor(b)
	xf := randF32(r, cols)
	x, xd := quant32(xf)
	xs := make([]int32, nb)
	BlockSums(xs, x)
	xe := make([]int8, cols) // evens first, for DotQ4Rows
	QuantizeQ8(xe, make([]float32, nb), xf, true)
	for _, kind := range []GemmKind{GemmQ8, GemmQ4} {
		name, ggufBlock := "q8_0", 34
		if kind == GemmQ4 {
			name, ggufBlock = "q4_0", 18
		}
		for _, size := range []struct {
			name  string
			bytes int
		}{{"L2", 256 << 10}, {"mem", 64 << 20}} {
			rows := max(64, size.bytes/(nb*ggufBlock)/64*64)
			ws := make([]uint16, rows*nb)
			for i := range ws {
				ws[i] = 0x2000 + uint16(r.IntN(0x400))
			}
			var w8 []int8
			var w4 []byte
			p := make([]byte, kind.PackedBytes(rows, cols))
			if kind == GemmQ8 {
				w8 = randI8(r, rows*cols)
				if err := PackQ8(p, w8, ws, rows, cols); err != nil {
					b.Fatal(err)
				}
			} else {
				w4 = randBytes(r, rows*cols/2)
				if err := PackQ4(p, w4, ws, rows, cols); err != nil {
					b.Fatal(err)
				}
			}
			out := make([]float32, rows)
			gguf := rows * nb * ggufBlock
			bench := func(form string, read int, f func()) {
				b.Run(fmt.Sprintf("%s/%s/%s", name, size.name, form), func(b *testing.B) {
					b.SetBytes(int64(read))
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0, ok := threadTime()
					for b.Loop() {
						f()
					}
					if t1, ok1 := threadTime(); ok && ok1 && t1 > t0 {
						s := (t1 - t0).Seconds()
						b.ReportMetric(float64(b.N)*float64(read)/s/1e9, "cpu-GB/s")
						b.ReportMetric(float64(b.N)*float64(gguf)/s/1e9, "GGUF-GB/s")
					}
				})
			}
			if HasGemm(kind) {
				gb := kind.GroupBytes(cols)
				bench("gemm-1tok", len(p), func() {
					for g := range rows / GemmRows {
						Gemm(kind, p[g*gb:(g+1)*gb], x, xd, xs, cols, 1, out[g*GemmRows:], GemmRows)
					}
				})
			}
			if kind == GemmQ8 {
				bench("rows", len(w8)+2*len(ws), func() {
					for r0 := 0; r0 < rows; r0 += 64 {
						DotQ8Rows(w8[r0*cols:(r0+64)*cols], ws[r0*nb:(r0+64)*nb], x, xd, out[r0:r0+64])
					}
				})
			} else {
				bench("rows", len(w4)+2*len(ws), func() {
					for r0 := 0; r0 < rows; r0 += 64 {
						DotQ4Rows(w4[r0*cols/2:(r0+64)*cols/2], ws[r0*nb:(r0+64)*nb], xe, xd, out[r0:r0+64])
					}
				})
			}
		}
	}
}
