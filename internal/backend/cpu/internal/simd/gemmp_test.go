package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkGemmPanel runs k.GemmPanel on an m x kn block of a and a kn x n
// block of b (strides wider than the blocks, c's other values NaN) and
// holds every output to a float64 sum of the same products (plus c's old
// value with acc), within f32 rounding of the sum of magnitudes; values of
// c outside the block must stay NaN.
func checkGemmPanel(t *testing.T, k *Impl, r *rand.Rand, m, n, kn int, acc bool) {
	t.Helper()
	astride, bstride, cstride := kn+3, n+5, n+2
	a, b := randF32(r, max(m*astride, 1)), randF32(r, max(kn*bstride, 1))
	c := make([]float32, m*cstride)
	old := randF32(r, m*cstride)
	for i := range c {
		c[i] = float32(math.NaN())
		if acc && i%cstride < n {
			c[i] = old[i]
		}
	}
	k.GemmPanel(a, astride, m, b, bstride, n, kn, c, cstride, acc)
	for i := range m {
		for j := range cstride {
			got := c[i*cstride+j]
			if j >= n {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%s m=%d n=%d k=%d: wrote c[%d][%d] beyond the columns", k.Name, m, n, kn, i, j)
				}
				continue
			}
			var want, mag float64
			if acc {
				want, mag = float64(old[i*cstride+j]), math.Abs(float64(old[i*cstride+j]))
			}
			for p := range kn {
				v := float64(a[i*astride+p]) * float64(b[p*bstride+j])
				want += v
				mag += math.Abs(v)
			}
			if d := math.Abs(float64(got) - want); !(d <= 4e-7*float64(kn+1)*mag+1e-30) {
				t.Fatalf("%s m=%d n=%d k=%d acc=%v: c[%d][%d] = %g, want %g (diff %g, Σ|p| %g)", k.Name, m, n, kn, acc, i, j, got, want, d, mag)
			}
		}
	}
}

// TestGemmPanelMatchesFloat64 runs every implementation's panel GEMM (the
// Go form and the AVX2 register tiles) over ragged shapes: rows that leave
// a partial tile of 6 or 4, columns of each tile width and past them (and
// short of 8, done in Go), inner lengths off the kernels' unroll of 4,
// store and accumulate.
func TestGemmPanelMatchesFloat64(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, m := range []int{1, 4, 6, 7, 13} {
			for _, n := range []int{3, 8, 13, 16, 24, 40, 72, 100} {
				for _, kn := range []int{0, 1, 3, 4, 7, 72, 130} {
					for _, acc := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/m=%d/n=%d/k=%d/acc=%v", k.Name, m, n, kn, acc), func(t *testing.T) {
							checkGemmPanel(t, k, r, m, n, kn, acc)
						})
					}
				}
			}
		}
	}
}

// TestGemmPanelKernels: where the assembly runs, it agrees with the Go
// form to f32 rounding (the Go form sums with separate multiplies and
// adds, the kernels with FMAs) and is not the Go form: the fused products
// differ in the last bits somewhere over a long sum (so the kernels really
// ran).
func TestGemmPanelKernels(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		if !k.HasGemmPanel() {
			continue
		}
		const m, n, kn = 12, 72, 512
		a, b := randF32(r, m*kn), randF32(r, kn*n)
		got, want := make([]float32, m*n), make([]float32, m*n)
		k.GemmPanel(a, kn, m, b, n, n, kn, got, n, false)
		gemmPanelGo(a, kn, m, b, n, n, kn, want, n, false)
		same := 0
		for i := range got {
			if got[i] == want[i] {
				same++
			}
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Sqrt(kn) {
				t.Fatalf("%s: c[%d] = %g, Go form %g", k.Name, i, got[i], want[i])
			}
		}
		if same == len(got) {
			t.Fatalf("%s: every output equals the Go form's bits: the kernels did not run", k.Name)
		}
	}
}

// FuzzGemmPanel: any shape (up to 20 rows, 80 columns, 300 inner steps),
// either mode, every implementation held to the float64 sum.
func FuzzGemmPanel(f *testing.F) {
	f.Add(uint8(6), uint8(16), uint16(72), false, int64(1))
	f.Add(uint8(5), uint8(72), uint16(3), true, int64(2))
	f.Add(uint8(1), uint8(7), uint16(0), true, int64(3))
	f.Fuzz(func(t *testing.T, m, n uint8, kn uint16, acc bool, seed int64) {
		r := rand.New(rand.NewPCG(uint64(seed), 2))
		for _, k := range Impls() {
			checkGemmPanel(t, k, r, int(m%21), int(n%81), int(kn%301), acc)
		}
	})
}

// TestMaxSumF64: every implementation's MaxF32 is the largest value and
// its SumF64 has the Go form's bits (the documented order), over lengths
// around the kernels' 16, and that order's sum is a running float64 sum
// to rounding.
func TestMaxSumF64(t *testing.T) {
	r := rngFor(t)
	for _, n := range []int{1, 5, 15, 16, 17, 33, 100, 4096} {
		x := randF32(r, n)
		for i := range x {
			x[i] = float32(math.Exp(float64(x[i]) * 8)) // a softmax row's spread
		}
		wantMax := x[0]
		var run, mag float64
		for _, v := range x {
			wantMax = max(wantMax, v)
			run += float64(v)
			mag += math.Abs(float64(v))
		}
		n16 := n &^ 15
		want := sumF64Go(x[:n16])
		for _, v := range x[n16:] {
			want += float64(v)
		}
		if math.Abs(want-run) > 1e-15*mag*float64(n) {
			t.Fatalf("n=%d: Go order sum %g, running sum %g", n, want, run)
		}
		for _, k := range Impls() {
			if got := k.MaxF32(x); got != wantMax {
				t.Fatalf("%s n=%d: MaxF32 %g, want %g", k.Name, n, got, wantMax)
			}
			if got := k.SumF64(x); got != want {
				t.Fatalf("%s n=%d: SumF64 %v, want exactly %v", k.Name, n, got, want)
			}
		}
	}
}
