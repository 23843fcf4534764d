package simd

// The f32 prefill GEMM (amd64 with AVX-512): out = W·x for a block of
// weight rows (f32, in place: nothing is repacked) and a block of tokens,
// as a register tile of GemmF32Rows rows by up to GemmF32Tokens tokens
// whose accumulators each sum one output over 16 lanes, reduced once per
// tile. The lanes hold what DotF32x4's two 8-lane accumulators hold and
// are reduced in its order, so with rows of a multiple of 16 values every
// output has DotF32x4's bits: the CPU backend's prefill tiles give the
// same results through either.

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
// for r < rows and t < ntok (HasGemmF32 must hold); for n a multiple of 16
// each output is DotF32x4(row r, x[t*xstride:], ...)'s, bit for bit.
// Tokens go through the kernels GemmF32Tokens at a time, each group
// meeting every group of GemmF32Rows rows while its inputs are in L1; a
// last partial group of rows goes through the same kernels with its rows
// repeated, and columns beyond a multiple of 16 are added in Go.
func (k *Impl) GemmF32(w []float32, wstride, rows int, x []float32, xstride, ntok, n int, out []float32, ostride int) {
	if rows == 0 || ntok == 0 {
		return
	}
	_ = w[(rows-1)*wstride+n-1]
	_ = x[(ntok-1)*xstride+n-1]
	_ = out[(ntok-1)*ostride+rows-1]
	n16 := n &^ 15
	rg := rows &^ (GemmF32Rows - 1)
	var one [GemmF32Tokens * GemmF32Rows]float32 // a single row's outputs, repeated
	for t0 := 0; t0 < ntok; t0 += GemmF32Tokens {
		nt := min(GemmF32Tokens, ntok-t0)
		xt := x[t0*xstride:]
		ot := out[t0*ostride:]
		for r := 0; r < rows; {
			nr := GemmF32Rows // rows this pass writes
			if r < rg {
				if n16 > 0 {
					k.gemmF32[nt-1](&w[r*wstride], wstride, &xt[0], xstride, n16, &ot[r], ostride)
				} else {
					for t := range nt {
						clear(ot[t*ostride+r : t*ostride+r+GemmF32Rows])
					}
				}
			} else {
				nr = 1
				if n16 > 0 {
					k.gemmF32[nt-1](&w[r*wstride], 0, &xt[0], xstride, n16, &one[0], GemmF32Rows)
				}
				for t := range nt {
					ot[t*ostride+r] = one[t*GemmF32Rows]
				}
			}
			if n16 < n {
				for t := range nt {
					for i := r; i < r+nr; i++ {
						ot[t*ostride+i] += dotF32Go(w[i*wstride+n16:i*wstride+n], xt[t*xstride+n16:])
					}
				}
			}
			r += nr
		}
	}
}

// GemmF32 is Best().GemmF32.
func GemmF32(w []float32, wstride, rows int, x []float32, xstride, ntok, n int, out []float32, ostride int) {
	best.GemmF32(w, wstride, rows, x, xstride, ntok, n, out, ostride)
}

// HasGemmF32 is Best().HasGemmF32.
func HasGemmF32() bool { return best.HasGemmF32() }
