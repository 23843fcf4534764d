package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The K-quant kernels: one weight row of nb blocks (kept in the GGUF block
// layout) against activations quantized by QuantizeQ8K. Per block the
// values are unpacked to unsigned bytes, multiplied with the activations
// by VPMADDUBSW (16-bit pair sums cannot overflow: 2*63*127 < 2^15), the
// pair sums multiplied by the sub-block scales and summed to int32 by
// VPMADDWD; mins and value offsets are taken through the activation sums.
// The int32 sums are exact, so the block's float operations (kEpilogue)
// are those of the Go form and the results its bits.

func kquantKernels() {
	for _, rows := range []bool{false, true} {
		dotQ4K(false, rows)
		dotQ4K(true, rows)
		dotQ6K(rows)
		dotQ2K(rows)
		dotQ3K(rows)
		dotIQ4XS(rows)
		dotIQ3S(rows)
		dotIQ3XXS(rows)
		dotIQ2XXS(rows)
	}
	dotQ4Kx4(false)
	dotQ4Kx4(true)
	dotQ6Kx4()
	dotQ4KRows4(false)
	dotQ4KRows4(true)
	dotQ6KRows4()
	dotIQ4XSRows4()
	dotIQ3SRows4(false)
	dotIQ3SRows4(true)
	cpuFamily()
}

// kx4 holds the four-token kernels' addressing: token t's activations at
// x (t = 0, 1) or x2 (t = 2, 3), plus xstride for odd t; its xd and xs
// pointers in a stack table (8t and 32+8t), advanced per block.
type kx4 struct {
	x, x2, xst Register
	ptrs       Mem
}

// kx4Params loads the arguments of a four-token kernel and zeroes out.
func kx4Params() (w, nb Register, a kx4) {
	w, nb = Load(Param("w"), GP64()), Load(Param("nb"), GP64())
	a.x, a.xst = Load(Param("x"), GP64()), Load(Param("xstride"), GP64())
	a.x2 = GP64()
	LEAQ(Mem{Base: a.x, Index: a.xst, Scale: 2}, a.x2)
	a.ptrs = AllocLocal(64)
	xd, xs, ds, ss := Load(Param("xd"), GP64()), Load(Param("xs"), GP64()), GP64(), GP64()
	MOVQ(a.xst, ds)
	SHRQ(Imm(6), ds) // QK activations per 4-byte scale
	MOVQ(a.xst, ss)
	SHRQ(Imm(3), ss) // QKSum activations per 2-byte sum
	for t := range 4 {
		MOVQ(xd, a.ptrs.Offset(8*t))
		MOVQ(xs, a.ptrs.Offset(32+8*t))
		if t < 3 {
			ADDQ(ds, xd)
			ADDQ(ss, xs)
		}
	}
	out, z := Load(Param("out"), GP64()), XMM()
	VXORPS(z, z, z)
	VMOVUPS(z, Mem{Base: out})
	return w, nb, a
}

// xm is token t's activations at byte offset off.
func (a kx4) xm(t, off int) Mem {
	m := Mem{Base: a.x, Disp: off}
	if t >= 2 {
		m.Base = a.x2
	}
	if t%2 == 1 {
		m.Index, m.Scale = a.xst, 1
	}
	return m
}

// epilogue runs kEpilogueDx for token t with the running sum in out[t];
// mins(xs) returns the four int32 lanes of Σm given token t's sums at xs
// (nil: none). The token's pointers advance.
func (a kx4) epilogue(t int, acc VecVirtual, mins func(xs Mem) Register, dm Mem) {
	xsp, xdp, out := GP64(), GP64(), Load(Param("out"), GP64())
	MOVQ(a.ptrs.Offset(32+8*t), xsp)
	MOVQ(a.ptrs.Offset(8*t), xdp)
	var m Register
	if mins != nil {
		m = mins(Mem{Base: xsp})
	}
	s := XMM()
	VMOVSS(Mem{Base: out, Disp: 4 * t}, s)
	kEpilogueDx(acc, m, dm, Mem{Base: xdp}, s)
	VMOVSS(s, Mem{Base: out, Disp: 4 * t})
	ADDQ(Imm(4), a.ptrs.Offset(8*t))
	ADDQ(Imm(32), a.ptrs.Offset(32+8*t))
}

// k45Scales unpacks the 12 scale bytes of the Q4_K/Q5_K block at w as
// llama.cpp does (scales 0..3, 4..7 and mins 0..3, 4..7 as four words of
// general registers) into sm, 16 words: scales 0..7, mins 0..7; sc8 holds
// the scales in both halves.
func k45Scales(w Register) (sm, sc8 VecVirtual) {
	u0, u1, u2, t, m47 := GP32(), GP32(), GP32(), GP32(), GP32()
	MOVL(Mem{Base: w, Disp: 4}, u0)
	MOVL(Mem{Base: w, Disp: 8}, u1)
	MOVL(Mem{Base: w, Disp: 12}, u2)
	MOVL(u2, m47)
	SHRL(Imm(4), m47)
	ANDL(U32(0x0f0f0f0f), m47)
	MOVL(u1, t)
	SHRL(Imm(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(Imm(4), t)
	ORL(t, m47)
	ANDL(U32(0x3f3f3f3f), u1) // mins 0..3
	MOVL(u0, t)
	SHRL(Imm(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(Imm(4), t)
	ANDL(U32(0x0f0f0f0f), u2)
	ORL(t, u2) // scales 4..7
	ANDL(U32(0x3f3f3f3f), u0)
	sm, sc8 = YMM(), YMM()
	VPMOVZXBW(fourWords(u0, u2, u1, m47), sm)
	VPERMQ(Imm(0x44), sm, sc8)
	return sm, sc8
}

// dotQ4Kx4 writes the four-token Q4_K (Q5_K with q5) kernel: each block's
// scales, values and sub-block scale vectors are unpacked once for the
// four tokens.
func dotQ4Kx4(q5 bool) {
	name, bytes, qs, what := "q4kx4", 144, 16, "dotQ4KAVX2"
	if q5 {
		name, bytes, qs, what = "q5kx4", 176, 48, "dotQ5KAVX2"
	}
	fn := "dotQ4Kx4AVX2"
	if q5 {
		fn = "dotQ5Kx4AVX2"
	}
	TEXT(fn, NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int16, nb, xstride int, out *float32)")
	Pragma("noescape")
	Doc(fn + " sets out[t] to " + what + " of the row against token t's activations (x + t*xstride, xd + t*xstride/256, xs + t*xstride/16) for t < 4, with its bits.")
	w, nb, a := kx4Params()
	mask, bit4 := YMM(), YMM()
	broadcastB(0x0f, mask)
	if q5 {
		broadcastB(0x10, bit4)
	}
	Label(name + "block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "done"))
	sm, sc8 := k45Scales(w)
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, r := range acc {
		VPXOR(r, r, r)
	}
	for g := range 4 {
		q, lo, hi := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: qs + 32*g}, q)
		VPAND(mask, q, lo)
		VPSRLW(Imm(4), q, hi)
		VPAND(mask, hi, hi)
		if q5 {
			qh := YMM()
			VMOVDQU(Mem{Base: w, Disp: 16}, qh)
			lo5, hi5 := fifthBit(qh, 2*g, bit4), fifthBit(qh, 2*g+1, bit4)
			VPOR(lo5, lo, lo)
			VPOR(hi5, hi, hi)
		}
		for i, v := range []VecVirtual{lo, hi} {
			sc := YMM()
			VPSHUFB(kWordMask(2*g+i), sc8, sc)
			for t := range 4 {
				p := YMM()
				VPMADDUBSW(a.xm(t, 64*g+32*i), v, p)
				VPMADDWD(sc, p, p)
				VPADDD(p, acc[t], acc[t])
			}
		}
	}
	for t := range 4 {
		a.epilogue(t, acc[t], func(xs Mem) Register {
			ps, mins := XMM(), XMM()
			VMOVDQU(xs, ps)
			VPHADDW(xs.Offset(16), ps, ps)
			VEXTRACTI128(Imm(1), sm, mins)
			VPMADDWD(ps, mins, mins)
			return mins
		}, Mem{Base: w})
	}
	ADDQ(Imm(uint64(bytes)), w)
	ADDQ(U32(256), a.x)
	ADDQ(U32(256), a.x2)
	DECQ(nb)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	VZEROUPPER()
	RET()
}

func dotQ6Kx4() {
	TEXT("dotQ6Kx4AVX2", NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int16, nb, xstride int, out *float32)")
	Pragma("noescape")
	Doc("dotQ6Kx4AVX2 sets out[t] to dotQ6KAVX2 of the row against token t's activations (x + t*xstride, xd + t*xstride/256, xs + t*xstride/16) for t < 4, with its bits.")
	w, nb, a := kx4Params()
	mask, m30 := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(0x30, m30)
	Label("q6kx4block")
	TESTQ(nb, nb)
	JZ(LabelRef("q6kx4done"))
	sc16 := YMM()
	VPMOVSXBW(Mem{Base: w, Disp: 192}, sc16)
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, r := range acc {
		VPXOR(r, r, r)
	}
	for h := range 2 {
		sc8 := YMM()
		VPERMQ(Imm([]uint64{0x44, 0xee}[h]), sc16, sc8)
		for k := range 4 {
			q := q6kQuants(Mem{Base: w, Disp: 64*h + 32*(k&1)}, Mem{Base: w, Disp: 128 + 32*h}, k, mask, m30)
			sc := YMM()
			VPSHUFB(kPairMask(k), sc8, sc)
			for t := range 4 {
				p := YMM()
				VPMADDUBSW(a.xm(t, 128*h+32*k), q, p)
				VPMADDWD(sc, p, p)
				VPADDD(p, acc[t], acc[t])
			}
		}
	}
	for t := range 4 {
		xsp := GP64()
		MOVQ(a.ptrs.Offset(32+8*t), xsp)
		off := YMM()
		VPMADDWD(Mem{Base: xsp}, sc16, off)
		VPSLLD(Imm(5), off, off)
		VPSUBD(off, acc[t], acc[t])
		a.epilogue(t, acc[t], nil, Mem{Base: w, Disp: 208})
	}
	ADDQ(Imm(210), w)
	ADDQ(U32(256), a.x)
	ADDQ(U32(256), a.x2)
	DECQ(nb)
	JMP(LabelRef("q6kx4block"))
	Label("q6kx4done")
	VZEROUPPER()
	RET()
}

// kText starts a one-row kernel name+"AVX2" or, with rows, its rows form
// name+"RowsAVX2", which runs the one-row kernel's instructions for each
// of rows consecutive weight rows (each result has its bits).
func kText(name, doc string, rows bool) {
	if rows {
		TEXT(name+"RowsAVX2", NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int16, nb, rows int, out *float32)")
		Pragma("noescape")
		Doc(name + "RowsAVX2 sets out[r] to " + name + "AVX2 of weight row r (the rows consecutive at w) for r < rows.")
		return
	}
	TEXT(name+"AVX2", NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int16, nb int) float32")
	Pragma("noescape")
	Doc(name + "AVX2 " + doc)
}

// kParams loads the common arguments (with rows, only w: kLoop loads the
// others at each row).
func kParams(rows bool) (w, x, xd, xs, nb Register) {
	if rows {
		return Load(Param("w"), GP64()), GP64(), GP64(), GP64(), GP64()
	}
	return Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("xd"), GP64()),
		Load(Param("xs"), GP64()), Load(Param("nb"), GP64())
}

// kLoop emits the block loop: body per block, then the pointers advance;
// with rows, around it the row loop (its count and out pointer on the
// stack, the activations' pointers reloaded per row).
func kLoop(name string, bytes int, w, x, xd, xs, nb Register, rows bool, body func(s VecVirtual)) {
	kLoopFin(name, bytes, w, x, xd, xs, nb, rows, body, nil)
}

// kLoopFin is kLoop with fin, when not nil, applied to each row's sum
// before it is stored.
func kLoopFin(name string, bytes int, w, x, xd, xs, nb Register, rows bool, body func(s VecVirtual), fin func(s VecVirtual)) {
	var cnt, outp Mem
	if rows {
		name += "r"
		cnt, outp = AllocLocal(8), AllocLocal(8)
		r, o := Load(Param("rows"), GP64()), Load(Param("out"), GP64())
		MOVQ(r, cnt)
		MOVQ(o, outp)
		Label(name + "row")
		CMPQ(cnt, Imm(0))
		JE(LabelRef(name + "end"))
		Load(Param("x"), x)
		Load(Param("xd"), xd)
		Load(Param("xs"), xs)
		Load(Param("nb"), nb)
	}
	s := XMM()
	VXORPS(s, s, s)
	Label(name + "block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "done"))
	for off := 0; off < bytes; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: blockPrefetch + off}) // see blockScaled
	}
	body(s)
	ADDQ(Imm(uint64(bytes)), w)
	ADDQ(U32(256), x)
	ADDQ(Imm(4), xd)
	ADDQ(Imm(32), xs)
	DECQ(nb)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	if fin != nil {
		fin(s)
	}
	if rows {
		o := GP64()
		MOVQ(outp, o)
		VMOVSS(s, Mem{Base: o})
		ADDQ(Imm(4), outp)
		DECQ(cnt)
		JMP(LabelRef(name + "row"))
		Label(name + "end")
		VZEROUPPER()
		RET()
		return
	}
	VZEROUPPER()
	Store(s, ReturnIndex(0))
	RET()
}

// foldD reduces the eight int32 lanes of y to four in y's xmm half.
func foldD(y VecVirtual) {
	t := XMM()
	VEXTRACTI128(Imm(1), y, t)
	VPADDD(t, y.AsX(), y.AsX())
}

// kEpilogue adds the block's float terms to s: with mins (four int32 lanes
// whose sum is Σ m·Σx), float32(d*dx*Σi) - float32(dmin*dx*Σm) where d and
// dmin are the f16 pair at dm; without, float32(d*dx*Σi), d the f16 at
// dm. acc holds eight int32 lanes summing to Σi.
func kEpilogue(acc VecVirtual, mins Register, dm Mem, xd Register, s VecVirtual) {
	kEpilogueDx(acc, mins, dm, Mem{Base: xd}, s)
}

// kEpilogueDx is kEpilogue with dx at dxm.
func kEpilogueDx(acc VecVirtual, mins Register, dm Mem, dxm Mem, s VecVirtual) {
	foldD(acc)
	r, dd, t := XMM(), XMM(), XMM()
	if mins != nil {
		VPHADDD(mins, acc.AsX(), r)
		VPHADDD(r, r, r) // [Σi, Σm, Σi, Σm]
		VMOVD(dm, dd)
	} else {
		VPHADDD(acc.AsX(), acc.AsX(), r)
		VPHADDD(r, r, r)
		g := GP32()
		MOVWLZX(dm, g)
		VMOVD(g, dd)
	}
	VCVTDQ2PS(r, r)
	VCVTPH2PS(dd, dd)
	VBROADCASTSS(dxm, t)
	VMULPS(t, dd, dd) // [d*dx, dmin*dx]
	VMULPS(r, dd, r)
	if mins != nil {
		VMOVSHDUP(r, t)
		VSUBSS(t, r, r)
	}
	VADDSS(r, s, s)
}

// kPairMasks are VPSHUFB controls that, applied to a vector holding eight
// int16 scales in both lanes, broadcast scale 2m to the low lane and
// scale 2m+1 to the high lane (m = 0..3).
var kPairTable Mem

func kPairMask(m int) Mem {
	if kPairTable.Symbol.Name == "" {
		kPairTable = GLOBL("kpairmasks", RODATA|NOPTR)
		for p := range 4 {
			for lane := range 2 {
				w := 2*p + lane
				for i := range 8 {
					DATA(32*p+16*lane+2*i, U8(uint8(2*w)))
					DATA(32*p+16*lane+2*i+1, U8(uint8(2*w+1)))
				}
			}
		}
	}
	return kPairTable.Offset(32 * m)
}

// fourWords returns the xmm register holding a, b, c, d (32 bits each, a
// lowest), built in registers: four 32-bit stores read back as one 16-byte
// load would stall on store forwarding.
func fourWords(a, b, c, d Register) VecVirtual {
	x := XMM()
	VMOVD(a, x)
	VPINSRD(Imm(1), b, x, x)
	VPINSRD(Imm(2), c, x, x)
	VPINSRD(Imm(3), d, x, x)
	return x
}

// kWordMasks are VPSHUFB controls that broadcast int16 word j (0..7) of
// each lane to the whole lane.
var kWordTable Mem

func kWordMask(j int) Mem {
	if kWordTable.Symbol.Name == "" {
		kWordTable = GLOBL("kwordmasks", RODATA|NOPTR)
		for w := range 8 {
			for i := range 16 {
				DATA(32*w+2*i, U8(uint8(2*w)))
				DATA(32*w+2*i+1, U8(uint8(2*w+1)))
			}
		}
	}
	return kWordTable.Offset(32 * j)
}

// kScaled adds to acc the products of the 32 unsigned bytes q with the 32
// activations at xm, each 16-value half scaled by its int16 scale: the low
// half by scale 2m and the high half by scale 2m+1 of sc8 (eight int16
// scales in both lanes).
func kScaled(q VecVirtual, xm Mem, sc8 VecVirtual, m int, acc VecVirtual) {
	sc := YMM()
	VPMADDUBSW(xm, q, q)
	VPSHUFB(kPairMask(m), sc8, sc)
	VPMADDWD(sc, q, q)
	VPADDD(q, acc, acc)
}

// dotQ4K writes the Q4_K (q5 false) or Q5_K (q5 true) kernel.
func dotQ4K(q5, rows bool) {
	name, bytes, qs := "q4k", 144, 16
	if q5 {
		name, bytes, qs = "q5k", 176, 48
		kText("dotQ5K", "is dotQ4KAVX2 for Q5_K blocks: each value gains its fifth bit from qh, moved to bit 4 by a word shift and a mask.", rows)
	} else {
		kText("dotQ4K", "returns the dot product of nb Q4_K blocks at w with QuantizeQ8K activations (x, xd, xs). The 6-bit scales and mins are unpacked in general registers, widened to 16 bits on the stack and broadcast per 32-value sub-block; the mins meet the pair sums of the 16-value activation sums.", rows)
	}
	w, x, xd, xs, nb := kParams(rows)
	mask, bit4 := YMM(), YMM()
	broadcastB(0x0f, mask)
	if q5 {
		broadcastB(0x10, bit4)
	}
	kLoop(name, bytes, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		sm, sc8 := k45Scales(w)
		var qh VecVirtual
		if q5 {
			qh = YMM()
			VMOVDQU(Mem{Base: w, Disp: 16}, qh)
		}
		acc := YMM()
		VPXOR(acc, acc, acc)
		for g := range 4 {
			q, lo, hi := YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: w, Disp: qs + 32*g}, q)
			VPAND(mask, q, lo)
			VPSRLW(Imm(4), q, hi)
			VPAND(mask, hi, hi)
			if q5 {
				lo5, hi5 := fifthBit(qh, 2*g, bit4), fifthBit(qh, 2*g+1, bit4)
				VPOR(lo5, lo, lo)
				VPOR(hi5, hi, hi)
			}
			for i, v := range []VecVirtual{lo, hi} {
				sc := YMM()
				VPMADDUBSW(Mem{Base: x, Disp: 64*g + 32*i}, v, v)
				VPSHUFB(kWordMask(2*g+i), sc8, sc)
				VPMADDWD(sc, v, v)
				VPADDD(v, acc, acc)
			}
		}
		// Σ m_j (sums 2j and 2j+1): pair sums of the 16 activation sums
		// against the eight mins.
		ps, mins := XMM(), XMM()
		VMOVDQU(Mem{Base: xs}, ps)
		VPHADDW(Mem{Base: xs, Disp: 16}, ps, ps)
		VEXTRACTI128(Imm(1), sm, mins)
		VPMADDWD(ps, mins, mins)
		kEpilogue(acc, mins, Mem{Base: w}, xd, s)
	})
}

