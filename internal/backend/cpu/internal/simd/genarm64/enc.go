package main

import "fmt"

// word is one A64 instruction: its 32-bit encoding and its Arm syntax.
type word struct {
	bits uint32
	text string
}

// The encodings follow the Arm Architecture Reference Manual (A64 Advanced
// SIMD): three registers Rd (bits 0-4), Rn (5-9), Rm (16-20) in a fixed
// opcode for one element arrangement.

func rrr(base uint32, d, n, m int, format string) word {
	return word{base | uint32(m&31)<<16 | uint32(n&31)<<5 | uint32(d&31), fmt.Sprintf(format, d, n, m)}
}

func rr(base uint32, d, n int, format string) word {
	return word{base | uint32(n&31)<<5 | uint32(d&31), fmt.Sprintf(format, d, n)}
}

// SDOT Vd.4S, Vn.16B, Vm.16B (ARMv8.2 DotProd).
func sdotW(d, n, m int) word {
	return rrr(0x4e809400, d, n, m, "sdot v%d.4s, v%d.16b, v%d.16b")
}

// SMULL Vd.8H, Vn.8B, Vm.8B and SMULL2 Vd.8H, Vn.16B, Vm.16B.
func smull(d, n, m int) word { return rrr(0x0e20c000, d, n, m, "smull v%d.8h, v%d.8b, v%d.8b") }
func smull2(d, n, m int) word {
	return rrr(0x4e20c000, d, n, m, "smull2 v%d.8h, v%d.16b, v%d.16b")
}

// SADALP Vd.4S, Vn.8H: add pairs of int16 lanes into the int32 lanes.
func sadalp(d, n int) word { return rr(0x4e606800, d, n, "sadalp v%d.4s, v%d.8h") }

// ADDP Vd.4S, Vn.4S, Vm.4S.
func addp4s(d, n, m int) word { return rrr(0x4ea0bc00, d, n, m, "addp v%d.4s, v%d.4s, v%d.4s") }

// SSHR Vd.16B, Vn.16B, #4 and SHL Vd.16B, Vn.16B, #4 (immh:immb = 16-4
// and 8+4 for byte lanes).
func sshr4(d, n int) word { return rr(0x4f0c0400, d, n, "sshr v%d.16b, v%d.16b, #4") }
func shl4(d, n int) word  { return rr(0x4f0c5400, d, n, "shl v%d.16b, v%d.16b, #4") }

// SCVTF Vd.4S, Vn.4S.
func scvtf4s(d, n int) word { return rr(0x4e21d800, d, n, "scvtf v%d.4s, v%d.4s") }

// FCVTL Vd.4S, Vn.4H and FCVTL2 Vd.4S, Vn.8H.
func fcvtl(d, n int) word  { return rr(0x0e217800, d, n, "fcvtl v%d.4s, v%d.4h") }
func fcvtl2(d, n int) word { return rr(0x4e217800, d, n, "fcvtl2 v%d.4s, v%d.8h") }

// ZIP1 and ZIP2 Vd.8H, Vn.8H, Vm.8H.
func zip1h(d, n, m int) word { return rrr(0x4e403800, d, n, m, "zip1 v%d.8h, v%d.8h, v%d.8h") }
func zip2h(d, n, m int) word { return rrr(0x4e407800, d, n, m, "zip2 v%d.8h, v%d.8h, v%d.8h") }

// FADD, FADDP, FMUL and FMLA on Vd.4S, Vn.4S, Vm.4S.
func fadd(d, n, m int) word  { return rrr(0x4e20d400, d, n, m, "fadd v%d.4s, v%d.4s, v%d.4s") }
func faddp(d, n, m int) word { return rrr(0x6e20d400, d, n, m, "faddp v%d.4s, v%d.4s, v%d.4s") }
func fmul(d, n, m int) word  { return rrr(0x6e20dc00, d, n, m, "fmul v%d.4s, v%d.4s, v%d.4s") }
func fmla(d, n, m int) word  { return rrr(0x4e20cc00, d, n, m, "fmla v%d.4s, v%d.4s, v%d.4s") }

// FMLA Vd.4S, Vn.4S, Vm.S[0] (by element; Rm takes all five bits, M
// being its top bit, for single-precision lanes).
func fmlaElem(d, n, m int) word {
	return rrr(0x4f801000, d, n, m, "fmla v%d.4s, v%d.4s, v%d.s[0]")
}

