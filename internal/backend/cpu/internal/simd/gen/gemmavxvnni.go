package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmAVXVNNIKernels writes the prefill GEMM kernels for AVX-VNNI (VEX
// VPDPBUSD on CPUs without AVX-512, such as Intel's Alder Lake and later
// desktop chips): gemmKernels with the activations broadcast by
// VPBROADCASTD (VEX has no embedded broadcast) and VPDPBUSD on registers
// only. The Go assembler knows only VPDPBUSD's EVEX encodings, so avo
// writes those and vexVPDPBUSD (after Generate) replaces each in the
// *AVXVNNI functions by its VEX encoding as BYTEs (the same operation on
// Y0-Y15; Intel SDM: VEX.256.66.0F38.W0 50 /r).
func gemmAVXVNNIKernels() {
	for t := 1; t <= 4; t++ {
		gemmVEX("Q8", t, 16+256, 7, func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int)) {
			for j := range 8 {
				wv := YMM()
				VMOVDQU(Mem{Base: w, Disp: 16 + 32*j}, wv)
				step(wv, 4*j)
			}
		})
		gemmVEX("Q4", t, 16+128, 3, func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int)) {
			for j := range 4 {
				raw, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(Mem{Base: w, Disp: 16 + 32*j}, raw)
				VPAND(mask, raw, lo)
				VPSRLW(Imm(4), raw, hi)
				VPAND(mask, hi, hi)
				step(lo, 4*j)
				step(hi, 16+4*j)
			}
		})
	}
}

// gemmVEX writes gemm<kind>T<tokens>AVXVNNI, gemm's kernel with the
// activations broadcast into a register for each VPDPBUSD.
func gemmVEX(kind string, tokens, blockBytes, shift int, blocks func(w Register, mask VecVirtual, step func(wv VecVirtual, xoff int))) {
	name := fmt.Sprintf("gemm%sT%dAVXVNNI", kind, tokens)
	a := gemmAVX2Head(name, kind, "AVX-VNNI", tokens)
	var mask VecVirtual
	if kind == "Q4" {
		mask = YMM()
		broadcastB(0x0f, mask)
	}
	acci := make([]VecVirtual, tokens)
	for t := range tokens {
		acci[t] = YMM()
	}
	Label(name + "block")
	TESTQ(a.nb, a.nb)
	JZ(LabelRef(name + "done"))
	gemmPrefetch(a.w, blockBytes, tokens)
	for t := range tokens {
		VPBROADCASTD(tokMem(a.xs, a.ds, a.ds3, t, 0), acci[t])
		VPSLLD(Imm(uint64(shift)), acci[t], acci[t])
	}
	blocks(a.w, mask, func(wv VecVirtual, xoff int) {
		for t := range tokens {
			xb := YMM()
			VPBROADCASTD(tokMem(a.x, a.s, a.s3, t, xoff), xb)
			VPDPBUSD(xb, wv, acci[t])
		}
	})
	gemmAVX2Tail(name, a, acci, blockBytes)
}

var vpdpbusdReg = regexp.MustCompile(`^\tVPDPBUSD\s+Y(\d+), Y(\d+), Y(\d+)$`)

// vexVPDPBUSD rewrites, in the functions of the generated assembly whose
// names end in AVXVNNI, every register-form VPDPBUSD into the BYTEs of
// its VEX encoding.
func vexVPDPBUSD() error {
	f := flag.Lookup("out")
	if f == nil || f.Value.String() == "" {
		return fmt.Errorf("no -out file")
	}
	path := f.Value.String()
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(src), "\n")
	in := false
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "TEXT ") {
			in = strings.Contains(l, "AVXVNNI(SB)")
			continue
		}
		if !in || !strings.HasPrefix(l, "\tVPDPBUSD") {
			continue
		}
		m := vpdpbusdReg.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf("line %d: %q is not VPDPBUSD on Y registers", i+1, l)
		}
		rm, v, dst := atoi(m[1]), atoi(m[2]), atoi(m[3])
		enc, err := vexVPDPBUSDBytes(dst, v, rm)
		if err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
		var b strings.Builder
		b.WriteString("\t")
		for j, x := range enc {
			if j > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "BYTE $0x%02x", x)
		}
		fmt.Fprintf(&b, " // VPDPBUSD Y%d, Y%d, Y%d (VEX)", rm, v, dst)
		lines[i] = b.String()
		n++
	}
	if n == 0 {
		return fmt.Errorf("no VPDPBUSD to rewrite")
	}
	out := []byte(strings.Join(lines, "\n"))
	if bytes.Equal(out, src) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

func atoi(s string) int {
	v, _ := strconv.Atoi(s)
	return v
}

// vexVPDPBUSDBytes is the VEX encoding of VPDPBUSD ymm(dst), ymm(v),
// ymm(rm) (Intel operand order): C4, R̄X̄B̄ and map 0F38, W0 v̄v̄v̄v̄ L1 pp 66,
// opcode 50, ModRM with register operands.
func vexVPDPBUSDBytes(dst, v, rm int) ([]byte, error) {
	if dst > 15 || v > 15 || rm > 15 {
		return nil, fmt.Errorf("VEX reaches Y0-Y15 only, not Y%d, Y%d, Y%d", dst, v, rm)
	}
	b1 := byte(0x02) // map 0F38
	if dst < 8 {
		b1 |= 0x80
	}
	b1 |= 0x40 // no index register
	if rm < 8 {
		b1 |= 0x20
	}
	b2 := byte((^v&15)<<3 | 1<<2 | 1) // W0, vvvv inverted, L 256, pp 66
	return []byte{0xc4, b1, b2, 0x50, byte(0xc0 | (dst&7)<<3 | rm&7)}, nil
}