// fifthBit returns bit b of every byte of qh at bit 4 (0x10 or 0).
func fifthBit(qh VecVirtual, b int, bit4 VecVirtual) VecVirtual {
	h := YMM()
	switch {
	case b < 4:
		VPSLLW(Imm(uint64(4-b)), qh, h)
	case b > 4:
		VPSRLW(Imm(uint64(b-4)), qh, h)
	default:
		VMOVDQA(qh, h)
	}
	VPAND(bit4, h, h)
	return h
}

func dotQ6K(rows bool) {
	kText("dotQ6K", "returns the dot product of nb Q6_K blocks at w with QuantizeQ8K activations. Values are taken unsigned (0..63); the offset of 32 comes off as 32·Σ_j sc_j·xs_j.", rows)
	w, x, xd, xs, nb := kParams(rows)
	mask, m30 := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(0x30, m30)
	kLoop("q6k", 210, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		sc16 := YMM()
		VPMOVSXBW(Mem{Base: w, Disp: 192}, sc16)
		acc := YMM()
		VPXOR(acc, acc, acc)
		for h := range 2 {
			sc8 := YMM()
			VPERMQ(Imm([]uint64{0x44, 0xee}[h]), sc16, sc8)
			ql0, ql1, qh := YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: w, Disp: 64 * h}, ql0)
			VMOVDQU(Mem{Base: w, Disp: 64*h + 32}, ql1)
			VMOVDQU(Mem{Base: w, Disp: 128 + 32*h}, qh)
			for k := range 4 {
				q, hb := YMM(), YMM()
				src := []VecVirtual{ql0, ql1}[k&1]
				if k < 2 {
					VPAND(mask, src, q)
				} else {
					VPSRLW(Imm(4), src, q)
					VPAND(mask, q, q)
				}
				// bits 2k..2k+1 of qh to bits 4..5
				switch k {
				case 0:
					VPSLLW(Imm(4), qh, hb)
				case 1:
					VPSLLW(Imm(2), qh, hb)
				case 2:
					VMOVDQA(qh, hb)
				case 3:
					VPSRLW(Imm(2), qh, hb)
				}
				VPAND(m30, hb, hb)
				VPOR(hb, q, q)
				kScaled(q, Mem{Base: x, Disp: 128*h + 32*k}, sc8, k, acc)
			}
		}
		off := YMM()
		VPMADDWD(Mem{Base: xs}, sc16, off)
		VPSLLD(Imm(5), off, off)
		VPSUBD(off, acc, acc)
		kEpilogue(acc, nil, Mem{Base: w, Disp: 208}, xd, s)
	})
}

