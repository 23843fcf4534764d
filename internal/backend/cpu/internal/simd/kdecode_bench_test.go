package simd

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkKDecode runs the one-token K-quant products decode makes, on
// 2048-wide rows (LFM2-1.2B's hidden size): the GEMM over packed groups
// (GemmK with one token, what decode runs where the CPU has the GEMM) and
// the rows kernel over the GGUF rows (DotKRows), and in L2 the GEMM with
// four tokens (prefill), on a matrix that stays in
// L2 (256 KiB) and one that streams from memory (64 MiB). MB/s counts the
// bytes each form reads (the packed copy for the GEMM, the GGUF rows for
// DotKRows), cpu-GB/s the same per second of the thread's own CPU time,
// and GGUF-GB/s the GGUF bytes of the rows covered per CPU second: the
// figure to set against llama.cpp, whose Q4_K repack keeps the GGUF size.
func BenchmarkKDecode(b *testing.B) {
	const cols = 2048
	nb := cols / QK
	r := rngFor(b)
	x, xd, xs := quantK(randF32(r, cols))
	x4, xd4, xs4 := quantK(randF32(r, 4*cols))
	out4 := make([]float32, 4*GemmRows)
	for _, kt := range []KQuant{Q4K, Q6K, Q5K} {
		for _, size := range []struct {
			name  string
			bytes int
		}{{"L2", 256 << 10}, {"mem", 64 << 20}} {
			rb := nb * kt.BlockBytes()
			rows := max(64, size.bytes/rb/64*64)
			w := randKBlocks(r, kt, rows*nb, 0)
			out := make([]float32, rows)
			bench := func(name string, read int, f func()) {
				b.Run(fmt.Sprintf("%s/%s/%s", kt, size.name, name), func(b *testing.B) {
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
						b.ReportMetric(float64(b.N)*float64(rows*rb)/s/1e9, "GGUF-GB/s")
					}
				})
			}
			if HasGemmK(kt) {
				p := make([]byte, kt.GemmPackedBytes(rows, cols))
				if err := PackK(kt, p, w, rows, cols); err != nil {
					b.Fatal(err)
				}
				gb := kt.GemmGroupBytes(cols)
				bench("gemm-1tok", len(p), func() {
					for g := range rows / GemmRows {
						GemmK(kt, p[g*gb:(g+1)*gb], x, xd, xs, cols, 1, out[g*GemmRows:], GemmRows)
					}
				})
				if size.name == "L2" {
					// The prefill form: four tokens per packed block (the
					// byte rates are per pass over the weights).
					bench("gemm-4tok", len(p), func() {
						for g := range rows / GemmRows {
							GemmK(kt, p[g*gb:(g+1)*gb], x4, xd4, xs4, cols, 4, out4, GemmRows)
						}
					})
				}
			}
			bench("rows", len(w), func() {
				for r0 := 0; r0 < rows; r0 += 64 {
					DotKRows(kt, w[r0*rb:(r0+64)*rb], x, xd, xs, out[r0:r0+64])
				}
			})
		}
	}
}
