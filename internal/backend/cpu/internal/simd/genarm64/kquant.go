package main

import "fmt"

// The K-quant kernels: one weight row of nb Q4_K or Q6_K blocks (GGUF
// layout) against activations quantized by QuantizeQ8K. Each sub-block's
// values are unpacked to bytes (0..15 or 0..63, which SDOT and SMULL take
// as signed), their products with the activations summed into int32 lanes
// by the variant's dot, and multiplied by the sub-block's scale into the
// block's int32 sums (MLA by element); the mins (Q4_K) and the offset of 32
// (Q6_K) come through the activation sums. The block's float operations are
// the Go form's, one rounding each, so every result has its bits.
//
// Registers: R0 w, R1 x, R2 xd, R3 xs, R4 nb; V0 the float total, V1-V7
// the scales, V8-V11 the neon variant's products, V12 one sub-block's sums,
// V13 the block's, V14-V15 byte masks, V16-V23 weights, V24-V31
// activations.

var kArgs = []arg{{"w", "*byte"}, {"x", "*int8"}, {"xd", "*float32"}, {"xs", "*int16"}, {"nb", "int"}}

// kEpilogue adds the block's float terms to F0: float32(d*dx*Σi), minus
// float32(dmin*dx*Σm) when withMin, with Σi in R12, Σm in R11, d the f16
// at off(R0) and dmin the one after it; dx is loaded from R2 (advanced).
func kEpilogue(f *file, off int, withMin bool) {
	f.ins("MOVHU %d(R0), R13", off)
	f.ins("FMOVS R13, F1")
	f.ins("FCVTHS F1, F1")
	f.ins("FMOVS.P 4(R2), F3")
	f.ins("FMULS F3, F1, F1")
	f.ins("SCVTFWS R12, F4")
	f.ins("FMULS F4, F1, F4")
	if withMin {
		f.ins("MOVHU %d(R0), R13", off+2)
		f.ins("FMOVS R13, F2")
		f.ins("FCVTHS F2, F2")
		f.ins("FMULS F3, F2, F2")
		f.ins("SCVTFWS R11, F5")
		f.ins("FMULS F5, F2, F5")
		f.ins("FSUBS F5, F4, F4")
	}
	f.ins("FADDS F4, F0, F0")
}

func kName(t string, v variant, rows bool) string {
	if rows {
		return "dot" + t + "Rows" + v.name
	}
	return "dot" + t + v.name
}

// kFn starts a K-quant kernel: the one-row form (returning the dot
// product) or the rows form, which runs the same instructions for each of
// rows consecutive weight rows and stores row r's result in out[r]; it
// keeps x, xd, xs and nb in R14, R15, R19 and R20 to restart each row,
// rows in R21 and out in R22.
func kFn(f *file, name, doc string, rows bool) {
	if !rows {
		f.fn(name, doc, kArgs, true, 0, 1, 2, 3, 4)
		return
	}
	f.fn(name, "sets out[r] to the one-row kernel's result for weight row r (the rows consecutive at w) for r < rows: it "+doc,
		append(kArgs[:len(kArgs):len(kArgs)], arg{"rows", "int"}, arg{"out", "*float32"}), false, 0, 1, 2, 3, 4, 21, 22)
	f.ins("MOVD R1, R14")
	f.ins("MOVD R2, R15")
	f.ins("MOVD R3, R19")
	f.ins("MOVD R4, R20")
}

// kRow starts a row (with rows: the row loop's test and the restart of the
// activation pointers) and clears the float total.
func kRow(f *file, rows bool) {
	if rows {
		f.label("row")
		f.ins("CBZ R21, end")
		f.ins("MOVD R14, R1")
		f.ins("MOVD R15, R2")
		f.ins("MOVD R19, R3")
		f.ins("MOVD R20, R4")
	}
	f.zero(0)
}

// kEnd returns the total, or with rows stores it and goes to the next row.
func kEnd(f *file, rows bool) {
	if !rows {
		f.ret(5, 0)
		return
	}
	f.ins("FMOVS.P F0, 4(R22)")
	f.ins("SUB $1, R21")
	f.ins("B row")
	f.label("end")
	f.ins("RET")
}