func dotQ2K(rows bool) {
	kText("dotQ2K", "returns the dot product of nb Q2_K blocks at w with QuantizeQ8K activations: 4-bit scales per 16 values, mins against the activation sums.", rows)
	w, x, xd, xs, nb := kParams(rows)
	m3, low4 := YMM(), YMM()
	broadcastB(3, m3)
	broadcastW(0x0f, low4)
	kLoop("q2k", 84, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		b16, sc16, mins := YMM(), YMM(), YMM()
		VPMOVZXBW(Mem{Base: w}, b16)
		VPAND(low4, b16, sc16)
		VPSRLW(Imm(4), b16, mins)
		acc := YMM()
		VPXOR(acc, acc, acc)
		for h := range 2 {
			sc8, qs := YMM(), YMM()
			VPERMQ(Imm([]uint64{0x44, 0xee}[h]), sc16, sc8)
			VMOVDQU(Mem{Base: w, Disp: 16 + 32*h}, qs)
			for j := range 4 {
				q := YMM()
				if j == 0 {
					VPAND(m3, qs, q)
				} else {
					VPSRLW(Imm(uint64(2*j)), qs, q)
					VPAND(m3, q, q)
				}
				kScaled(q, Mem{Base: x, Disp: 128*h + 32*j}, sc8, j, acc)
			}
		}
		VPMADDWD(Mem{Base: xs}, mins, mins)
		foldD(mins)
		kEpilogue(acc, mins.AsX(), Mem{Base: w, Disp: 80}, xd, s)
	})
}

