package main

import "testing"

// TestEncodings checks the encoders against LLVM's assembler: each want is
// what `llvm-mc -triple=aarch64 -mattr=+dotprod -show-encoding` (LLVM 14,
// Debian 12) prints for the instruction, as a little-endian word. The
// registers are chosen so that every register field takes a value with
// its top and bottom bits set somewhere.
func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		got  word
		text string
		want uint32
	}{
		{sdotW(0, 1, 2), "sdot v0.4s, v1.16b, v2.16b", 0x4e829420},
		{sdotW(31, 30, 29), "sdot v31.4s, v30.16b, v29.16b", 0x4e9d97df},
		{sdotElem(0, 1, 2, 0), "sdot v0.4s, v1.16b, v2.4b[0]", 0x4f82e020},
		{sdotElem(3, 4, 17, 3), "sdot v3.4s, v4.16b, v17.4b[3]", 0x4fb1e883},
		{sdotElem(31, 30, 29, 1), "sdot v31.4s, v30.16b, v29.4b[1]", 0x4fbde3df},
		{sdotElem(9, 24, 16, 2), "sdot v9.4s, v24.16b, v16.4b[2]", 0x4f90eb09},
		{smull(3, 4, 5), "smull v3.8h, v4.8b, v5.8b", 0x0e25c083},
		{smull2(3, 4, 5), "smull2 v3.8h, v4.16b, v5.16b", 0x4e25c083},
		{sadalp(6, 7), "sadalp v6.4s, v7.8h", 0x4e6068e6},
		{sshr4(1, 2), "sshr v1.16b, v2.16b, #4", 0x4f0c0441},
		{shl4(1, 2), "shl v1.16b, v2.16b, #4", 0x4f0c5441},
		{fcvtl(1, 2), "fcvtl v1.4s, v2.4h", 0x0e217841},
		{fcvtl2(1, 2), "fcvtl2 v1.4s, v2.8h", 0x4e217841},
		{scvtf4s(1, 2), "scvtf v1.4s, v2.4s", 0x4e21d841},
		{fadd(1, 2, 3), "fadd v1.4s, v2.4s, v3.4s", 0x4e23d441},
		{faddp(1, 2, 3), "faddp v1.4s, v2.4s, v3.4s", 0x6e23d441},
		{fmul(1, 2, 3), "fmul v1.4s, v2.4s, v3.4s", 0x6e23dc41},
		{fmla(1, 2, 3), "fmla v1.4s, v2.4s, v3.4s", 0x4e23cc41},
		{fmlaElem(1, 2, 3), "fmla v1.4s, v2.4s, v3.s[0]", 0x4f831041},
		{fmlaElem(1, 2, 17), "fmla v1.4s, v2.4s, v17.s[0]", 0x4f911041},
		{addp4s(1, 2, 3), "addp v1.4s, v2.4s, v3.4s", 0x4ea3bc41},
		{faddpScalar(1, 2), "faddp s1, v2.2s", 0x7e30d841},
		{zip1h(1, 2, 3), "zip1 v1.8h, v2.8h, v3.8h", 0x4e433841},
		{zip2h(1, 2, 3), "zip2 v1.8h, v2.8h, v3.8h", 0x4e437841},
		{moviZero(1), "movi v1.2d, #0", 0x6f00e401},
		{fmax(1, 2, 3), "fmax v1.4s, v2.4s, v3.4s", 0x4e23f441},
		{fmin(1, 2, 3), "fmin v1.4s, v2.4s, v3.4s", 0x4ea3f441},
		{frintn(1, 2), "frintn v1.4s, v2.4s", 0x4e218841},
		{fsub(1, 2, 3), "fsub v1.4s, v2.4s, v3.4s", 0x4ea3d441},
		{fcvtzs(1, 2), "fcvtzs v1.4s, v2.4s", 0x4ea1b841},
		{shl23(1, 2), "shl v1.4s, v2.4s, #23", 0x4f375441},
		{add4s(1, 2, 3), "add v1.4s, v2.4s, v3.4s", 0x4ea38441},
		{fcmgt(1, 2, 3), "fcmgt v1.4s, v2.4s, v3.4s", 0x6ea3e441},
		{fcmeq(1, 2, 3), "fcmeq v1.4s, v2.4s, v3.4s", 0x4e23e441},
		{bic(1, 2, 3), "bic v1.16b, v2.16b, v3.16b", 0x4e631c41},
		{bit(1, 2, 3), "bit v1.16b, v2.16b, v3.16b", 0x6ea31c41},
		{bif(1, 2, 3), "bif v1.16b, v2.16b, v3.16b", 0x6ee31c41},
		{fdiv(1, 2, 3), "fdiv v1.4s, v2.4s, v3.4s", 0x6e23fc41},
		{fneg(1, 2), "fneg v1.4s, v2.4s", 0x6ea0f841},
		{sxtlB(1, 2), "sshll v1.8h, v2.8b, #0", 0x0f08a441},
		{sxtl2B(1, 2), "sshll2 v1.8h, v2.16b, #0", 0x4f08a441},
		{sxtlH(1, 2), "sshll v1.4s, v2.4h, #0", 0x0f10a441},
		{sxtl2H(1, 2), "sshll2 v1.4s, v2.8h, #0", 0x4f10a441},
		{zip1b(1, 2, 3), "zip1 v1.16b, v2.16b, v3.16b", 0x4e033841},
		{zip2b(1, 2, 3), "zip2 v1.16b, v2.16b, v3.16b", 0x4e037841},
		{mlaElem(13, 12, 4, 0), "mla v13.4s, v12.4s, v4.s[0]", 0x6f84018d},
		{mlaElem(13, 12, 5, 3), "mla v13.4s, v12.4s, v5.s[3]", 0x6fa5098d},
		{mlaElem(1, 2, 15, 1), "mla v1.4s, v2.4s, v15.s[1]", 0x6faf0041},
		{mlaElem(1, 2, 15, 2), "mla v1.4s, v2.4s, v15.s[2]", 0x6f8f0841},
		{smullH(12, 2, 24), "smull v12.4s, v2.4h, v24.4h", 0x0e78c04c},
		{smlalH(12, 2, 24), "smlal v12.4s, v2.4h, v24.4h", 0x0e78804c},
		{smlal2H(12, 2, 24), "smlal2 v12.4s, v2.8h, v24.8h", 0x4e78804c},
		{uxtlB(2, 1), "ushll v2.8h, v1.8b, #0", 0x2f08a422},
		{uxtl2B(3, 1), "ushll2 v3.8h, v1.16b, #0", 0x6f08a423},
		{uxtlH(4, 2), "ushll v4.4s, v2.4h, #0", 0x2f10a444},
		{uxtl2H(5, 2), "ushll2 v5.4s, v2.8h, #0", 0x6f10a445},
		{addp8h(12, 24, 25), "addp v12.8h, v24.8h, v25.8h", 0x4e79bf0c},
		{ushrB(18, 16, 4), "ushr v18.16b, v16.16b, #4", 0x6f0c0612},
		{ushrB(18, 16, 2), "ushr v18.16b, v16.16b, #2", 0x6f0e0612},
		{ushrB(18, 16, 6), "ushr v18.16b, v16.16b, #6", 0x6f0a0612},
		{shlB(18, 16, 4), "shl v18.16b, v16.16b, #4", 0x4f0c5612},
		{shlB(18, 16, 2), "shl v18.16b, v16.16b, #2", 0x4f0a5612},
		{andB(18, 16, 14), "and v18.16b, v16.16b, v14.16b", 0x4e2e1e12},
		{orrB(18, 16, 14), "orr v18.16b, v16.16b, v14.16b", 0x4eae1e12},
		{moviB(14, 15), "movi v14.16b, #15", 0x4f00e5ee},
		{moviB(14, 48), "movi v14.16b, #48", 0x4f01e60e},
		{addv4s(1, 13), "addv s1, v13.4s", 0x4eb1b9a1},
		{subB(1, 2, 3), "sub v1.16b, v2.16b, v3.16b", 0x6e238441},
		{cmtstB(21, 21, 28), "cmtst v21.16b, v21.16b, v28.16b", 0x4e3c8eb5},
		{moviB(15, 1), "movi v15.16b, #1", 0x4f00e42f},
		{moviB(15, 3), "movi v15.16b, #3", 0x4f00e46f},
		{moviB(15, 32), "movi v15.16b, #32", 0x4f01e40f},
	} {
		if c.got.bits != c.want || c.got.text != c.text {
			t.Errorf("%s: encoded %#08x (%q), want %#08x", c.text, c.got.bits, c.got.text, c.want)
		}
	}
}