// FADDP Sd, Vn.2S (scalar pairwise: lane 0 + lane 1).
func faddpScalar(d, n int) word { return rr(0x7e30d800, d, n, "faddp s%d, v%d.2s") }

// MOVI Vd.2D, #0.
func moviZero(d int) word {
	return word{0x6f00e400 | uint32(d&31), fmt.Sprintf("movi v%d.2d, #0", d)}
}

// The exponential's instructions, all on .4S lanes (.16B for the bitwise
// selects).
func fsub(d, n, m int) word  { return rrr(0x4ea0d400, d, n, m, "fsub v%d.4s, v%d.4s, v%d.4s") }
func fmax(d, n, m int) word  { return rrr(0x4e20f400, d, n, m, "fmax v%d.4s, v%d.4s, v%d.4s") }
func fmin(d, n, m int) word  { return rrr(0x4ea0f400, d, n, m, "fmin v%d.4s, v%d.4s, v%d.4s") }
func fdiv(d, n, m int) word  { return rrr(0x6e20fc00, d, n, m, "fdiv v%d.4s, v%d.4s, v%d.4s") }
func add4s(d, n, m int) word { return rrr(0x4ea08400, d, n, m, "add v%d.4s, v%d.4s, v%d.4s") }
func fcmgt(d, n, m int) word { return rrr(0x6ea0e400, d, n, m, "fcmgt v%d.4s, v%d.4s, v%d.4s") }
func fcmeq(d, n, m int) word { return rrr(0x4e20e400, d, n, m, "fcmeq v%d.4s, v%d.4s, v%d.4s") }
func bic(d, n, m int) word   { return rrr(0x4e601c00, d, n, m, "bic v%d.16b, v%d.16b, v%d.16b") }
func bit(d, n, m int) word   { return rrr(0x6ea01c00, d, n, m, "bit v%d.16b, v%d.16b, v%d.16b") }
func bif(d, n, m int) word   { return rrr(0x6ee01c00, d, n, m, "bif v%d.16b, v%d.16b, v%d.16b") }
func frintn(d, n int) word   { return rr(0x4e218800, d, n, "frintn v%d.4s, v%d.4s") }
func fcvtzs(d, n int) word   { return rr(0x4ea1b800, d, n, "fcvtzs v%d.4s, v%d.4s") }
func fneg(d, n int) word     { return rr(0x6ea0f800, d, n, "fneg v%d.4s, v%d.4s") }

// SHL Vd.4S, Vn.4S, #23 (immh:immb = 32+23).
func shl23(d, n int) word { return rr(0x4f375400, d, n, "shl v%d.4s, v%d.4s, #23") }

// SSHLL Vd.8H, Vn.8B, #0 (SXTL) and SSHLL2 Vd.8H, Vn.16B, #0; the same
// from .4H/.8H to .4S.
func sxtlB(d, n int) word  { return rr(0x0f08a400, d, n, "sshll v%d.8h, v%d.8b, #0") }
func sxtl2B(d, n int) word { return rr(0x4f08a400, d, n, "sshll2 v%d.8h, v%d.16b, #0") }
func sxtlH(d, n int) word  { return rr(0x0f10a400, d, n, "sshll v%d.4s, v%d.4h, #0") }
func sxtl2H(d, n int) word { return rr(0x4f10a400, d, n, "sshll2 v%d.4s, v%d.8h, #0") }

// ZIP1 and ZIP2 Vd.16B, Vn.16B, Vm.16B.
func zip1b(d, n, m int) word { return rrr(0x4e003800, d, n, m, "zip1 v%d.16b, v%d.16b, v%d.16b") }
func zip2b(d, n, m int) word { return rrr(0x4e007800, d, n, m, "zip2 v%d.16b, v%d.16b, v%d.16b") }

// The K-quant kernels' instructions.

// MLA Vd.4S, Vn.4S, Vm.S[i] (Vm in V0-V15).
func mlaElem(d, n, m, i int) word {
	if m > 15 || i > 3 {
		panic("mla by element: Vm must be V0-V15, i 0..3")
	}
	return word{0x6f800000 | uint32(i&1)<<21 | uint32(m)<<16 | uint32(i>>1)<<11 | uint32(n&31)<<5 | uint32(d&31),
		fmt.Sprintf("mla v%d.4s, v%d.4s, v%d.s[%d]", d, n, m, i)}
}