func dotQ3K(rows bool) {
	kText("dotQ3K", "returns the dot product of nb Q3_K blocks at w with QuantizeQ8K activations. Values are taken unsigned, the two low bits plus 4 where the high bit is set (0..7); the offset of 4 comes off as 4·Σ_j sc_j·xs_j.", rows)
	w, x, xd, xs, nb := kParams(rows)
	m3, bit2, w32 := YMM(), YMM(), YMM()
	broadcastB(3, m3)
	broadcastB(4, bit2)
	broadcastW(32, w32)
	kLoop("q3k", 110, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		// llama.cpp's unpacking of the twelve scale bytes into sixteen
		// 6-bit scales (plus 32).
		a0, a1, tmp, t, r2, r3 := GP32(), GP32(), GP32(), GP32(), GP32(), GP32()
		MOVL(Mem{Base: w, Disp: 96}, a0)
		MOVL(Mem{Base: w, Disp: 100}, a1)
		MOVL(Mem{Base: w, Disp: 104}, tmp)
		sixBits := func(dst, lowSrc Register, lowShift, tmpShift uint64) {
			MOVL(lowSrc, dst)
			if lowShift > 0 {
				SHRL(Imm(lowShift), dst)
			}
			ANDL(U32(0x0f0f0f0f), dst)
			MOVL(tmp, t)
			if tmpShift > 0 {
				SHRL(Imm(tmpShift), t)
			}
			ANDL(U32(0x03030303), t)
			SHLL(Imm(4), t)
			ORL(t, dst)
		}
		sixBits(r2, a0, 4, 4)
		sixBits(r3, a1, 4, 6)
		sixBits(a0, a0, 0, 0)
		sixBits(a1, a1, 0, 2)
		sc16 := YMM()
		VPMOVZXBW(fourWords(a0, a1, r2, r3), sc16)
		VPSUBW(w32, sc16, sc16)
		hm := YMM()
		VMOVDQU(Mem{Base: w}, hm)
		acc := YMM()
		VPXOR(acc, acc, acc)
		for h := range 2 {
			sc8, qs := YMM(), YMM()
			VPERMQ(Imm([]uint64{0x44, 0xee}[h]), sc16, sc8)
			VMOVDQU(Mem{Base: w, Disp: 32 + 32*h}, qs)
			for j := range 4 {
				q, hb := YMM(), YMM()
				if j == 0 {
					VPAND(m3, qs, q)
				} else {
					VPSRLW(Imm(uint64(2*j)), qs, q)
					VPAND(m3, q, q)
				}
				// bit 4h+j of hmask to bit 2
				switch b := 4*h + j; {
				case b < 2:
					VPSLLW(Imm(uint64(2-b)), hm, hb)
				case b > 2:
					VPSRLW(Imm(uint64(b-2)), hm, hb)
				default:
					VMOVDQA(hm, hb)
				}
				VPAND(bit2, hb, hb)
				VPOR(hb, q, q)
				kScaled(q, Mem{Base: x, Disp: 128*h + 32*j}, sc8, j, acc)
			}
		}
		off := YMM()
		VPMADDWD(Mem{Base: xs}, sc16, off)
		VPSLLD(Imm(2), off, off)
		VPSUBD(off, acc, acc)
		kEpilogue(acc, nil, Mem{Base: w, Disp: 108}, xd, s)
	})
}

