package simd

// The wrappers every assembly form shares: each runs an architecture's
// kernel k on the whole vectors (width values at a time, a power of two)
// and finishes the rest in Go, or checks what the kernel cannot take and
// falls back to the Go form. The per-architecture files (simd_amd64.go,
// simd_arm64.go) bind them to their kernels in one-line functions.
// dotF32Vec and dotF16Vec (the decode dots) inline there, so their kernels
// stay direct calls; the others reach theirs through a function value, one
// indirect call per row or vector; callers reach the wrappers through
// the Impl's function values already, so nothing new moves to the heap
// (TestKernelsAllocateNothing).

func dotF32Vec(k func(a, x *float32, n int) float32, width int, a, x []float32) float32 {
	n := len(a) &^ (width - 1)
	var s float32
	if n > 0 {
		s = k(&a[0], &x[0], n)
	}
	for i := n; i < len(a); i++ {
		s += a[i] * x[i]
	}
	return s
}

func dotF32x4Vec(k func(a, x *float32, stride, n int, out *float32), width int, a, x []float32, stride int, out *[4]float32) {
	n := len(a) &^ (width - 1)
	if n == 0 {
		dotF32x4Go(a, x, stride, out)
		return
	}
	k(&a[0], &x[0], stride, n, &out[0])
	for j := range out {
		xj := x[j*stride:]
		for i := n; i < len(a); i++ {
			out[j] += a[i] * xj[i]
		}
	}
}

// dotF16Vec and dotBF16Vec take kernels over whole vectors of 8 values.
func dotF16Vec(k func(a *uint16, x *float32, n int) float32, a []uint16, x []float32) float32 {
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		s = k(&a[0], &x[0], n)
	}
	for i := n; i < len(a); i++ {
		s += F16ToF32[a[i]] * x[i]
	}
	return s
}

func dotBF16Vec(k func(a *uint16, x *float32, n int) float32, a []uint16, x []float32) float32 {
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		s = k(&a[0], &x[0], n)
	}
	if n < len(a) {
		s += dotBF16Go(a[n:], x[n:])
	}
	return s
}

// dotI8Vec and dotI4Vec run k on blocks whose length is a multiple of
// width, the Go form on other blocks.
func dotI8Vec(k func(q *int8, x, sc *float32, nb, block int) float32, width int, q []int8, sc []float32, block int, x []float32) float32 {
	if block%width != 0 || len(sc) == 0 {
		return dotI8Go(q, sc, block, x)
	}
	return k(&q[0], &x[0], &sc[0], len(sc), block)
}

func dotI4Vec(k func(q *byte, x, sc *float32, nb, block int) float32, width int, q []byte, sc []float32, block int, x []float32) float32 {
	if block%width != 0 || len(sc) == 0 {
		return dotI4Go(q, sc, block, x)
	}
	return k(&q[0], &x[0], &sc[0], len(sc), block)
}

// expSubVec and swigluVec take kernels over whole vectors of 8 values.
func expSubVec(k func(out, in *float32, sub float32, n int), out, in []float32, sub float32) {
	n := len(out) &^ 7
	if n > 0 {
		k(&out[0], &in[0], sub, n)
	}
	expSubGo(out[n:], in[n:], sub)
}

func swigluVec(k func(out, g, u *float32, n int), out, g, u []float32) {
	n := len(out) &^ 7
	if n > 0 {
		k(&out[0], &g[0], &u[0], n)
	}
	swigluGo(out[n:], g[n:], u[n:])
}

// The weighted sums run k on whole vectors of columns and the rest in Go.
func wsumF32Vec(k func(out, v *float32, stride int, w *float32, n, d int), width int, out, v []float32, stride int, w []float32) {
	d := len(out) &^ (width - 1)
	if len(w) == 0 || d == 0 {
		wsumF32Go(out, v, stride, w)
		return
	}
	k(&out[0], &v[0], stride, &w[0], len(w), d)
	if d < len(out) {
		wsumF32Go(out[d:], v[d:], stride, w)
	}
}

// wsumF16Vec takes a kernel over whole vectors of 8 columns.
func wsumF16Vec(k func(out *float32, v *uint16, stride int, w *float32, n, d int), out []float32, v []uint16, stride int, w []float32) {
	d := len(out) &^ 7
	if len(w) == 0 || d == 0 {
		wsumF16Go(out, v, stride, w)
		return
	}
	k(&out[0], &v[0], stride, &w[0], len(w), d)
	if d < len(out) {
		wsumF16Go(out[d:], v[d:], stride, w)
	}
}

// kernelK wraps a K-quant kernel (the slices already checked by DotK).
func kernelK(f func(w *byte, x *int8, xd *float32, xs *int16, nb int) float32) func(w []byte, x []int8, xd []float32, xs []int16) float32 {
	return func(w []byte, x []int8, xd []float32, xs []int16) float32 {
		if len(xd) == 0 {
			return 0
		}
		return f(&w[0], &x[0], &xd[0], &xs[0], len(xd))
	}
}

// kernelKRows wraps a several-rows K-quant kernel (DotKRows checked the
// slices).
func kernelKRows(f func(w *byte, x *int8, xd *float32, xs *int16, nb, rows int, out *float32)) func(w []byte, x []int8, xd []float32, xs []int16, out []float32) {
	return func(w []byte, x []int8, xd []float32, xs []int16, out []float32) {
		if len(out) == 0 {
			return
		}
		if len(xd) == 0 {
			clear(out)
			return
		}
		f(&w[0], &x[0], &xd[0], &xs[0], len(xd), len(out), &out[0])
	}
}

// kernelKx4 wraps a four-token K-quant kernel (DotKx4 checked the
// slices: xstride is a multiple of QK).
func kernelKx4(t KQuant, f func(w *byte, x *int8, xd *float32, xs *int16, nb, xstride int, out *float32)) func(w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32) {
	return func(w []byte, x []int8, xd []float32, xs []int16, xstride int, out *[4]float32) {
		if len(w) == 0 {
			*out = [4]float32{}
			return
		}
		f(&w[0], &x[0], &xd[0], &xs[0], len(w)/t.BlockBytes(), xstride, &out[0])
	}
}

// kernelQ32 wraps a Q4_1/Q5_0/Q5_1/Q8_0/MXFP4 kernel (the slices already
// checked).
func kernelQ32(f func(w *byte, x *int8, xd *float32, nb int) float32) func(w []byte, x []int8, xd []float32) float32 {
	return func(w []byte, x []int8, xd []float32) float32 {
		if len(xd) == 0 {
			return 0
		}
		return f(&w[0], &x[0], &xd[0], len(xd))
	}
}