// k45Scales unpacks the 12 scale bytes of the Q4_K/Q5_K block at R0 as
// llama.cpp does: scales 0..3, 4..7 and mins 0..3, 4..7 as four words of
// V1 (through R5-R9), then the scales as int16 in V2, the mins as int16 in
// V3, scales 0..3 and 4..7 as int32 in V4 and V5.
func k45Scales(f *file) {
	f.ins("MOVWU 4(R0), R5")
	f.ins("MOVWU 8(R0), R6")
	f.ins("MOVWU 12(R0), R7")
	f.ins("LSRW $4, R7, R8")
	f.ins("ANDW $0x0f0f0f0f, R8")
	f.ins("LSRW $6, R6, R9")
	f.ins("ANDW $0x03030303, R9")
	f.ins("ORRW R9<<4, R8, R8")
	f.ins("ANDW $0x3f3f3f3f, R6")
	f.ins("LSRW $6, R5, R9")
	f.ins("ANDW $0x03030303, R9")
	f.ins("ANDW $0x0f0f0f0f, R7")
	f.ins("ORRW R9<<4, R7, R7")
	f.ins("ANDW $0x3f3f3f3f, R5")
	f.ins("VMOV R5, V1.S[0]")
	f.ins("VMOV R7, V1.S[1]")
	f.ins("VMOV R6, V1.S[2]")
	f.ins("VMOV R8, V1.S[3]")
	f.word(uxtlB(2, 1))
	f.word(uxtl2B(3, 1))
	f.word(uxtlH(4, 2))
	f.word(uxtl2H(5, 2))
}

// q5High ORs bit 2g+i of the Q5_K high bits (V22-V23) into bit 4 of every
// value of sub-block 2g+i (V18+2i and V19+2i) for i < 2, V12 the scratch.
func q5High(f *file, g int) {
	for i := range 2 {
		for p := range 2 {
			bitTo(f, 18+2*i+p, 22+p, 2*g+i, 4, 12)
		}
	}
}

// bitTo ORs bit b of every byte of Vsrc, moved to bit to, into Vdst, V15
// holding 1<<to in every byte and Vtmp the scratch.
func bitTo(f *file, dst, src, b, to, tmp int) {
	switch {
	case b < to:
		f.word(shlB(tmp, src, to-b))
		f.word(andB(tmp, tmp, 15))
	case b > to:
		f.word(ushrB(tmp, src, b-to))
		f.word(andB(tmp, tmp, 15))
	default:
		f.word(andB(tmp, src, 15))
	}
	f.word(orrB(dst, dst, tmp))
}

// q6Scales loads the 16 int8 scales of the Q6_K block at R0 into V1 and
// sign-extends them: int16 in V2-V3, int32 in V4-V7 (through R10).
func q6Scales(f *file) {
	f.ins("ADD $192, R0, R10")
	f.ins("VLD1 (R10), [V1.B16]")
	widenScales(f)
}

// widenScales sign-extends the 16 int8 scales in V1: int16 in V2-V3,
// int32 in V4-V7.
func widenScales(f *file) {
	f.word(sxtlB(2, 1))
	f.word(sxtl2B(3, 1))
	f.word(sxtlH(4, 2))
	f.word(sxtl2H(5, 2))
	f.word(sxtlH(6, 3))
	f.word(sxtl2H(7, 3))
}

// q6Quarter unpacks half p of quarter k of a Q6_K half-block into Vdst:
// the low or high nibbles of its ql (V16-V19) with bits 2k..2k+1 of its
// qh (V20+p) as bits 4..5; Vtmp is the scratch.
func q6Quarter(f *file, k, p, dst, tmp int) {
	src := []int{16, 18}[k&1] + p
	if k < 2 {
		f.word(andB(dst, src, 14))
	} else {
		f.word(ushrB(dst, src, 4))
	}
	qh := 20 + p
	switch k {
	case 0:
		f.word(shlB(tmp, qh, 4))
		f.word(andB(tmp, tmp, 15))
	case 1:
		f.word(shlB(tmp, qh, 2))
		f.word(andB(tmp, tmp, 15))
	case 2:
		f.word(andB(tmp, qh, 15))
	case 3:
		f.word(ushrB(tmp, qh, 2))
		f.word(andB(tmp, tmp, 15))
	}
	f.word(orrB(dst, dst, tmp))
}