// The four-row kernels of AVX-512 VNNI (256-bit vectors): four consecutive
// weight rows against one token, each block of the four rows unpacked and
// multiplied in turn, VPDPWSSD applying the sub-block scales and adding in
// one instruction (Q4_K and Q5_K read each scale as a dword broadcast from
// a table on the stack, so no shuffle), and the four rows' block
// epilogues run as one: the integer sums reduced together, the float terms
// of the four rows in the lanes of one vector. The integer sums are exact
// and every lane's float operations are kEpilogue's, so each result has
// the bits of the one-row kernel.

// q6kQuants loads 32 6-bit Q6_K values of quarter k of a half block: the
// low four bits from the nibbles at low (high nibbles for k >= 2), the top
// two from bit pair k of the bytes at high (m30 keeps bits 4-5).
func q6kQuants(low, high Mem, k int, mask, m30 VecVirtual) VecVirtual {
	q, hb := YMM(), YMM()
	VMOVDQU(low, q)
	if k >= 2 {
		VPSRLW(Imm(4), q, q)
	}
	VPAND(mask, q, q)
	VMOVDQU(high, hb)
	switch k {
	case 0:
		VPSLLW(Imm(4), hb, hb)
	case 1:
		VPSLLW(Imm(2), hb, hb)
	case 3:
		VPSRLW(Imm(2), hb, hb)
	}
	VPAND(m30, hb, hb)
	VPOR(hb, q, q)
	return q
}

