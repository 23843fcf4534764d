package simd

// The panel GEMM (AVX2 and FMA; the CPU backend's prefill and encoder
// products where the CPU has no f32 GEMM of AVX-512): c = a·b for a block
// of rows of a (row-major, a row per token) and a block of columns of b
// stored row by row (a row per step of the inner dimension: weights
// repacked as panels of GemmPanelCols columns, or keys and values as they
// lie). A register tile of up to 6 rows by 8, 16 or 24 columns loads one
// row of b per step and broadcasts one value of each of its rows of a, so
// per step 2 to 3 loads and a broadcast per row feed up to 12 FMAs. Each
// output is one lane that sums its products in order of the inner index
// with fused multiply-adds (not DotF32's order: results differ from the
// dot kernels' in the last bits).

// GemmPanelCols is the width of a weight panel the CPU backend packs for
// GemmPanel (a multiple of 8: whole register tiles).
const GemmPanelCols = 16

// gemmPanelKernel is one register tile: mr rows by nr columns.
type gemmPanelKernel func(a *float32, astride int, b *float32, bstride, k int, c *float32, cstride int, acc bool)

// gemmPanelKernels are the tiles of 1 to 6 rows by 8 and 16 columns, and
// of 1 to 4 rows by 24, and the passes over a row of scores that go with
// them in attention (MaxF32, SumF64: n a multiple of 16, at least 16).
type gemmPanelKernels struct {
	c8, c16 [6]gemmPanelKernel
	c24     [4]gemmPanelKernel
	max     func(x *float32, n int) float32
	sum     func(x *float32, n int) float64
}

// HasGemmPanel reports whether k runs GemmPanel in assembly.
func (k *Impl) HasGemmPanel() bool { return k.gemmPanel != nil }

// GemmPanel sets c[i*cstride+j] = Σ_{p<kn} a[i*astride+p]·b[p*bstride+j]
// for i < m and j < n, or with acc adds that sum to c[i*cstride+j]. Each
// sum runs in order of p (fused multiply-adds in the kernels, a multiply
// and an add in Go). Columns go through the register tiles 24, 16 or 8 at
// a time (the last ones short of 8 in Go), each column block meeting
// every row while its part of b is in L1.
func (k *Impl) GemmPanel(a []float32, astride, m int, b []float32, bstride, n, kn int, c []float32, cstride int, acc bool) {
	if m <= 0 || n <= 0 {
		return
	}
	_ = c[(m-1)*cstride+n-1]
	if kn <= 0 {
		if !acc {
			for i := range m {
				clear(c[i*cstride : i*cstride+n])
			}
		}
		return
	}
	_ = a[(m-1)*astride+kn-1]
	_ = b[(kn-1)*bstride+n-1]
	ks := k.gemmPanel
	if ks == nil {
		gemmPanelGo(a, astride, m, b, bstride, n, kn, c, cstride, acc)
		return
	}
	j := 0
	for j+8 <= n {
		var tiles []gemmPanelKernel
		nr := 8
		switch {
		case n-j >= 24 && (n-j)%16 != 0:
			tiles, nr = ks.c24[:], 24
		case n-j >= 16:
			tiles, nr = ks.c16[:], 16
		default:
			tiles = ks.c8[:]
		}
		for i := 0; i < m; i += len(tiles) {
			mr := min(len(tiles), m-i)
			tiles[mr-1](&a[i*astride], astride, &b[j], bstride, kn, &c[i*cstride+j], cstride, acc)
		}
		j += nr
	}
	if j < n {
		gemmPanelGo(a, astride, m, b[j:], bstride, n-j, kn, c[j:], cstride, acc)
	}
}

// gemmPanelGo is GemmPanel in Go.
func gemmPanelGo(a []float32, astride, m int, b []float32, bstride, n, kn int, c []float32, cstride int, acc bool) {
	for i := range m {
		ar := a[i*astride : i*astride+kn]
		cr := c[i*cstride : i*cstride+n]
		for j := range cr {
			var s float32
			for p, v := range ar {
				s += v * b[p*bstride+j]
			}
			if acc {
				cr[j] += s
			} else {
				cr[j] = s
			}
		}
	}
}

// MaxF32 returns the largest value of x (len(x) > 0). Where x holds a NaN
// the result is unspecified (NaN or one of x's values).
func (k *Impl) MaxF32(x []float32) float32 {
	n := len(x) &^ 15
	m := x[0]
	i := 0
	if k.gemmPanel != nil && n > 0 {
		m, i = k.gemmPanel.max(&x[0], n), n
	}
	for _, v := range x[i:] {
		m = max(m, v)
	}
	return m
}

// SumF64 returns Σ x[i] in float64: lane j < 4 of group a < 4 sums
// x[16i+4a+j] over whole groups of 16 values, the lanes are added as
// ((a0+a1)+(a2+a3)) per j, then (j0+j2)+(j1+j3), then the values past
// the last whole 16 in order; the kernel keeps this order, the same bits.
func (k *Impl) SumF64(x []float32) float64 {
	n := len(x) &^ 15
	var s float64
	if n > 0 {
		if k.gemmPanel != nil {
			s = k.gemmPanel.sum(&x[0], n)
		} else {
			s = sumF64Go(x[:n])
		}
	}
	for _, v := range x[n:] {
		s += float64(v)
	}
	return s
}

// sumF64Go is SumF64's order over whole groups of 16 values.
func sumF64Go(x []float32) float64 {
	var acc [4][4]float64
	for i := 0; i+16 <= len(x); i += 16 {
		for a := range 4 {
			for j := range 4 {
				acc[a][j] += float64(x[i+4*a+j])
			}
		}
	}
	var lane [4]float64
	for j := range lane {
		lane[j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])
	}
	return (lane[0] + lane[2]) + (lane[1] + lane[3])
}

// MaxF32 is Best().MaxF32.
func MaxF32(x []float32) float32 { return best.MaxF32(x) }

// SumF64 is Best().SumF64.
func SumF64(x []float32) float64 { return best.SumF64(x) }

// GemmPanel is Best().GemmPanel.
func GemmPanel(a []float32, astride, m int, b []float32, bstride, n, kn int, c []float32, cstride int, acc bool) {
	best.GemmPanel(a, astride, m, b, bstride, n, kn, c, cstride, acc)
}

// HasGemmPanel is Best().HasGemmPanel.
func HasGemmPanel() bool { return best.HasGemmPanel() }
