package main

import "math"

// The constants of simd.Exp (exp.go there has the same values), held in
// V16-V28 by the exponential kernels.
var expConsts = []float64{
	-87.0, 88.3, 1.44269504088896341, 0.693359375, -2.12194440e-4,
	1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
	1, math.Inf(1),
}

const (
	cLo = 16 + iota
	cHi
	cLog2e
	cLn2Hi
	cLn2Lo
	cP0
	cP1
	cP2
	cP3
	cP4
	cP5
	cOne
	cInf
)

// loadExpConsts broadcasts the constants into their registers.
func loadExpConsts(f *file) {
	for i, v := range expConsts {
		f.ins("MOVW $0x%08x, R9", math.Float32bits(float32(v)))
		f.ins("VDUP R9, V%d.S4", cLo+i)
	}
}

// expVec emits V<y> = simd.Exp(V<x>) lane by lane with the same f32
// operations in the same order as the Go form (no fused multiply-add), so
// the bits agree; V<t>+0..4 are scratch. V<x> is kept.
func expVec(f *file, x, y, t int) {
	c, n, r, s, p := t, t+1, t+2, t+3, t+4
	f.word(fmax(c, x, cLo)) // NaN lanes are fixed at the end
	f.word(fmin(c, c, cHi))
	f.word(fmul(n, c, cLog2e))
	f.word(frintn(n, n)) // to nearest even
	f.word(fmul(s, n, cLn2Hi))
	f.word(fsub(r, c, s))
	f.word(fmul(s, n, cLn2Lo))
	f.word(fsub(r, r, s))
	f.word(fmul(p, r, cP0))
	for k := cP1; k <= cP4; k++ {
		f.word(fadd(p, p, k))
		f.word(fmul(p, p, r))
	}
	f.word(fadd(p, p, cP5))
	f.word(fmul(s, r, r))
	f.word(fmul(p, s, p))
	f.word(fadd(p, p, r))
	f.word(fadd(y, p, cOne))
	f.word(fcvtzs(n, n)) // n is integral: exact
	f.word(shl23(n, n))
	f.word(add4s(y, y, n))
	// x < lo: 0; x > hi: +Inf; NaN: x.
	f.word(fcmgt(s, cLo, x))
	f.word(bic(y, y, s))
	f.word(fcmgt(s, x, cHi))
	f.word(bit(y, cInf, s))
	f.word(fcmeq(s, x, x))
	f.word(bif(y, x, s))
}

// The two vectors of a step: inputs in V0 and V1, results in V2 and V3,
// scratch V4-V8 and V9-V13.
func pair(f *file) {
	for i := range 2 {
		expVec(f, i, 2+i, 4+5*i)
	}
}

// expSub writes expSubF32NEON: 8 lanes per step as two independent
// vectors.
func expSub(f *file) {
	f.fn("expSubF32NEON", "sets out[i] = Exp(in[i] - sub) for i < n (a positive multiple of 8).",
		[]arg{{"out", "*float32"}, {"in", "*float32"}, {"sub", "float32"}, {"n", "int"}}, false, 0, 1, 2, 3)
	f.ins("VDUP R2, V29.S4")
	loadExpConsts(f)
	f.label("loop")
	f.ins("VLD1.P 32(R1), [V0.S4, V1.S4]")
	f.word(fsub(0, 0, 29))
	f.word(fsub(1, 1, 29))
	pair(f)
	f.ins("VST1.P [V2.S4, V3.S4], 32(R0)")
	f.ins("SUBS $8, R3")
	f.ins("BNE loop")
	f.ins("RET")
}

// swiglu writes swigluF32NEON: out = gate / (1 + Exp(-gate)) * up, 8 lanes
// per step.
func swiglu(f *file) {
	f.fn("swigluF32NEON", "sets out[i] = gate[i] / (1 + Exp(-gate[i])) * up[i] for i < n (a positive multiple of 8).",
		[]arg{{"out", "*float32"}, {"gate", "*float32"}, {"up", "*float32"}, {"n", "int"}}, false, 0, 1, 2, 3)
	loadExpConsts(f)
	f.label("loop")
	f.ins("VLD1.P 32(R1), [V14.S4, V15.S4]")
	f.ins("VLD1.P 32(R2), [V29.S4, V30.S4]")
	f.word(fneg(0, 14))
	f.word(fneg(1, 15))
	pair(f)
	for i := range 2 {
		f.word(fadd(2+i, 2+i, cOne))
		f.word(fdiv(2+i, 14+i, 2+i))
		f.word(fmul(2+i, 2+i, 29+i))
	}
	f.ins("VST1.P [V2.S4, V3.S4], 32(R0)")
	f.ins("SUBS $8, R3")
	f.ins("BNE loop")
	f.ins("RET")
}
