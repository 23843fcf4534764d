package simd

import "math"

// Exp is e^x in f32 by Cody and Waite's reduction and a degree-5
// polynomial (the coefficients of Cephes' expf): x = n*ln2 + r with
// |r| <= ln2/2, e^r = 1 + r + r²·P(r), then 2^n added to the exponent.
// Relative error below 2.5e-7 (TestExpAccuracy); e^x is 0 below expLo and
// +Inf above expHi, NaN stays NaN. Every operation is a single f32 multiply
// or add (no fused multiply-add; the explicit conversions keep the Go
// compiler from fusing), so the assembly forms give the same bits.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < expLo:
		return 0
	case x > expHi:
		return float32(math.Inf(1))
	}
	n := float32(math.RoundToEven(float64(float32(x * expLog2e))))
	r := x - float32(n*expLn2Hi)
	r -= float32(n * expLn2Lo)
	p := float32(expP0*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(p*float32(r*r)) + r
	y += 1
	return math.Float32frombits(math.Float32bits(y) + uint32(int32(n))<<23)
}

// The constants of Exp (the gen command writes the same values).
const (
	expLo    = -87.0 // e^expLo is still a normal float after the scaling
	expHi    = 88.3  // n <= 127 for every x <= expHi
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375 // ln 2 = expLn2Hi + expLn2Lo, expLn2Hi exact in 9 bits
	expLn2Lo = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
)

// SiLU is x·σ(x) = x / (1 + e^-x) with Exp.
func SiLU(x float32) float32 { return x / (1 + Exp(-x)) }

func expSubGo(out, in []float32, sub float32) {
	in = in[:len(out)]
	for i, v := range in {
		out[i] = Exp(v - sub)
	}
}

func swigluGo(out, g, u []float32) {
	g, u = g[:len(out)], u[:len(out)]
	for i, v := range g {
		out[i] = SiLU(v) * u[i]
	}
}