// k4 holds a four-row kernel's addressing: w the current block of row 0,
// rows r at w + r*rb (rb, 2*rb, rb3 = 3*rb).
type k4 struct {
	w, rb, rb3 Register
}

func (a k4) row(r, disp int) Mem {
	switch r {
	case 0:
		return Mem{Base: a.w, Disp: disp}
	case 1:
		return Mem{Base: a.w, Index: a.rb, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: a.w, Index: a.rb, Scale: 2, Disp: disp}
	}
	return Mem{Base: a.w, Index: a.rb3, Scale: 1, Disp: disp}
}

// k4Loop emits the group loop (four rows at a time, groups of them) around
// the block loop; body runs per block with the activations at x, xd, xs
// and the group's running sums in s, and finish stores a group's sums at
// out (rows 0..3).
func k4Loop(name string, bytes int, body func(a k4, x, xd, xs Register, s VecVirtual), finish func(s VecVirtual, out Register)) {
	cnt, outp, grp := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	a := k4{w: GP64(), rb: GP64(), rb3: GP64()}
	nb := Load(Param("nb"), GP64())
	IMUL3Q(Imm(uint64(bytes)), nb, a.rb)
	LEAQ(Mem{Base: a.rb, Index: a.rb, Scale: 2}, a.rb3)
	g, o, w0 := Load(Param("groups"), GP64()), Load(Param("out"), GP64()), Load(Param("w"), GP64())
	MOVQ(g, cnt)
	MOVQ(o, outp)
	MOVQ(w0, grp)
	x, xd, xs := GP64(), GP64(), GP64()
	Label(name + "group")
	CMPQ(cnt, Imm(0))
	JE(LabelRef(name + "end"))
	MOVQ(grp, a.w)
	Load(Param("x"), x)
	Load(Param("xd"), xd)
	Load(Param("xs"), xs)
	n := Load(Param("nb"), GP64())
	s := YMM()
	VXORPS(s, s, s)
	Label(name + "block")
	TESTQ(n, n)
	JZ(LabelRef(name + "done"))
	// The next group's block, for the memory to stream ahead of the
	// hardware prefetcher's ramp across the four row streams.
	pn := GP64()
	LEAQ(Mem{Base: a.rb3, Index: a.rb, Scale: 1}, pn)
	ADDQ(a.w, pn)
	for r := range 4 {
		for off := 0; off < bytes; off += 64 {
			m := k4{w: pn, rb: a.rb, rb3: a.rb3}.row(r, off)
			PREFETCHT0(m)
		}
	}
	body(a, x, xd, xs, s)
	ADDQ(Imm(uint64(bytes)), a.w)
	ADDQ(U32(256), x)
	ADDQ(Imm(4), xd)
	ADDQ(Imm(32), xs)
	DECQ(n)
	JMP(LabelRef(name + "block"))
	Label(name + "done")
	op := GP64()
	MOVQ(outp, op)
	finish(s, op)
	ADDQ(Imm(16), outp)
	LEAQ(Mem{Base: a.rb3, Index: a.rb, Scale: 1}, op) // 4*rb
	ADDQ(op, grp)
	DECQ(cnt)
	JMP(LabelRef(name + "group"))
	Label(name + "end")
	VZEROUPPER()
	RET()
}

// k4Text starts the four-row kernel name, which has the bits of kernel
// one.
func k4Text(name, one string) {
	TEXT(name, NOSPLIT, "func(w *byte, x *int8, xd *float32, xs *int16, nb, groups int, out *float32)")
	Pragma("noescape")
	Doc(name + " sets out[r] for r < 4*groups to " + one + " of weight row r (the rows consecutive at w, nb blocks each).")
}

// sum4 reduces the eight int32 lanes of each of acc[0..3] to one: lane r
// of the returned xmm register is the sum of acc[r].
func sum4(acc [4]VecVirtual) Register {
	VPHADDD(acc[1], acc[0], acc[0])
	VPHADDD(acc[3], acc[2], acc[2])
	VPHADDD(acc[2], acc[0], acc[0])
	t := XMM()
	VEXTRACTI128(Imm(1), acc[0], t)
	VPADDD(t, acc[0].AsX(), acc[0].AsX())
	return acc[0].AsX()
}

