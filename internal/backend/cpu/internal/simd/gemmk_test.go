package simd

import (
	"fmt"
	"math"
	"testing"
)

// TestGemmKMatchesDotK runs every implementation's K-quant GEMM over packed
// Q4_K, Q5_K and Q6_K rows (row counts that pad the last group, every
// token count, one to many blocks, activations with a stride wider than
// the row, extreme scales and activations) against the pure-Go one-row
// kernel DotK on the unpacked rows, bit for bit: the integer sums are
// exact and each block's float operations are DotK's.
func TestGemmKMatchesDotK(t *testing.T) {
	r := rngFor(t)
	same := func(a, b float32) bool { return a == b || a != a && b != b }
	for _, k := range Impls() {
		for _, kt := range []KQuant{Q4K, Q5K, Q6K, Q2K, Q3K} {
			for _, nb := range []int{1, 3, 11} {
				for _, rows := range []int{1, 5, 8, 9, 17} {
					for _, pad := range []int{0, QK} {
						extreme := (nb+rows+pad/QK)%2 == 1
						name := fmt.Sprintf("%s/%s/nb=%d/rows=%d/pad=%d", k.Name, kt, nb, rows, pad)
						n := nb * QK
						xstride := n + pad
						const ntok = 7
						ext := 0.0
						if extreme {
							ext = 0.3
						}
						w := randKBlocks(r, kt, rows*nb, ext)
						x, xd, xs := quantK(randActs(r, ntok*xstride, extreme))
						p := make([]byte, kt.GemmPackedBytes(rows, n))
						if err := PackK(kt, p, w, rows, n); err != nil {
							t.Fatal(err)
						}
						const ostride = 11
						out := make([]float32, 4*ostride)
						gb, rb := kt.GemmGroupBytes(n), nb*kt.BlockBytes()
						for g := 0; g*GemmRows < rows; g++ {
							for t0 := 0; t0 < ntok; t0 += 4 {
								nt := min(4, ntok-t0)
								for i := range out {
									out[i] = float32(math.NaN())
								}
								xo := t0 * xstride
								k.GemmK(kt, p[g*gb:(g+1)*gb], x[xo:], xd[xo/QK:], xs[xo/QKSum:], xstride, nt, out, ostride)
								for j := range nt {
									o := xo + j*xstride
									for l := range GemmRows {
										row := g*GemmRows + l
										got := out[j*ostride+l]
										if row >= rows {
											if got != 0 {
												t.Errorf("%s: padding row %d gives %g", name, row, got)
											}
											continue
										}
										want := Generic.DotK(kt, w[row*rb:(row+1)*rb], x[o:o+n], xd[o/QK:(o+n)/QK], xs[o/QKSum:(o+n)/QKSum])
										if !same(got, want) {
											t.Errorf("%s: token %d row %d: %g, want exactly %g", name, t0+j, row, got, want)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestPackKRejectsBadInput(t *testing.T) {
	w := make([]byte, 2*Q4K.BlockBytes())
	for _, c := range []struct {
		name       string
		kt         KQuant
		dst        int
		rows, cols int
	}{
		{"cols not whole blocks", Q4K, 1 << 14, 1, 300},
		{"too few weights", Q4K, 1 << 14, 3, QK},
		{"dst too small", Q4K, 10, 2, QK},
		{"no layout", NumKQuant, 1 << 14, 1, QK},
	} {
		if err := PackK(c.kt, make([]byte, c.dst), w, c.rows, c.cols); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestPackKManyGroups packs a matrix large enough for several packing
// goroutines and checks every row of it through the one-token GEMM.
func TestPackKManyGroups(t *testing.T) {
	r := rngFor(t)
	const rows, nb = 1029, 1
	for _, kt := range []KQuant{Q4K, Q5K, Q6K, Q2K, Q3K} {
		w := randKBlocks(r, kt, rows*nb, 0)
		x, xd, xs := quantK(randActs(r, nb*QK, false))
		p := make([]byte, kt.GemmPackedBytes(rows, nb*QK))
		if err := PackK(kt, p, w, rows, nb*QK); err != nil {
			t.Fatal(err)
		}
		gb, rb := kt.GemmGroupBytes(nb*QK), nb*kt.BlockBytes()
		var out [GemmRows]float32
		for g := 0; g*GemmRows < rows; g++ {
			Generic.GemmK(kt, p[g*gb:(g+1)*gb], x, xd, xs, nb*QK, 1, out[:], GemmRows)
			for l := range GemmRows {
				row := g*GemmRows + l
				if row >= rows {
					break
				}
				if want := Generic.DotK(kt, w[row*rb:(row+1)*rb], x, xd, xs); out[l] != want {
					t.Fatalf("%s row %d: %g, want %g", kt, row, out[l], want)
				}
			}
		}
	}
}

// BenchmarkPrefillK compares, on a 256 × 768 matrix (the 110M shape) and
// 64 tokens, the one-row four-token K-quant kernels (DotKx4) with the GEMM
// over packed groups, and for decode (one token) the rows kernel
// (DotKRows) with the one-token GEMM. MAC/s counts weight × token
// products.
func BenchmarkPrefillK(b *testing.B) {
	const rows, cols, ntok = 256, 768, 64
	r := rngFor(b)
	nb := cols / QK
	x, xd, xs := quantK(randF32(r, ntok*cols))
	out := make([]float32, ntok*GemmRows)
	rowOut := make([]float32, rows)
	var o4 [4]float32
	k := best
	for _, kt := range []KQuant{Q4K, Q5K, Q6K, Q2K, Q3K} {
		w := randKBlocks(r, kt, rows*nb, 0)
		p := make([]byte, kt.GemmPackedBytes(rows, cols))
		if PackK(kt, p, w, rows, cols) != nil {
			b.Fatal("pack")
		}
		rb, gb := nb*kt.BlockBytes(), kt.GemmGroupBytes(cols)
		run := func(name string, toks int, f func()) {
			b.Run(fmt.Sprintf("%s/%s/%s", kt, name, k.Name), func(b *testing.B) {
				for b.Loop() {
					f()
				}
				b.ReportMetric(float64(rows*cols*toks)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
		run("kx4", ntok, func() {
			for i := range rows {
				for t := 0; t < ntok; t += 4 {
					k.DotKx4(kt, w[i*rb:(i+1)*rb], x[t*cols:], xd[t*nb:], xs[t*cols/QKSum:], cols, &o4)
				}
			}
		})
		run("gemm", ntok, func() {
			for g := range rows / GemmRows {
				for t := 0; t < ntok; t += 4 {
					k.GemmK(kt, p[g*gb:(g+1)*gb], x[t*cols:], xd[t*nb:], xs[t*cols/QKSum:], cols, 4, out[t*GemmRows:], GemmRows)
				}
			}
		})
		run("rows-1tok", 1, func() { k.DotKRows(kt, w, x[:cols], xd[:nb], xs[:cols/QKSum], rowOut) })
		run("gemm-1tok", 1, func() {
			for g := range rows / GemmRows {
				k.GemmK(kt, p[g*gb:(g+1)*gb], x, xd, xs, cols, 1, out, GemmRows)
			}
		})
	}
}
