package simd

// The f32 prefill GEMM (amd64 with AVX-512): out = W·x for a block of
// weight rows (f32, in place: nothing is repacked) and a block of tokens,
// as a register tile of GemmF32Rows rows by up to GemmF32Tokens tokens
// whose accumulators each sum one output over 16 lanes, reduced once per
// tile. The summation order differs from DotF32's (the results agree
// within rounding), so the CPU backend uses it in dynamic math only.

// GemmF32Rows and GemmF32Tokens are the register tile of the f32 GEMM
// kernels: GemmF32Rows weight rows by 1 to GemmF32Tokens tokens.
const (
	GemmF32Rows   = 4
	GemmF32Tokens = 6
)

type gemmF32Kernel func(w *float32, wstride int, x *float32, xstride, n int, out *float32, ostride int)

// HasGemmF32 reports whether k has the f32 GEMM kernels.
func (k *Impl) HasGemmF32() bool { return k.gemmF32 != nil }

// GemmF32 sets out[t*ostride+r] = Σ_{i<n} w[r*wstride+i] * x[t*xstride+i]
// for r < rows and t < ntok (HasGemmF32 must hold). Tokens go through
// the kernels GemmF32Tokens at a time, each group meeting every group of
// GemmF32Rows rows while its inputs are in L1; rows beyond a whole group
// and columns beyond a multiple of 16 are finished in Go.
func (k *Impl) GemmF32(w []float32, wstride, rows int, x []float32, xstride, ntok, n int, out []float32, ostride int) {
	if rows == 0 || ntok == 0 {
		return
	}
	_ = w[(rows-1)*wstride+n-1]
	_ = x[(ntok-1)*xstride+n-1]
	_ = out[(ntok-1)*ostride+rows-1]
	n16 := n &^ 15
	rg := rows &^ (GemmF32Rows - 1)
	for t0 := 0; t0 < ntok; t0 += GemmF32Tokens {
		nt := min(GemmF32Tokens, ntok-t0)
		xt := x[t0*xstride:]
		ot := out[t0*ostride:]
		for r := 0; r < rg; r += GemmF32Rows {
			if n16 > 0 {
				k.gemmF32[nt-1](&w[r*wstride], wstride, &xt[0], xstride, n16, &ot[r], ostride)
			} else {
				for t := range nt {
					clear(ot[t*ostride+r : t*ostride+r+GemmF32Rows])
				}
			}
			if n16 < n {
				for t := range nt {
					for i := range GemmF32Rows {
						ot[t*ostride+r+i] += dotF32Go(w[(r+i)*wstride+n16:(r+i)*wstride+n], xt[t*xstride+n16:])
					}
				}
			}
		}
		for r := rg; r < rows; r++ {
			for t := range nt {
				ot[t*ostride+r] = k.DotF32(w[r*wstride:r*wstride+n], xt[t*xstride:])
			}
		}
	}
}

// GemmF32 is Best().GemmF32.
func GemmF32(w []float32, wstride, rows int, x []float32, xstride, ntok, n int, out []float32, ostride int) {
	best.GemmF32(w, wstride, rows, x, xstride, ntok, n, out, ostride)
}

// HasGemmF32 is Best().HasGemmF32.
func HasGemmF32() bool { return best.HasGemmF32() }