// dotQ4KRows4 writes the four-row Q4_K (Q5_K with q5) kernel of VNNI.
func dotQ4KRows4(q5 bool) {
	name, bytes, qs := "dotQ4KRows4VNNI", 144, 16
	if q5 {
		name, bytes, qs = "dotQ5KRows4VNNI", 176, 48
	}
	one := "dotQ4KAVX2"
	if q5 {
		one = "dotQ5KAVX2"
	}
	k4Text(name, one)
	tbl := AllocLocal(4 * 32) // per row: the eight scales s as dwords s | s<<16
	mn := AllocLocal(4 * 8)   // per row: the eight scales, then mins, as bytes
	mask, bit4 := YMM(), YMM()
	broadcastB(0x0f, mask)
	if q5 {
		broadcastB(0x10, bit4)
	}
	k4Loop(name, bytes, func(a k4, x, xd, xs Register, s VecVirtual) {
		for r := range 4 {
			// kernel dotQ4K's unpacking of the scale bytes
			u0, u1, u2, t, m47 := GP64(), GP64(), GP64(), GP64(), GP64()
			MOVL(a.row(r, 4), u0.As32())
			MOVL(a.row(r, 8), u1.As32())
			MOVL(a.row(r, 12), u2.As32())
			MOVL(u2.As32(), m47.As32())
			SHRL(Imm(4), m47.As32())
			ANDL(U32(0x0f0f0f0f), m47.As32())
			MOVL(u1.As32(), t.As32())
			SHRL(Imm(6), t.As32())
			ANDL(U32(0x03030303), t.As32())
			SHLL(Imm(4), t.As32())
			ORL(t.As32(), m47.As32())
			ANDL(U32(0x3f3f3f3f), u1.As32()) // mins 0..3
			MOVL(u0.As32(), t.As32())
			SHRL(Imm(6), t.As32())
			ANDL(U32(0x03030303), t.As32())
			SHLL(Imm(4), t.As32())
			ANDL(U32(0x0f0f0f0f), u2.As32())
			ORL(t.As32(), u2.As32()) // scales 4..7
			ANDL(U32(0x3f3f3f3f), u0.As32())
			SHLQ(Imm(32), u2)
			ORQ(u2, u0)
			SHLQ(Imm(32), m47)
			ORQ(m47, u1)
			MOVQ(u0, mn.Offset(8*r)) // the scales, then their dwords
			sd, sh := YMM(), YMM()
			VPMOVZXBD(mn.Offset(8*r), sd)
			VPSLLD(Imm(16), sd, sh)
			VPOR(sh, sd, sd)
			VMOVDQU(sd, tbl.Offset(32*r))
			MOVQ(u1, mn.Offset(8*r))
		}
		acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for _, v := range acc {
			VPXOR(v, v, v)
		}
		for g := range 4 {
			for r := range 4 {
				q, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(a.row(r, qs+32*g), q)
				VPAND(mask, q, lo)
				VPSRLW(Imm(4), q, hi)
				VPAND(mask, hi, hi)
				if q5 {
					qh := YMM()
					VMOVDQU(a.row(r, 16), qh)
					lo5, hi5 := fifthBit(qh, 2*g, bit4), fifthBit(qh, 2*g+1, bit4)
					VPOR(lo5, lo, lo)
					VPOR(hi5, hi, hi)
				}
				VPMADDUBSW(Mem{Base: x, Disp: 64 * g}, lo, lo)
				VPDPWSSD_BCST(tbl.Offset(32*r+4*(2*g)), lo, acc[r])
				VPMADDUBSW(Mem{Base: x, Disp: 64*g + 32}, hi, hi)
				VPDPWSSD_BCST(tbl.Offset(32*r+4*(2*g+1)), hi, acc[r])
			}
		}
		sumi := sum4(acc)
		// Σ m_j (sums 2j and 2j+1) per row: pair sums of the 16
		// activation sums against the row's eight mins.
		ps := XMM()
		VMOVDQU(Mem{Base: xs}, ps)
		VPHADDW(Mem{Base: xs, Disp: 16}, ps, ps)
		var m [4]VecVirtual
		for r := range 4 {
			m[r] = XMM()
			VPMOVZXBW(mn.Offset(8*r), m[r])
			VPMADDWD(ps, m[r], m[r])
		}
		VPHADDD(m[1], m[0], m[0])
		VPHADDD(m[3], m[2], m[2])
		VPHADDD(m[2], m[0], m[0]) // [Σm0, Σm1, Σm2, Σm3]
		lo, hi := XMM(), XMM()
		VPUNPCKLDQ(m[0], sumi, lo)
		VPUNPCKHDQ(m[0], sumi, hi)
		r8 := YMM()
		VINSERTI128(Imm(1), hi, lo.AsY(), r8) // [Σi0, Σm0, ..., Σi3, Σm3]
		dm := XMM()
		VMOVD(a.row(0, 0), dm)
		for r := 1; r < 4; r++ {
			VPINSRD(Imm(uint64(r)), a.row(r, 0), dm, dm)
		}
		dd, t := YMM(), YMM()
		VCVTPH2PS(dm, dd)
		VBROADCASTSS(Mem{Base: xd}, t)
		VMULPS(t, dd, dd) // [d*dx, dmin*dx] per row
		VCVTDQ2PS(r8, r8)
		VMULPS(r8, dd, r8)
		VMOVSHDUP(r8, t)
		VSUBPS(t, r8, r8)
		VADDPS(r8, s, s) // lanes 0, 2, 4, 6
	}, func(s VecVirtual, out Register) {
		h := XMM()
		VEXTRACTF128(Imm(1), s, h)
		VSHUFPS(Imm(0x88), h, s.AsX(), h)
		VMOVUPS(h, Mem{Base: out})
	})
}

