package simd

import (
	"fmt"
	"math"
	"testing"
)

// TestGemmF32MatchesFloat64 runs every implementation's f32 GEMM (where it
// has one) over ragged shapes (row counts that leave a partial register
// tile, token counts that leave a partial token group, column counts off
// a multiple of 16, strides wider than the rows) against a float64 sum of
// the same products, within f32 rounding of the sum of magnitudes.
func TestGemmF32MatchesFloat64(t *testing.T) {
	r := rngFor(t)
	ran := false
	for _, k := range Impls() {
		if !k.HasGemmF32() {
			continue
		}
		ran = true
		for _, n := range []int{5, 16, 37, 768} {
			for _, rows := range []int{1, 4, 7, 16} {
				for _, ntok := range []int{1, 5, 6, 13} {
					t.Run(fmt.Sprintf("%s/n=%d/rows=%d/tokens=%d", k.Name, n, rows, ntok), func(t *testing.T) {
						wstride, xstride, ostride := n+3, n+17, rows+2
						w, x := randF32(r, rows*wstride), randF32(r, ntok*xstride)
						out := make([]float32, ntok*ostride)
						for i := range out {
							out[i] = float32(math.NaN()) // every output must be written
						}
						k.GemmF32(w, wstride, rows, x, xstride, ntok, n, out, ostride)
						for tk := range ntok {
							for row := range rows {
								var want, mag float64
								for i := range n {
									p := float64(w[row*wstride+i]) * float64(x[tk*xstride+i])
									want += p
									mag += math.Abs(p)
								}
								got := float64(out[tk*ostride+row])
								if d := math.Abs(got - want); !(d <= 4e-7*float64(n)*mag+1e-30) {
									t.Fatalf("token %d row %d: got %g, want %g (diff %g, Σ|p| %g)", tk, row, got, want, d, mag)
								}
							}
							for i := rows; i < ostride; i++ {
								if v := out[tk*ostride+i]; !math.IsNaN(float64(v)) {
									t.Fatalf("token %d: wrote beyond the rows at %d", tk, i)
								}
							}
						}
					})
				}
			}
		}
	}
	if !ran {
		t.Skip("no implementation with the f32 GEMM on this CPU")
	}
}

// TestGemmF32IsDotF32x4: with rows of a multiple of 16 values the GEMM
// gives every output DotF32x4's bits (the CPU backend's prefill tiles rely
// on it), whole register tiles and the last partial one alike.
func TestGemmF32IsDotF32x4(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		if !k.HasGemmF32() {
			continue
		}
		for _, n := range []int{16, 64, 768} {
			const rows, ntok = 7, 9
			wstride, xstride, ostride := n+5, n+3, rows+1
			w, x := randF32(r, rows*wstride), randF32(r, (ntok+3)*xstride)
			out := make([]float32, ntok*ostride)
			k.GemmF32(w, wstride, rows, x, xstride, ntok, n, out, ostride)
			var want [4]float32
			for row := range rows {
				for tk := range ntok {
					k.DotF32x4(w[row*wstride:row*wstride+n], x[tk*xstride:], xstride, &want)
					if got := out[tk*ostride+row]; got != want[0] {
						t.Errorf("%s n=%d row %d token %d: %g, want exactly %g", k.Name, n, row, tk, got, want[0])
					}
				}
			}
		}
	}
}

// BenchmarkGemmF32 measures the f32 prefill kernels on a 110M-shape tile
// (16 rows by 64 tokens of 768 columns, and of 2048 for the FFN's down
// projection) in GFLOP/s: the GEMM where there is one, else (and for
// comparison) the two-row kernel the exact prefill uses.
func BenchmarkGemmF32(b *testing.B) {
	const rows, ntok = 16, 64
	r := rngFor(b)
	for _, n := range []int{768, 2048} {
		w, x := randF32(r, rows*n), randF32(r, ntok*n)
		out := make([]float32, ntok*rows)
		flops := func(b *testing.B) {
			b.ReportMetric(float64(2*rows*ntok*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		for _, k := range Impls() {
			if k.HasGemmF32() {
				b.Run(fmt.Sprintf("gemm/n=%d/%s", n, k.Name), func(b *testing.B) {
					for b.Loop() {
						k.GemmF32(w, n, rows, x, n, ntok, n, out, rows)
					}
					flops(b)
				})
			}
			b.Run(fmt.Sprintf("x2x4/n=%d/%s", n, k.Name), func(b *testing.B) {
				var o [8]float32
				for b.Loop() {
					for i := 0; i < rows; i += 2 {
						for t := 0; t < ntok; t += 4 {
							k.DotF32x2x4(w[i*n:(i+1)*n], w[(i+1)*n:(i+2)*n], x[t*n:], n, &o)
						}
					}
				}
				flops(b)
			})
		}
	}
}

// BenchmarkF32Rows runs the f32 decode kernel over a 32000 x 768 matrix
// (the 110M shape's output layer, streamed from memory), in bytes/s.
func BenchmarkF32Rows(b *testing.B) {
	const rows, cols = 32000, 768
	r := rngFor(b)
	w, x := randF32(r, rows*cols), randF32(r, cols)
	out := make([]float32, rows)
	for _, k := range Impls() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(4 * rows * cols)
			for b.Loop() {
				k.DotF32Rows(w, x, out)
			}
		})
	}
}

// TestF32RowsRagged: DotF32Rows gives DotF32's bits row by row for row
// counts that leave partial groups of the several-row kernels (8, then 4,
// then one row at a time).
func TestF32RowsRagged(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, n := range []int{32, 96, 768, 776} {
			for _, rows := range []int{5, 8, 12, 13, 67} {
				a, x := randF32(r, rows*n), randF32(r, n)
				got := make([]float32, rows)
				k.DotF32Rows(a, x, got)
				for i := range rows {
					if want := k.DotF32(a[i*n:(i+1)*n], x); got[i] != want {
						t.Errorf("%s n=%d rows=%d row %d: %g, want exactly %g", k.Name, n, rows, i, got[i], want)
					}
				}
			}
		}
	}
}