// SMULL Vd.4S, Vn.4H, Vm.4H; SMLAL Vd.4S, Vn.4H, Vm.4H; SMLAL2 Vd.4S, Vn.8H, Vm.8H.
func smullH(d, n, m int) word  { return rrr(0x0e60c000, d, n, m, "smull v%d.4s, v%d.4h, v%d.4h") }
func smlalH(d, n, m int) word  { return rrr(0x0e608000, d, n, m, "smlal v%d.4s, v%d.4h, v%d.4h") }
func smlal2H(d, n, m int) word { return rrr(0x4e608000, d, n, m, "smlal2 v%d.4s, v%d.8h, v%d.8h") }

// USHLL (UXTL) Vd.8H, Vn.8B / USHLL2 Vd.8H, Vn.16B / Vd.4S, Vn.4H / USHLL2 Vd.4S, Vn.8H, #0.
func uxtlB(d, n int) word  { return rr(0x2f08a400, d, n, "ushll v%d.8h, v%d.8b, #0") }
func uxtl2B(d, n int) word { return rr(0x6f08a400, d, n, "ushll2 v%d.8h, v%d.16b, #0") }
func uxtlH(d, n int) word  { return rr(0x2f10a400, d, n, "ushll v%d.4s, v%d.4h, #0") }
func uxtl2H(d, n int) word { return rr(0x6f10a400, d, n, "ushll2 v%d.4s, v%d.8h, #0") }

// ADDP Vd.8H, Vn.8H, Vm.8H.
func addp8h(d, n, m int) word { return rrr(0x4e60bc00, d, n, m, "addp v%d.8h, v%d.8h, v%d.8h") }

// USHR Vd.16B, Vn.16B, #s and SHL Vd.16B, Vn.16B, #s (s 1..7).
func ushrB(d, n, s int) word {
	return word{0x6f000400 | uint32(16-s)<<16 | uint32(n&31)<<5 | uint32(d&31), fmt.Sprintf("ushr v%d.16b, v%d.16b, #%d", d, n, s)}
}
func shlB(d, n, s int) word {
	return word{0x4f005400 | uint32(8+s)<<16 | uint32(n&31)<<5 | uint32(d&31), fmt.Sprintf("shl v%d.16b, v%d.16b, #%d", d, n, s)}
}

// AND and ORR Vd.16B, Vn.16B, Vm.16B.
func andB(d, n, m int) word { return rrr(0x4e201c00, d, n, m, "and v%d.16b, v%d.16b, v%d.16b") }
func orrB(d, n, m int) word { return rrr(0x4ea01c00, d, n, m, "orr v%d.16b, v%d.16b, v%d.16b") }

// MOVI Vd.16B, #imm.
func moviB(d int, imm uint8) word {
	return word{0x4f00e400 | uint32(imm>>5)<<16 | uint32(imm&31)<<5 | uint32(d&31), fmt.Sprintf("movi v%d.16b, #%d", d, imm)}
}

// ADDV Sd, Vn.4S.
func addv4s(d, n int) word { return rr(0x4eb1b800, d, n, "addv s%d, v%d.4s") }

// SUB Vd.16B, Vn.16B, Vm.16B.
func subB(d, n, m int) word { return rrr(0x6e208400, d, n, m, "sub v%d.16b, v%d.16b, v%d.16b") }

// CMTST Vd.16B, Vn.16B, Vm.16B: all ones where Vn AND Vm is not zero.
func cmtstB(d, n, m int) word { return rrr(0x4e208c00, d, n, m, "cmtst v%d.16b, v%d.16b, v%d.16b") }

// SDOT Vd.4S, Vn.16B, Vm.4B[i] (by element; Rm takes all five bits, M
// being its top bit; i = H:L).
func sdotElem(d, n, m, i int) word {
	if i > 3 {
		panic("sdot by element: i 0..3")
	}
	return word{0x4f80e000 | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1)<<11 | uint32(n&31)<<5 | uint32(d&31),
		fmt.Sprintf("sdot v%d.4s, v%d.16b, v%d.4b[%d]", d, n, m, i)}
}