// dotQ4KArm writes the Q4_K kernel, or with q5 the Q5_K one.
func dotQ4KArm(f *file, v variant, q5, rows bool) {
	name, what, bytes, qs := "Q4K", "Q4_K", 144, 16
	if q5 {
		name, what, bytes, qs = "Q5K", "Q5_K", 176, 48
	}
	kFn(f, kName(name, v, rows), fmt.Sprintf("returns the dot product of nb %s blocks at w with QuantizeQ8K activations (x, xd, xs), %s per 32-value sub-block.", what, v.doc), rows)
	f.word(moviB(14, 0x0f))
	f.word(moviB(15, 0x10))
	kRow(f, rows)
	f.label("block")
	f.ins("CBZ R4, done")
	k45Scales(f)
	// Σm: the mins against the pair sums of the 16 activation sums.
	f.ins("VLD1.P 32(R3), %s", vlist(24, 2, "H8"))
	f.word(addp8h(26, 24, 25))
	f.word(smullH(12, 3, 26))
	f.word(smlal2H(12, 3, 26))
	f.word(addv4s(12, 12))
	f.ins("FMOVS F12, R11")
	if q5 {
		f.ins("ADD $16, R0, R9")
		f.ins("VLD1 (R9), %s", vlist(22, 2, "B16"))
	}
	f.ins("ADD $%d, R0, R10", qs)
	f.zero(13)
	for g := range 4 {
		f.ins("VLD1.P 32(R10), %s", vlist(16, 2, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(24, 4, "B16"))
		f.word(andB(18, 16, 14))
		f.word(andB(19, 17, 14))
		f.word(ushrB(20, 16, 4))
		f.word(ushrB(21, 17, 4))
		if q5 {
			q5High(f, g)
		}
		for i := range 2 {
			s := 2*g + i
			f.zero(12)
			v.dot(f, 12, 18+2*i, 24+2*i, 0)
			v.dot(f, 12, 19+2*i, 25+2*i, 1)
			f.word(mlaElem(13, 12, 4+s/4, s%4))
		}
	}
	f.word(addv4s(13, 13))
	f.ins("FMOVS F13, R12")
	kEpilogue(f, 0, true)
	f.ins("ADD $%d, R0", bytes)
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	kEnd(f, rows)
}

// dotQ6KArm writes the Q6_K kernel: every 16-byte register of unpacked
// values is one sub-block.
func dotQ6KArm(f *file, v variant, rows bool) {
	kFn(f, kName("Q6K", v, rows), fmt.Sprintf("returns the dot product of nb Q6_K blocks at w with QuantizeQ8K activations (x, xd, xs), %s per 16-value sub-block; the offset of 32 comes off as 32·Σ_j sc_j·xs_j.", v.doc), rows)
	f.word(moviB(14, 0x0f))
	f.word(moviB(15, 0x30))
	kRow(f, rows)
	f.label("block")
	f.ins("CBZ R4, done")
	q6Scales(f)
	// Σ sc_j·xs_j
	f.ins("VLD1.P 32(R3), %s", vlist(24, 2, "H8"))
	scXs(f, "R11")
	f.ins("MOVD R0, R10")
	f.ins("ADD $128, R0, R9")
	f.zero(13)
	for h := range 2 {
		f.ins("VLD1.P 64(R10), %s", vlist(16, 4, "B16")) // ql0 in V16-V17, ql1 in V18-V19
		f.ins("VLD1.P 32(R9), %s", vlist(20, 2, "B16"))  // qh
		f.ins("VLD1.P 64(R1), %s", vlist(24, 4, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(28, 4, "B16"))
		for k := range 4 {
			for p := range 2 {
				q6Quarter(f, k, p, 22, 23)
				s := 8*h + 2*k + p
				f.zero(12)
				v.dot(f, 12, 22, 24+2*k+p, 0)
				f.word(mlaElem(13, 12, 4+s/4, s%4))
			}
		}
	}
	f.word(addv4s(13, 13))
	f.ins("FMOVS F13, R12")
	f.ins("SUBW R11<<5, R12, R12")
	kEpilogue(f, 208, false)
	f.ins("ADD $210, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	kEnd(f, rows)
}

// scXs emits Σ_j sc_j·xs_j of a K-quant block of 16-value sub-blocks
// into the general register dst: the int16 scales in V2-V3 against the
// 16 activation sums loaded in V24-V25 (V12 the scratch).
func scXs(f *file, dst string) {
	f.word(smullH(12, 2, 24))
	f.word(smlal2H(12, 2, 24))
	f.word(smlalH(12, 3, 25))
	f.word(smlal2H(12, 3, 25))
	f.word(addv4s(12, 12))
	f.ins("FMOVS F12, %s", dst)
}

// twoBits sets Vdst to bits 2j..2j+1 of every byte of Vsrc (V14 holds 3
// in every byte).
func twoBits(f *file, dst, src, j int) {
	if j == 0 {
		f.word(andB(dst, src, 14))
		return
	}
	f.word(ushrB(dst, src, 2*j))
	f.word(andB(dst, dst, 14))
}

// dotQ2KArm writes the Q2_K kernel: sub-blocks of 16 with 4-bit scales and
// mins, 2-bit values.
func dotQ2KArm(f *file, v variant, rows bool) {
	kFn(f, kName("Q2K", v, rows), fmt.Sprintf("returns the dot product of nb Q2_K blocks at w with QuantizeQ8K activations (x, xd, xs), %s per 16-value sub-block.", v.doc), rows)
	f.word(moviB(14, 3))
	f.word(moviB(15, 0x0f))
	kRow(f, rows)
	f.label("block")
	f.ins("CBZ R4, done")
	f.ins("VLD1 (R0), [V1.B16]")
	f.word(andB(2, 1, 15))
	f.word(uxtlB(3, 2))
	f.word(uxtl2B(2, 2))
	f.word(uxtlH(4, 3))
	f.word(uxtl2H(5, 3))
	f.word(uxtlH(6, 2))
	f.word(uxtl2H(7, 2))
	f.word(ushrB(1, 1, 4)) // the mins
	f.word(uxtlB(2, 1))
	f.word(uxtl2B(3, 1))
	f.ins("VLD1.P 32(R3), %s", vlist(24, 2, "H8"))
	scXs(f, "R11")
	f.ins("ADD $16, R0, R10")
	f.zero(13)
	for h := range 2 {
		f.ins("VLD1.P 32(R10), %s", vlist(16, 2, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(24, 4, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(28, 4, "B16"))
		for j := range 4 {
			for u := range 2 {
				twoBits(f, 22, 16+u, j)
				s := 8*h + 2*j + u
				f.zero(12)
				v.dot(f, 12, 22, 24+2*j+u, 0)
				f.word(mlaElem(13, 12, 4+s/4, s%4))
			}
		}
	}
	f.word(addv4s(13, 13))
	f.ins("FMOVS F13, R12")
	kEpilogue(f, 80, true)
	f.ins("ADD $84, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	kEnd(f, rows)
}

// dotQ3KArm writes the Q3_K kernel: values taken unsigned (two low bits
// plus 4 where the high bit is set), the offset of 4 taken off as
// 4·Σ_j sc_j·xs_j.
func dotQ3KArm(f *file, v variant, rows bool) {
	kFn(f, kName("Q3K", v, rows), fmt.Sprintf("returns the dot product of nb Q3_K blocks at w with QuantizeQ8K activations (x, xd, xs), %s per 16-value sub-block.", v.doc), rows)
	f.word(moviB(14, 3))
	f.word(moviB(15, 4))
	kRow(f, rows)
	f.label("block")
	f.ins("CBZ R4, done")
	// llama.cpp's unpacking of the twelve scale bytes into sixteen 6-bit
	// scales (plus 32).
	f.ins("MOVWU 96(R0), R5")
	f.ins("MOVWU 100(R0), R6")
	f.ins("MOVWU 104(R0), R7")
	f.ins("LSRW $4, R5, R8")
	f.ins("ANDW $0x0f0f0f0f, R8")
	f.ins("LSRW $4, R7, R12")
	f.ins("ANDW $0x03030303, R12")
	f.ins("ORRW R12<<4, R8, R8")
	f.ins("LSRW $4, R6, R9")
	f.ins("ANDW $0x0f0f0f0f, R9")
	f.ins("LSRW $6, R7, R12")
	f.ins("ANDW $0x03030303, R12")
	f.ins("ORRW R12<<4, R9, R9")
	f.ins("ANDW $0x0f0f0f0f, R5")
	f.ins("ANDW $0x03030303, R7, R12")
	f.ins("ORRW R12<<4, R5, R5")
	f.ins("ANDW $0x0f0f0f0f, R6")
	f.ins("LSRW $2, R7, R12")
	f.ins("ANDW $0x03030303, R12")
	f.ins("ORRW R12<<4, R6, R6")
	f.ins("VMOV R5, V1.S[0]")
	f.ins("VMOV R6, V1.S[1]")
	f.ins("VMOV R8, V1.S[2]")
	f.ins("VMOV R9, V1.S[3]")
	f.word(moviB(2, 32))
	f.word(subB(1, 1, 2))
	widenScales(f)
	f.ins("VLD1.P 32(R3), %s", vlist(24, 2, "H8"))
	scXs(f, "R11")
	f.ins("VLD1 (R0), %s", vlist(20, 2, "B16")) // hmask
	f.ins("ADD $32, R0, R10")
	f.zero(13)
	for h := range 2 {
		f.ins("VLD1.P 32(R10), %s", vlist(16, 2, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(24, 4, "B16"))
		f.ins("VLD1.P 64(R1), %s", vlist(28, 4, "B16"))
		for j := range 4 {
			for u := range 2 {
				twoBits(f, 22, 16+u, j)
				bitTo(f, 22, 20+u, 4*h+j, 2, 23) // bit 4h+j of hmask to bit 2
				s := 8*h + 2*j + u
				f.zero(12)
				v.dot(f, 12, 22, 24+2*j+u, 0)
				f.word(mlaElem(13, 12, 4+s/4, s%4))
			}
		}
	}
	f.word(addv4s(13, 13))
	f.ins("FMOVS F13, R12")
	f.ins("SUBW R11<<2, R12, R12")
	kEpilogue(f, 108, false)
	f.ins("ADD $110, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	kEnd(f, rows)
}

// q32Table emits the constants of the Q5_0/Q5_1 kernels: TBL indexes giving
// byte l/8 of a 32-bit word to lane l of the low (bits 0..15) and high
// (bits 16..31) halves, and the bit 1<<(l%8) of each lane.
func q32Table(f *file) {
	for i, v := range []uint64{0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303, 0x8040201008040201, 0x8040201008040201} {
		fmt.Fprintf(&f.asm, "DATA q5tbl<>+%d(SB)/8, $0x%016x\n", 8*i, v)
	}
	fmt.Fprintf(&f.asm, "GLOBL q5tbl<>(SB), (NOPTR+RODATA), $48\n")
}

// dotQ32Arm writes the kernel of one 32-value block type with an offset:
// nibbles at qs, fifth bits at qh (-1: none), an f16 m after d when
// withMin (value d*q + m; without, d*(q-16)). Registers: V12 Σq·x, V13 Σx
// (the variant's dot against ones in V15), V14 the nibble mask, V16-V21
// the weights, V24-V25 the activations, V26-V29 the fifth bits' constants.
func dotQ32Arm(f *file, v variant, name, what string, bytes, qs, qh int, withMin bool) {
	f.fn(name+v.name, fmt.Sprintf("returns the dot product of nb %s blocks at w with QuantizeQ8 activations in natural order (x, xd), %s.", what, v.doc),
		[]arg{{"w", "*byte"}, {"x", "*int8"}, {"xd", "*float32"}, {"nb", "int"}}, true, 0, 1, 2, 4)
	f.zero(0)
	f.word(moviB(14, 0x0f))
	f.word(moviB(15, 1))
	if qh >= 0 {
		f.ins("MOVD $q5tbl<>(SB), R9")
		f.ins("VLD1 (R9), %s", vlist(26, 3, "B16"))
		f.word(moviB(29, 0x10))
	}
	f.label("block")
	f.ins("CBZ R4, done")
	f.ins("ADD $%d, R0, R10", qs)
	f.ins("VLD1 (R10), [V16.B16]")
	f.word(andB(18, 16, 14))
	f.word(ushrB(19, 16, 4))
	if qh >= 0 {
		f.ins("MOVWU %d(R0), R5", qh)
		f.ins("VDUP R5, V20.S4")
		for i := range 2 {
			f.ins("VTBL V%d.B16, [V20.B16], V21.B16", 26+i)
			f.word(cmtstB(21, 21, 28))
			f.word(andB(21, 21, 29))
			f.word(orrB(18+i, 18+i, 21))
		}
	}
	f.ins("VLD1.P 32(R1), %s", vlist(24, 2, "B16"))
	f.zero(12, 13)
	v.dot(f, 12, 18, 24, 0)
	v.dot(f, 12, 19, 25, 1)
	v.dot(f, 13, 15, 24, 0)
	v.dot(f, 13, 15, 25, 1)
	f.word(addv4s(12, 12))
	f.word(addv4s(13, 13))
	f.ins("FMOVS F12, R12")
	f.ins("FMOVS F13, R11")
	if withMin {
		f.ins("NEGW R11, R11") // the Go form's "- dmin*dx*(-Σx)"
	} else {
		f.ins("SUBW R11<<4, R12, R12")
	}
	kEpilogue(f, 0, withMin)
	f.ins("ADD $%d, R0", bytes)
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	f.ret(4, 0)
}

// dotQ8_0Arm writes the Q8_0 kernel: per block the 32 signed weights (after
// the f16 d) and 32 activations meet in v.dot (signed by signed: a product
// fits int16 in the neon variant), and the block's float operations are
// kEpilogue's.
func dotQ8_0Arm(f *file, v variant) {
	f.fn("dotQ8_0"+v.name, fmt.Sprintf("returns the dot product of nb Q8_0 blocks at w with QuantizeQ8 activations in natural order (x, xd), %s.", v.doc),
		[]arg{{"w", "*byte"}, {"x", "*int8"}, {"xd", "*float32"}, {"nb", "int"}}, true, 0, 1, 2, 4)
	f.zero(0)
	f.label("block")
	f.ins("CBZ R4, done")
	f.ins("ADD $2, R0, R10")
	f.ins("VLD1 (R10), %s", vlist(18, 2, "B16"))
	f.ins("VLD1.P 32(R1), %s", vlist(24, 2, "B16"))
	f.zero(12)
	v.dot(f, 12, 18, 24, 0)
	v.dot(f, 12, 19, 25, 1)
	f.word(addv4s(12, 12))
	f.ins("FMOVS F12, R12")
	kEpilogue(f, 0, false)
	f.ins("ADD $34, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	f.ret(4, 0)
}

// mxfp4Table emits the doubled E2M1 values of the 16 MXFP4 codes (the TBL
// table: llama.cpp's kvalues_mxfp4).
func mxfp4Table(f *file) {
	for i, v := range []uint64{0x0c08060403020100, 0xf4f8fafcfdfeff00} {
		fmt.Fprintf(&f.asm, "DATA mxfp4tbl<>+%d(SB)/8, $0x%016x\n", 8*i, v)
	}
	fmt.Fprintf(&f.asm, "GLOBL mxfp4tbl<>(SB), (NOPTR+RODATA), $16\n")
}

// dotMXFP4Arm writes the MXFP4 kernel: per block the 32 codes (low nibbles
// elements 0..15 in V18, high nibbles 16..31 in V19) become their doubled
// E2M1 values by TBL against V20, meet the activations in v.dot (|w| <=
// 12), and the block adds float32(float32(dx*h)*Σ) with h, half the E8M0
// scale, built from e's bits (exponent field e-1; 0x00200000<<e for e <
// 2, CSEL): the Go form's operations, so its bits.
func dotMXFP4Arm(f *file, v variant) {
	f.fn("dotMXFP4"+v.name, fmt.Sprintf("returns the dot product of nb MXFP4 blocks at w with QuantizeQ8 activations in natural order (x, xd), %s.", v.doc),
		[]arg{{"w", "*byte"}, {"x", "*int8"}, {"xd", "*float32"}, {"nb", "int"}}, true, 0, 1, 2, 4)
	f.zero(0)
	f.word(moviB(14, 0x0f))
	f.ins("MOVD $mxfp4tbl<>(SB), R9")
	f.ins("VLD1 (R9), [V20.B16]")
	f.label("block")
	f.ins("CBZ R4, done")
	f.ins("ADD $1, R0, R10")
	f.ins("VLD1 (R10), [V16.B16]")
	f.word(andB(18, 16, 14))
	f.word(ushrB(19, 16, 4))
	f.ins("VTBL V18.B16, [V20.B16], V18.B16")
	f.ins("VTBL V19.B16, [V20.B16], V19.B16")
	f.ins("VLD1.P 32(R1), %s", vlist(24, 2, "B16"))
	f.zero(12)
	v.dot(f, 12, 18, 24, 0)
	v.dot(f, 12, 19, 25, 1)
	f.word(addv4s(12, 12))
	f.ins("FMOVS F12, R12")
	f.ins("MOVBU (R0), R13")
	f.ins("SUBW $1, R13, R5")
	f.ins("LSLW $23, R5, R5")
	f.ins("MOVW $0x00200000, R6")
	f.ins("LSLW R13, R6, R6")
	f.ins("CMPW $2, R13")
	f.ins("CSELW LO, R6, R5, R5")
	f.ins("FMOVS R5, F1")
	f.ins("FMOVS.P 4(R2), F3")
	f.ins("FMULS F3, F1, F1")
	f.ins("SCVTFWS R12, F4")
	f.ins("FMULS F4, F1, F4")
	f.ins("FADDS F4, F0, F0")
	f.ins("ADD $17, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	f.ret(4, 0)
}

// The four-token kernels (DotKx4): each block's scales and values are
// unpacked once and meet the four token rows in turn. Registers as above,
// plus: token t's activations at R1, R19, R20, R21 (advanced as read),
// xstride in R23 (then the scale and sum strides in R24 and R25), out in
// R22 (holding the four running totals), token t's int32 block sums in
// V28+t and its Σm or offset term in R6+t.

// kx4Fn starts a four-token kernel.
func kx4Fn(f *file, name, one string) {
	f.fn(name, "sets out[t] to "+one+" of the row against token t's activations (x + t*xstride, xd + t*xstride/256, xs + t*xstride/16) for t < 4, with its bits.",
		append(kArgs[:len(kArgs):len(kArgs)], arg{"xstride", "int"}, arg{"out", "*float32"}), false, 0, 1, 2, 3, 4, 23, 22)
	f.ins("ADD R1, R23, R19")
	f.ins("ADD R19, R23, R20")
	f.ins("ADD R20, R23, R21")
	f.ins("LSR $6, R23, R24")
	f.ins("LSR $3, R23, R25")
	f.zero(0)
	f.ins("VST1 [V0.S4], (R22)")
}

// kx4X is the register holding token t's activation pointer.
func kx4X(t int) string { return []string{"R1", "R19", "R20", "R21"}[t] }

// kx4Addr sets dst to base + t*stride.
func kx4Addr(f *file, dst, base, stride string, t int) {
	switch t {
	case 0:
		f.ins("MOVD %s, %s", base, dst)
	case 1:
		f.ins("ADD %s, %s, %s", stride, base, dst)
	case 2:
		f.ins("ADD %s<<1, %s, %s", stride, base, dst)
	case 3:
		f.ins("ADD %s<<1, %s, %s", stride, base, dst)
		f.ins("ADD %s, %s, %s", stride, dst, dst)
	}
}

// kx4Epilogues adds each token's block terms to its total in out: the
// int32 sums in V28+t, the min or offset term in R6+t (withMin: Σm; else
// the offset off·Σ, subtracted from the sums when shift > 0 as Σ<<shift),
// d (and dmin) the f16 at dm(R0), dx token t's at R2 + t*R24.
func kx4Epilogues(f *file, dm int, withMin bool, shift int) {
	for t := range 4 {
		f.word(addv4s(12, 28+t))
		f.ins("FMOVS F12, R12")
		if shift > 0 {
			f.ins("SUBW R%d<<%d, R12, R12", 6+t, shift)
		}
		kx4Addr(f, "R15", "R2", "R24", t)
		f.ins("MOVHU %d(R0), R13", dm)
		f.ins("FMOVS R13, F1")
		f.ins("FCVTHS F1, F1")
		f.ins("FMOVS (R15), F3")
		f.ins("FMULS F3, F1, F1")
		f.ins("SCVTFWS R12, F4")
		f.ins("FMULS F4, F1, F4")
		if withMin {
			f.ins("MOVHU %d(R0), R13", dm+2)
			f.ins("FMOVS R13, F2")
			f.ins("FCVTHS F2, F2")
			f.ins("FMULS F3, F2, F2")
			f.ins("SCVTFWS R%d, F5", 6+t)
			f.ins("FMULS F5, F2, F5")
			f.ins("FSUBS F5, F4, F4")
		}
		f.ins("FMOVS %d(R22), F0", 4*t)
		f.ins("FADDS F4, F0, F0")
		f.ins("FMOVS F0, %d(R22)", 4*t)
	}
	f.ins("ADD $4, R2")
	f.ins("ADD $32, R3")
}

// dotQ4Kx4Arm writes the four-token Q4_K (q5: Q5_K) kernel.
func dotQ4Kx4Arm(f *file, v variant, q5 bool) {
	name, bytes, qs := "Q4K", 144, 16
	if q5 {
		name, bytes, qs = "Q5K", 176, 48
	}
	kx4Fn(f, "dot"+name+"x4"+v.name, kName(name, v, false))
	f.word(moviB(14, 0x0f))
	f.word(moviB(15, 0x10))
	f.label("block")
	f.ins("CBZ R4, done")
	k45Scales(f)
	// Each token's Σm into R6+t.
	for t := range 4 {
		kx4Addr(f, "R14", "R3", "R25", t)
		f.ins("VLD1 (R14), %s", vlist(24, 2, "H8"))
		f.word(addp8h(26, 24, 25))
		f.word(smullH(12, 3, 26))
		f.word(smlal2H(12, 3, 26))
		f.word(addv4s(12, 12))
		f.ins("FMOVS F12, R%d", 6+t)
	}
	if q5 {
		f.ins("ADD $16, R0, R10")
		f.ins("VLD1 (R10), %s", vlist(22, 2, "B16"))
	}
	f.ins("ADD $%d, R0, R10", qs)
	f.zero(28, 29, 30, 31)
	for g := range 4 {
		f.ins("VLD1.P 32(R10), %s", vlist(16, 2, "B16"))
		f.word(andB(18, 16, 14))
		f.word(andB(19, 17, 14))
		f.word(ushrB(20, 16, 4))
		f.word(ushrB(21, 17, 4))
		if q5 {
			q5High(f, g)
		}
		for t := range 4 {
			f.ins("VLD1.P 64(%s), %s", kx4X(t), vlist(24, 4, "B16"))
			for i := range 2 {
				s := 2*g + i
				f.zero(12)
				v.dot(f, 12, 18+2*i, 24+2*i, 0)
				v.dot(f, 12, 19+2*i, 25+2*i, 1)
				f.word(mlaElem(28+t, 12, 4+s/4, s%4))
			}
		}
	}
	kx4Epilogues(f, 0, true, 0)
	f.ins("ADD $%d, R0", bytes)
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	f.ins("RET")
}

// dotQ6Kx4Arm writes the four-token Q6_K kernel.
func dotQ6Kx4Arm(f *file, v variant) {
	kx4Fn(f, "dotQ6Kx4"+v.name, kName("Q6K", v, false))
	f.word(moviB(14, 0x0f))
	f.word(moviB(15, 0x30))
	f.label("block")
	f.ins("CBZ R4, done")
	q6Scales(f)
	// Each token's Σ sc_j·xs_j into R6+t.
	for t := range 4 {
		kx4Addr(f, "R14", "R3", "R25", t)
		f.ins("VLD1 (R14), %s", vlist(24, 2, "H8"))
		scXs(f, fmt.Sprintf("R%d", 6+t))
	}
	f.ins("MOVD R0, R10")
	f.ins("ADD $128, R0, R11") // R6-R9 hold the offset terms
	f.zero(28, 29, 30, 31)
	for h := range 2 {
		f.ins("VLD1.P 64(R10), %s", vlist(16, 4, "B16"))
		f.ins("VLD1.P 32(R11), %s", vlist(20, 2, "B16"))
		for k := range 4 {
			// The quarter's two sub-blocks in V22 and V23, then each
			// token's 32 activations.
			for p := range 2 {
				q6Quarter(f, k, p, 22+p, 12)
			}
			for t := range 4 {
				f.ins("VLD1.P 32(%s), %s", kx4X(t), vlist(24, 2, "B16"))
				for p := range 2 {
					s := 8*h + 2*k + p
					f.zero(12)
					v.dot(f, 12, 22+p, 24+p, 0)
					f.word(mlaElem(28+t, 12, 4+s/4, s%4))
				}
			}
		}
	}
	kx4Epilogues(f, 208, false, 5)
	f.ins("ADD $210, R0")
	f.ins("SUB $1, R4")
	f.ins("B block")
	f.label("done")
	f.ins("RET")
}
