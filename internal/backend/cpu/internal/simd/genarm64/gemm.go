package main

import "fmt"

// gemmSDOT writes gemm<kind>T<tokens>SDOT, the prefill GEMM over gemm.go's
// packed groups (8 weight rows, four bytes of each row per 32-bit lane, so
// rows 0-3 in the first vector of a chunk and 4-7 in the second) for 1 to
// 4 tokens, with SDOT by element: each token's 32 activations of a block
// sit in two vectors, and SDOT's element form multiplies a chunk by the
// four of them the chunk meets, so no broadcast is needed. Q8's unsigned
// weights (w+128) are made signed again (EOR 0x80) and summed from 0; Q4's
// nibbles (0..15) are summed from 8·BlockSums as the amd64 kernels do: the
// same exact integer per block either way. Each block is then scaled as
// amd64's kernels do (SCVTF, the row scales times the token's, FMLA), so
// every form has gemmGo's bits.
//
// Registers: R0 w, R1/R8-R10 the tokens' x, R2/R11-R13 their scales,
// R3/R14/R15/R19 their block sums, R4 blocks left; V0-V7 the float
// accumulators (two per token), V8-V15 the block sums, V16-V23 the
// activations, V24-V27 weights, V28 the byte mask, V29 the token's scale,
// V30-V31 the rows' scales.
func gemmSDOT(f *file, q4 bool, tokens int) {
	kind := "Q8"
	if q4 {
		kind = "Q4"
	}
	name := fmt.Sprintf("gemm%sT%dSDOT", kind, tokens)
	f.fn(name, fmt.Sprintf("is the %s GEMM kernel for %d tokens with SDOT (simd.Impl.Gemm).", kind, tokens),
		[]arg{{"w", "*byte"}, {"x", "*int8"}, {"xd", "*float32"}, {"xs", "*int32"}, {"nb", "int"}, {"xstride", "int"}, {"out", "*float32"}, {"ostride", "int"}},
		false, 0, 1, 2, 3, 4, 5, 6, 7)
	xr := []int{1, 8, 9, 10}
	dr := []int{2, 11, 12, 13}
	sr := []int{3, 14, 15, 19}
	f.ins("LSR $3, R5, R21") // bytes between tokens' scales (and sums)
	for t := 1; t < tokens; t++ {
		f.ins("ADD R5, R%d, R%d", xr[t-1], xr[t])
		f.ins("ADD R21, R%d, R%d", dr[t-1], dr[t])
		f.ins("ADD R21, R%d, R%d", sr[t-1], sr[t])
	}
	if q4 {
		f.word(moviB(28, 0x0f))
	} else {
		f.word(moviB(28, 0x80))
	}
	for t := range tokens {
		f.zero(2*t, 2*t+1)
	}
	lbl := func(s string) string { return name + s }
	f.label(lbl("block"))
	f.ins("CBZ R4, %s", lbl("done"))
	for t := range tokens {
		a := 8 + 2*t
		if q4 {
			f.ins("VLD1R (R%d), [V%d.S4]", sr[t], a)
			f.ins("VSHL $3, V%d.S4, V%d.S4", a, a)
			f.ins("VMOV V%d.B16, V%d.B16", a, a+1)
		} else {
			f.zero(a, a+1)
		}
		f.ins("VLD1.P 32(R%d), [V%d.B16, V%d.B16]", xr[t], 16+2*t, 17+2*t)
	}
	// The rows' binary16 scales, widened (high half first: V30 in place).
	f.ins("VLD1.P 16(R0), [V30.H8]")
	f.word(fcvtl2(31, 30))
	f.word(fcvtl(30, 30))
	dot := func(lo, hi, xv, i int) {
		for t := range tokens {
			f.word(sdotElem(8+2*t, lo, 16+2*t+xv, i))
			f.word(sdotElem(9+2*t, hi, 16+2*t+xv, i))
		}
	}
	if q4 {
		for j := range 4 {
			f.ins("VLD1.P 32(R0), [V24.B16, V25.B16]")
			f.word(andB(26, 24, 28))
			f.word(andB(27, 25, 28))
			f.word(ushrB(24, 24, 4))
			f.word(ushrB(25, 25, 4))
			dot(26, 27, 0, j) // weights 4j..4j+3 of the block
			dot(24, 25, 1, j) // weights 16+4j..
		}
	} else {
		for j := range 8 {
			f.ins("VLD1.P 32(R0), [V24.B16, V25.B16]")
			f.ins("VEOR V28.B16, V24.B16, V24.B16")
			f.ins("VEOR V28.B16, V25.B16, V25.B16")
			dot(24, 25, j/4, j%4)
		}
	}
	for t := range tokens {
		a := 8 + 2*t
		f.word(scvtf4s(a, a))
		f.word(scvtf4s(a+1, a+1))
		f.ins("VLD1R (R%d), [V29.S4]", dr[t])
		f.word(fmul(26, 30, 29))
		f.word(fmul(27, 31, 29))
		f.word(fmla(2*t, a, 26))
		f.word(fmla(2*t+1, a+1, 27))
		f.ins("ADD $4, R%d", dr[t])
		f.ins("ADD $4, R%d", sr[t])
	}
	f.ins("SUB $1, R4")
	f.ins("B %s", lbl("block"))
	f.label(lbl("done"))
	f.ins("LSL $2, R7")
	for t := range tokens {
		f.ins("VST1 [V%d.S4, V%d.S4], (R6)", 2*t, 2*t+1)
		if t+1 < tokens {
			f.ins("ADD R7, R6")
		}
	}
	f.ins("RET")
}
