package simd

// dotF32Rows4A is dotF32RowsA four rows at a time where the rows are a
// multiple of 32 values (dotF32Rows4AVX512): the same bits.
func dotF32Rows4A(a, x, out []float32) {
	n := len(x)
	r4 := len(out) &^ 3
	if n%32 != 0 || n == 0 || r4 == 0 {
		dotF32RowsA(a, x, out)
		return
	}
	dotF32Rows4AVX512(&a[0], &x[0], n, r4, &out[0])
	if r4 < len(out) {
		dotF32RowsA(a[r4*n:], x, out[r4:])
	}
}

// dotF32Rows8A is dotF32Rows4A eight rows at a time on 512-bit vectors
// (dotF32Rows8AVX512): the same bits.
func dotF32Rows8A(a, x, out []float32) {
	n := len(x)
	r8 := len(out) &^ 7
	if n%32 != 0 || n == 0 || r8 == 0 {
		dotF32Rows4A(a, x, out)
		return
	}
	dotF32Rows8AVX512(&a[0], &x[0], n, r8, &out[0])
	if r8 < len(out) {
		dotF32Rows4A(a[r8*n:], x, out[r8:])
	}
}
