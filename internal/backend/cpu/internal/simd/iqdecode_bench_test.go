package simd

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkIQDecode runs the one-token I-quant products decode makes
// (DotKRows over 64 rows at a time) on rows as wide as the 1.1B shape's
// (2048) and the 110M shape's (768), on a matrix that stays in L2
// (256 KiB) and one that streams from memory (64 MiB). ns/row is per
// second of the thread's own CPU time (the figure to set against
// llama.cpp's ggml_vec_dot for the type, timed the same way, on a loaded
// machine too); GGUF-GB/s the bytes of the rows per CPU second.
func BenchmarkIQDecode(b *testing.B) {
	r := rngFor(b)
	for _, kt := range []KQuant{IQ4XS, IQ3S} {
		for _, cols := range []int{2048, 768} {
			nb := cols / QK
			x, xd, xs := quantK(randF32(r, cols))
			for _, size := range []struct {
				name  string
				bytes int
			}{{"L2", 256 << 10}, {"mem", 64 << 20}} {
				rb := nb * kt.BlockBytes()
				rows := max(64, size.bytes/rb/64*64)
				w := randKBlocks(r, kt, rows*nb, 0)
				out := make([]float32, rows)
				b.Run(fmt.Sprintf("%s/%d/%s", kt, cols, size.name), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0, ok := threadTime()
					for b.Loop() {
						for r0 := 0; r0 < rows; r0 += 64 {
							DotKRows(kt, w[r0*rb:(r0+64)*rb], x, xd, xs, out[r0:r0+64])
						}
					}
					if t1, ok1 := threadTime(); ok && ok1 && t1 > t0 {
						s := (t1 - t0).Seconds()
						b.ReportMetric(s*1e9/float64(b.N)/float64(rows), "cpu-ns/row")
						b.ReportMetric(float64(b.N)*float64(len(w))/s/1e9, "GGUF-GB/s")
					}
				})
			}
		}
	}
}