// dotQ6KRows4 writes the four-row Q6_K kernel of VNNI: the scales per 16
// values are shuffled into place as in dotQ6K, VPDPWSSD applies and adds
// them.
func dotQ6KRows4() {
	const name = "dotQ6KRows4VNNI"
	k4Text(name, "dotQ6KAVX2")
	mask, m30 := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(0x30, m30)
	k4Loop(name, 210, func(a k4, x, xd, xs Register, s VecVirtual) {
		acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for r := range 4 {
			sc16 := YMM()
			VPMOVSXBW(a.row(r, 192), sc16)
			// the offset of 32: acc starts at -32·Σ_j sc_j·xs_j
			VPMADDWD(Mem{Base: xs}, sc16, acc[r])
			VPSLLD(Imm(5), acc[r], acc[r])
			z := YMM()
			VPXOR(z, z, z)
			VPSUBD(acc[r], z, acc[r])
			for h := range 2 {
				sc8 := YMM()
				VPERMQ(Imm([]uint64{0x44, 0xee}[h]), sc16, sc8)
				for k := range 4 {
					q := q6kQuants(a.row(r, 64*h+32*(k&1)), a.row(r, 128+32*h), k, mask, m30)
					sc := YMM()
					VPSHUFB(kPairMask(k), sc8, sc)
					VPMADDUBSW(Mem{Base: x, Disp: 128*h + 32*k}, q, q)
					VPDPWSSD(sc, q, acc[r])
				}
			}
		}
		sumi := sum4(acc)
		dm := XMM()
		VMOVD(a.row(0, 206), dm) // d in the high half
		for r := 1; r < 4; r++ {
			VPINSRD(Imm(uint64(r)), a.row(r, 206), dm, dm)
		}
		VPSRLD(Imm(16), dm, dm)
		VPACKUSDW(dm, dm, dm)
		dd, t, f := XMM(), XMM(), XMM()
		VCVTPH2PS(dm, dd)
		VBROADCASTSS(Mem{Base: xd}, t)
		VMULPS(t, dd, dd) // d*dx per row
		VCVTDQ2PS(sumi, f)
		VMULPS(f, dd, f)
		VADDPS(f, s.AsX(), s.AsX())
	}, func(s VecVirtual, out Register) {
		VMOVUPS(s.AsX(), Mem{Base: out})
	})
}

// dotIQ4XS writes the IQ4_XS kernel against QuantizeQ8K activations: per
// sub-block of 32 the codes become their IQ4_NL values by VPSHUFB (as
// dotIQ4NL), meet the activations as signed bytes (VPSIGNB, VPABSB,
// VPMADDUBSW: |w| <= 127), and VPMADDWD against the sub-block's scale
// ls-32 (the block's eight made as words in a vector once, each broadcast
// by VPSHUFB) adds them to eight int32 lanes: the block's exact integer sum, to which kEpilogue
// applies float32(d*dx*Σ) as the Go form does (the same bits).
func dotIQ4XS(rows bool) {
	kText("dotIQ4XS", "returns the dot product of nb IQ4_XS blocks at w with QuantizeQ8K activations: the IQ4_NL values of the codes times the 6-bit sub-block scales less 32.", rows)
	w, x, xd, xs, nb := kParams(rows)
	tab := GP64()
	LEAQ(iq4nlConsts(), tab)
	mask, kv := YMM(), YMM()
	broadcastB(0x0f, mask)
	VMOVDQU(Mem{Base: tab}, kv)
	kLoop("iq4xs", 136, w, x, xd, xs, nb, rows, func(s VecVirtual) {
		acc := YMM()
		VPXOR(acc, acc, acc)
		// the eight sub-block scales as words in both lanes: the low
		// nibbles at 4, bits 2j and 2j+1 of the word at 2 (VPMULLW by
		// 1<<(14-2j) moves them to the top) above them, less 32
		sc8, hv := iqNibbles(Mem{Base: w, Disp: 4}), YMM()
		VPBROADCASTW(Mem{Base: w, Disp: 2}, hv)
		VPMULLW(iqScaleConsts().Offset(16), hv, hv)
		VPSRLW(Imm(10), hv, hv)
		VPAND(iqScaleConsts().Offset(48), hv, hv)
		VPOR(hv, sc8, sc8)
		VPSUBW(iqScaleConsts().Offset(80), sc8, sc8)
		for ib := range 8 {
			sc := YMM()
			VPSHUFB(kWordMask(ib), sc8, sc)
			b, h, u, q, sx := XMM(), XMM(), YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: w, Disp: 8 + 16*ib}, b)
			VPSRLW(Imm(4), b, h)
			VINSERTI128(Imm(1), h, b.AsY(), u)
			VPAND(mask, u, u)
			VPSHUFB(u, kv, q) // the values in element order
			VPABSB(q, u)
			VMOVDQU(Mem{Base: x, Disp: 32 * ib}, sx)
			VPSIGNB(q, sx, sx)
			VPMADDUBSW(sx, u, u)
			VPMADDWD(sc, u, u)
			VPADDD(u, acc, acc)
		}
		kEpilogue(acc, nil, Mem{Base: w}, xd, s)
	})
}
