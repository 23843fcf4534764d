package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpAccuracy holds Exp against math.Exp (float64) over its whole
// range, and at its edges.
func TestExpAccuracy(t *testing.T) {
	worst := 0.0
	for x := float32(expLo); x <= expHi; x = math.Nextafter32(x, 1e9) + 3e-4*abs32(x) {
		got, want := float64(Exp(x)), math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	if worst > 2.5e-7 {
		t.Errorf("largest relative error %g, want <= 2.5e-7", worst)
	}
	t.Logf("largest relative error %g", worst)
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {-87.5, 0}, {float32(math.Inf(-1)), 0}, {89, float32(math.Inf(1))}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := Exp(c.x); got != c.want {
			t.Errorf("Exp(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); Exp(nan) == Exp(nan) {
		t.Error("Exp(NaN) is not NaN")
	}
	if got, want := SiLU(2), float32(2/(1+math.Exp(-2))); math.Abs(float64(got-want)) > 1e-6 {
		t.Errorf("SiLU(2) = %g, want %g", got, want)
	}
}

// expInputs covers ordinary values, both edges of Exp's range, infinities
// and NaN, at odd lengths.
func expInputs(n int) []float32 {
	r := rand.New(rand.NewPCG(3, uint64(n)))
	specials := []float32{0, -0.0, expLo, expHi, expLo - 1e-3, expHi + 1e-3, -1e30, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -86.999, 88.29}
	v := make([]float32, n)
	for i := range v {
		if i%5 == 0 {
			v[i] = specials[(i/5)%len(specials)]
		} else {
			v[i] = float32(r.NormFloat64() * 30)
		}
	}
	return v
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestExpParity requires every implementation's ExpSub and SwiGLU to give
// the scalar formulas' bits.
func TestExpParity(t *testing.T) {
	for _, k := range Impls() {
		for _, n := range lengths {
			for off := range 8 {
				in := expInputs(n + off)[off:]
				u := expInputs(n + 3)[3:]
				got := make([]float32, n)
				k.ExpSub(got, in, 1.5)
				for i, x := range in {
					if want := Exp(x - 1.5); !sameBits(got[i], want) {
						t.Fatalf("%s ExpSub n=%d off=%d [%d] exp(%g-1.5) = %g, want %g", k.Name, n, off, i, x, got[i], want)
					}
				}
				k.SwiGLU(got, in, u)
				for i, x := range in {
					if want := SiLU(x) * u[i]; !sameBits(got[i], want) {
						t.Fatalf("%s SwiGLU n=%d off=%d [%d] silu(%g)*%g = %g, want %g", k.Name, n, off, i, x, u[i], got[i], want)
					}
				}
			}
		}
	}
}
