package simd

import (
	"fmt"
	"math"
	"testing"

	"github.com/x448/float16"
)

// TestGemmMatchesRowKernels runs every implementation's GEMM over packed
// Q8 and Q4 weights (odd row counts, so the last group is padded; every
// token count; activations with a stride wider than the row) against the
// pure-Go one-row kernels DotQ8 and DotQ4, which are checked against plain
// unpacking elsewhere.
func TestGemmMatchesRowKernels(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, nb := range []int{1, 3, 24} {
			for _, rows := range []int{1, 5, 8, 9, 17} {
				for _, pad := range []int{0, 64} {
					n := nb * QBlock
					xstride := n + pad
					const ntok = 7
					w8 := randI8(r, rows*n)
					w4 := randBytes(r, rows*n/2)
					ws := make([]uint16, rows*nb)
					for i := range ws {
						ws[i] = float16.Fromfloat32(float32(r.Float64()*0.02 + 0.001)).Bits()
					}
					xf := randF32(r, ntok*xstride)
					x := make([]int8, ntok*xstride)
					xd := make([]float32, ntok*xstride/QBlock)
					xs := make([]int32, len(xd))
					QuantizeQ8(x, xd, xf, false)
					BlockSums(xs, x)
					// The same activations evens first, for DotQ4.
					xe := make([]int8, len(x))
					for b := 0; b < len(x); b += QBlock {
						for i := range QBlock / 2 {
							xe[b+i], xe[b+QBlock/2+i] = x[b+2*i], x[b+2*i+1]
						}
					}
					p8 := make([]byte, GemmQ8.PackedBytes(rows, n))
					p4 := make([]byte, GemmQ4.PackedBytes(rows, n))
					if err := PackQ8(p8, w8, ws, rows, n); err != nil {
						t.Fatal(err)
					}
					if err := PackQ4(p4, w4, ws, rows, n); err != nil {
						t.Fatal(err)
					}
					const ostride = 11
					out := make([]float32, 4*ostride)
					for g := 0; g*GemmRows < rows; g++ {
						for t0 := 0; t0 < ntok; t0 += 4 {
							nt := min(4, ntok-t0)
							for _, kind := range []GemmKind{GemmQ8, GemmQ4} {
								p := p8
								if kind == GemmQ4 {
									p = p4
								}
								gb := kind.GroupBytes(n)
								for i := range out {
									out[i] = float32(math.NaN())
								}
								xo := t0 * xstride
								k.Gemm(kind, p[g*gb:(g+1)*gb], x[xo:], xd[xo/QBlock:], xs[xo/QBlock:], xstride, nt, out, ostride)
								for j := range nt {
									xt, dt := x[xo+j*xstride:], xd[(xo+j*xstride)/QBlock:]
									for l := range GemmRows {
										row := g*GemmRows + l
										got := out[j*ostride+l]
										if row >= rows {
											if got != 0 {
												t.Errorf("%s kind %d: padding row %d gives %g", k.Name, kind, row, got)
											}
											continue
										}
										var want float32
										var mag float64
										wsr := ws[row*nb : (row+1)*nb]
										if kind == GemmQ8 {
											want = Generic.DotQ8(w8[row*n:(row+1)*n], wsr, 1, xt, dt)
										} else {
											want = Generic.DotQ4(w4[row*n/2:(row+1)*n/2], wsr, 1, xe[xo+j*xstride:], dt)
										}
										for b := range nb {
											mag += math.Abs(float64(F16ToF32[wsr[b]]*dt[b])) * 128 * 127 * QBlock
										}
										if !within(got, want, nb, mag) {
											t.Errorf("%s kind %d nb=%d rows=%d pad=%d token %d row %d: %g, want %g", k.Name, kind, nb, rows, pad, t0+j, row, got, want)
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

func TestPackRejectsBadSizes(t *testing.T) {
	w := make([]int8, 64)
	ws := make([]uint16, 2)
	for _, c := range []struct {
		name       string
		dst        int
		rows, cols int
	}{
		{"cols not whole blocks", 1 << 12, 2, 33},
		{"too few weights", 1 << 12, 3, 32},
		{"dst too small", 10, 2, 32},
	} {
		if err := PackQ8(make([]byte, c.dst), w, ws, c.rows, c.cols); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// BenchmarkPrefill compares the prefill forms on a 256 × 768 matrix (the
// 110M shape, in L2) and 64 tokens: the one-row four-token kernels
// (DotQ8x4, DotQ4x4) against the GEMM over packed groups. MAC/s counts
// weight × token products.
func BenchmarkPrefill(b *testing.B) {
	const rows, cols, ntok = 256, 768, 64
	r := rngFor(b)
	nb := cols / QBlock
	w8, w4 := randI8(r, rows*cols), randBytes(r, rows*cols/2)
	ws := make([]uint16, rows*nb)
	for i := range ws {
		ws[i] = 0x2000
	}
	x := make([]int8, ntok*cols)
	xd, xs := make([]float32, ntok*nb), make([]int32, ntok*nb)
	QuantizeQ8(x, xd, randF32(r, ntok*cols), false)
	BlockSums(xs, x)
	p8, p4 := make([]byte, GemmQ8.PackedBytes(rows, cols)), make([]byte, GemmQ4.PackedBytes(rows, cols))
	if PackQ8(p8, w8, ws, rows, cols) != nil || PackQ4(p4, w4, ws, rows, cols) != nil {
		b.Fatal("pack")
	}
	out := make([]float32, ntok*GemmRows)
	var o4 [4]float32
	var o8 [8]float32
	af, xf := randF32(r, rows*cols), randF32(r, ntok*cols)
	for _, k := range Impls() {
		run := func(name string, f func()) {
			b.Run(fmt.Sprintf("%s/%s", name, k.Name), func(b *testing.B) {
				for b.Loop() {
					f()
				}
				b.ReportMetric(float64(rows*cols*ntok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
		run("f32-x4", func() {
			for i := range rows {
				for t := 0; t < ntok; t += 4 {
					k.DotF32x4(af[i*cols:(i+1)*cols], xf[t*cols:], cols, &o4)
				}
			}
		})
		run("f32-2x4", func() {
			for i := 0; i < rows; i += 2 {
				for t := 0; t < ntok; t += 4 {
					k.DotF32x2x4(af[i*cols:(i+1)*cols], af[(i+1)*cols:(i+2)*cols], xf[t*cols:], cols, &o8)
				}
			}
		})
		run("q8-x4", func() {
			for i := range rows {
				for t := 0; t < ntok; t += 4 {
					k.DotQ8x4(w8[i*cols:(i+1)*cols], ws[i*nb:(i+1)*nb], 1, x[t*cols:], xd[t*nb:], cols, &o4)
				}
			}
		})
		run("q4-x4", func() {
			for i := range rows {
				for t := 0; t < ntok; t += 4 {
					k.DotQ4x4(w4[i*cols/2:(i+1)*cols/2], ws[i*nb:(i+1)*nb], 1, x[t*cols:], xd[t*nb:], cols, &o4)
				}
			}
		})
		for _, kind := range []GemmKind{GemmQ8, GemmQ4} {
			if k.gemm[kind] == nil {
				continue // the pure-Go form is a reference, not a contender
			}
			p := p8
			if kind == GemmQ4 {
				p = p4
			}
			gb := kind.GroupBytes(cols)
			run(fmt.Sprintf("gemm-%s", [...]string{"q8", "q4"}[kind]), func() {
				for g := range rows / GemmRows {
					for t := 0; t < ntok; t += 4 {
						k.Gemm(kind, p[g*gb:(g+1)*gb], x[t*cols:], xd[t*nb:], xs[t*nb:], cols, 4, out[t*GemmRows:], GemmRows)
					}
				}
			})
		}
	}
}

// TestDotF32x2x4Bits: the two-row f32 tile gives DotF32x4's bits for each
// row, for every length (vector tails included).
func TestDotF32x2x4Bits(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, n := range lengths {
			if n == 0 {
				continue
			}
			a0, a1 := randF32(r, n), randF32(r, n)
			stride := n + 5
			x := randF32(r, 3*stride+n)
			var got [8]float32
			var w0, w1 [4]float32
			k.DotF32x2x4(a0, a1, x, stride, &got)
			k.DotF32x4(a0, x, stride, &w0)
			k.DotF32x4(a1, x, stride, &w1)
			if [4]float32(got[:4]) != w0 || [4]float32(got[4:]) != w1 {
				t.Errorf("%s n=%d: %v, want %v %v", k.Name, n, got, w0, w1)
			}
		}
	}
}

// TestPackLayout reads every weight and scale of large packed matrices
// (several packing goroutines) back against the source.
func TestPackLayout(t *testing.T) {
	r := rngFor(t)
	const rows, cols = 1029, 64
	nb := cols / QBlock
	w8, w4 := randI8(r, rows*cols), randBytes(r, rows*cols/2)
	ws := make([]uint16, rows*nb)
	for i := range ws {
		ws[i] = float16.Fromfloat32(float32(r.Float64())).Bits()
	}
	for _, kind := range []GemmKind{GemmQ8, GemmQ4} {
		p := make([]byte, kind.PackedBytes(rows, cols))
		var err error
		if kind == GemmQ8 {
			err = PackQ8(p, w8, ws, rows, cols)
		} else {
			err = PackQ4(p, w4, ws, rows, cols)
		}
		if err != nil {
			t.Fatal(err)
		}
		gb, bb := kind.GroupBytes(cols), kind.blockBytes()
		for row := range rows {
			g, l := row/GemmRows, row%GemmRows
			for b := range nb {
				blk := p[g*gb+b*bb:]
				if got, want := packedScale(blk, l), F16ToF32[ws[row*nb+b]]; got != want {
					t.Fatalf("kind %d row %d block %d: scale %g, want %g", kind, row, b, got, want)
				}
				for i := range QBlock {
					e := row*cols + b*QBlock + i
					want := int32(w8[e])
					if kind == GemmQ4 {
						want = int32(int8(w4[e/2]<<(4*(1-e&1))) >> 4)
					}
					if got := packedWeight(kind, blk[gemmScaleBytes:], l, i) - kind.offset(); got != want {
						t.Fatalf("kind %d row %d element %d: %d, want %d", kind, row, b*QBlock+i, got, want)
					}
				}
			}
		}
	}
}

// TestGemmBitsMatchGo: every implementation's GEMM gives the pure-Go
// GEMM's bits (each block's integer sum is exact, and the kernels scale
// and add the blocks in gemmGo's order), on weights that span the whole
// int8 range (-128 included) and int4 range and activations from
// QuantizeQ8, for every token count.
func TestGemmBitsMatchGo(t *testing.T) {
	r := rngFor(t)
	const rows, nb, ntok, xstride = 16, 9, 4, 9*QBlock + 32
	n := nb * QBlock
	w8 := randI8(r, rows*n)
	w8[3], w8[n+5] = -128, 127
	w4 := randBytes(r, rows*n/2)
	ws := make([]uint16, rows*nb)
	for i := range ws {
		ws[i] = float16.Fromfloat32(float32(r.Float64()*0.02 + 0.001)).Bits()
	}
	xf := randF32(r, ntok*xstride)
	xf[7] = 1e6 // a block whose activations reach ±127
	x := make([]int8, ntok*xstride)
	xd := make([]float32, ntok*xstride/QBlock)
	xs := make([]int32, len(xd))
	QuantizeQ8(x, xd, xf, false)
	BlockSums(xs, x)
	p8 := make([]byte, GemmQ8.PackedBytes(rows, n))
	p4 := make([]byte, GemmQ4.PackedBytes(rows, n))
	if err := PackQ8(p8, w8, ws, rows, n); err != nil {
		t.Fatal(err)
	}
	if err := PackQ4(p4, w4, ws, rows, n); err != nil {
		t.Fatal(err)
	}
	for _, k := range Impls() {
		for _, kind := range []GemmKind{GemmQ8, GemmQ4} {
			p := map[GemmKind][]byte{GemmQ8: p8, GemmQ4: p4}[kind]
			gb := kind.GroupBytes(n)
			for g := range rows / GemmRows {
				for nt := 1; nt <= ntok; nt++ {
					got := make([]float32, ntok*GemmRows)
					want := make([]float32, ntok*GemmRows)
					k.Gemm(kind, p[g*gb:(g+1)*gb], x, xd, xs, xstride, nt, got, GemmRows)
					gemmGo(kind)(p[g*gb:(g+1)*gb], x, xd, xs, nb, xstride, nt, want, GemmRows)
					for i := range nt * GemmRows {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Errorf("%s kind %d group %d tokens %d: out[%d] = %g, want %g (gemmGo)", k.Name, kind, g, nt, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
