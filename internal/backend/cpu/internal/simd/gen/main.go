// Command gen writes the amd64 kernels of package simd (AVX2, FMA and F16C)
// with avo: go generate ./internal/backend/cpu/internal/simd.
//
// Every kernel takes raw pointers and element counts that the Go wrappers
// in simd.go have already checked, and handles only whole vectors (8
// floats) or whole 32-element blocks; the wrappers do the remainders.
package main

import (
	"fmt"
	"math"
	"os"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64")
	dotF32(false)
	dotF32(true)
	dotF32x4()
	dotHalf("dotF16AVX2", "F16 weights: 8 halves widen with VCVTPH2PS.", func(m Mem, y VecVirtual) { VCVTPH2PS(m, y) })
	dotHalf("dotBF16AVX2", "BF16 weights: 8 bfloat16 widen by a zero extension and a 16-bit shift.", func(m Mem, y VecVirtual) {
		VPMOVZXWD(m, y)
		VPSLLD(Imm(16), y, y)
	})
	dotI8F32()
	dotI4F32()
	dotQ8Q8()
	dotQ4Q8()
	dotQ4Q8x4()
	dotQ8Q8x4()
	dotQ8Q8Blocks(false)
	dotQ4Q8Blocks(false)
	dotQ8Q8Blocks(true)
	dotQ4Q8Blocks(true)
	dotQ8Q8x4Blocks()
	dotQ4Q8x4Blocks()
	expSub()
	swiglu()
	decayRank1()
	weightedSum("weightedSumF32AVX2", 4, "f32 rows.", func(m Mem, y VecVirtual) { VMOVUPS(m, y) })
	weightedSum("weightedSumF16AVX2", 2, "binary16 rows.", func(m Mem, y VecVirtual) { VCVTPH2PS(m, y) })
	kquantKernels()
	q32Kernels()
	gemmKernels()
	gemmAVX2Kernels()
	gemmAVXVNNIKernels()
	gemmKAVX2Kernels()
	gemmKKernels()
	dotF32x2x4()
	gemmF32Kernels()
	gemmPanelKernels()
	rowMaxSum()
	dotF32Rows4()
	dotF32RowsZ()
	quantKernels()
	Generate()
	if err := vexVPDPBUSD(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// hsum reduces the 8 lanes of y to one float in the low lane of y's xmm
// half and stores it as the function's result.
func hsum(y VecVirtual) {
	x, t := y.AsX(), XMM()
	VEXTRACTF128(Imm(1), y, t)
	VADDPS(t, x, x)
	VMOVHLPS(x, x, t)
	VADDPS(t, x, x)
	VMOVSHDUP(x, t)
	VADDSS(t, x, x)
}

// dotLoop emits the loop of the dot products: n elements (a multiple of 8)
// of a, size bytes each, load turning 8 of them at m into 8 floats in y,
// against f32 x, 32 at a time into the four accumulators while they last,
// then 8 at a time into the first; then the accumulators' sum, in the
// low lane of acc[0]. pre prefixes the labels.
func dotLoop(pre string, a, x, n Register, acc [4]VecVirtual, size int, load func(m Mem, y VecVirtual)) {
	Label(pre + "loop32")
	CMPQ(n, Imm(32))
	JL(LabelRef(pre + "loop8"))
	for i, r := range acc {
		t := YMM()
		load(Mem{Base: a, Disp: 8 * size * i}, t)
		VFMADD231PS(Mem{Base: x, Disp: 32 * i}, t, r)
	}
	ADDQ(Imm(uint64(32*size)), a)
	ADDQ(Imm(128), x)
	SUBQ(Imm(32), n)
	JMP(LabelRef(pre + "loop32"))
	Label(pre + "loop8")
	CMPQ(n, Imm(8))
	JL(LabelRef(pre + "done"))
	t := YMM()
	load(Mem{Base: a}, t)
	VFMADD231PS(Mem{Base: x}, t, acc[0])
	ADDQ(Imm(uint64(8*size)), a)
	ADDQ(Imm(32), x)
	SUBQ(Imm(8), n)
	JMP(LabelRef(pre + "loop8"))
	Label(pre + "done")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	hsum(acc[0])
}

func dotF32(rows bool) {
	pre := "f32"
	if rows {
		pre = "f32r"
		TEXT("dotF32RowsAVX2", NOSPLIT, "func(a, x *float32, n, rows int, out *float32)")
		Pragma("noescape")
		Doc("dotF32RowsAVX2 sets out[r] = dotF32AVX2(a+r*n, x, n) for r < rows, n a multiple of 8.")
	} else {
		TEXT("dotF32AVX2", NOSPLIT, "func(a, x *float32, n int) float32")
		Pragma("noescape")
		Doc("dotF32AVX2 returns Σ a[i]*x[i] for i < n, n a multiple of 8.")
	}
	a, x0, n0 := Load(Param("a"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	x, n := x0, n0
	var nrows, out Register
	if rows {
		nrows, out = Load(Param("rows"), GP64()), Load(Param("out"), GP64())
		x, n = GP64(), GP64()
	}
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	// With rows, each row restarts at x; the next row of a follows.
	Label(pre + "row")
	if rows {
		TESTQ(nrows, nrows)
		JZ(LabelRef(pre + "end"))
		MOVQ(x0, x)
		MOVQ(n0, n)
	}
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	dotLoop(pre, a, x, n, acc, 4, func(m Mem, y VecVirtual) { VMOVUPS(m, y) })
	if !rows {
		VZEROUPPER()
		Store(acc[0].AsX(), ReturnIndex(0))
		RET()
		return
	}
	VMOVSS(acc[0].AsX(), Mem{Base: out})
	ADDQ(Imm(4), out)
	DECQ(nrows)
	JMP(LabelRef(pre + "row"))
	Label(pre + "end")
	VZEROUPPER()
	RET()
}

// dotF32x4 is the prefill kernel: one weight row against four token rows,
// each weight vector loaded once for four products.
func dotF32x4() {
	TEXT("dotF32x4AVX2", NOSPLIT, "func(a, x *float32, stride, n int, out *float32)")
	Pragma("noescape")
	Doc("dotF32x4AVX2 sets out[j] = Σ a[i]*x[j*stride+i] for i < n and j < 4, n a multiple of 8.")
	a, x, n := Load(Param("a"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	stride := Load(Param("stride"), GP64())
	SHLQ(Imm(2), stride)
	x1, x2, x3 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: x, Index: stride, Scale: 1}, x1)
	LEAQ(Mem{Base: x1, Index: stride, Scale: 1}, x2)
	LEAQ(Mem{Base: x2, Index: stride, Scale: 1}, x3)
	xs := []Register{x, x1, x2, x3}
	acc := [8]VecVirtual{}
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	i := GP64()
	XORQ(i, i)
	Label("f32x4loop16")
	t := GP64()
	MOVQ(i, t)
	ADDQ(Imm(16), t)
	CMPQ(t, n)
	JG(LabelRef("f32x4loop8"))
	for h := range 2 {
		w := YMM()
		VMOVUPS(Mem{Base: a, Index: i, Scale: 4, Disp: 32 * h}, w)
		for j, xp := range xs {
			VFMADD231PS(Mem{Base: xp, Index: i, Scale: 4, Disp: 32 * h}, w, acc[j+4*h])
		}
	}
	ADDQ(Imm(16), i)
	JMP(LabelRef("f32x4loop16"))
	Label("f32x4loop8")
	CMPQ(i, n)
	JGE(LabelRef("f32x4done"))
	w := YMM()
	VMOVUPS(Mem{Base: a, Index: i, Scale: 4}, w)
	for j, xp := range xs {
		VFMADD231PS(Mem{Base: xp, Index: i, Scale: 4}, w, acc[j])
	}
	ADDQ(Imm(8), i)
	JMP(LabelRef("f32x4loop8"))
	Label("f32x4done")
	out := Load(Param("out"), GP64())
	for j := range 4 {
		VADDPS(acc[j+4], acc[j], acc[j])
		hsum(acc[j])
		VMOVSS(acc[j].AsX(), Mem{Base: out, Disp: 4 * j})
	}
	VZEROUPPER()
	RET()
}

// dotHalf is a dot product of 16-bit weights with f32 inputs, widen turning
// 8 weights at m into 8 floats in y.
func dotHalf(name, doc string, widen func(m Mem, y VecVirtual)) {
	TEXT(name, NOSPLIT, "func(a *uint16, x *float32, n int) float32")
	Pragma("noescape")
	Doc(name + " returns Σ a[i]*x[i] for i < n, n a multiple of 8. " + doc)
	a, x, n := Load(Param("a"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	dotLoop(name, a, x, n, acc, 2, widen)
	VZEROUPPER()
	Store(acc[0].AsX(), ReturnIndex(0))
	RET()
}

// dotI8F32 is the exact int8 kernel: f32 inputs, weights widened to f32,
// each block's sum scaled once.
func dotI8F32() {
	TEXT("dotI8F32AVX2", NOSPLIT, "func(q *int8, x *float32, sc *float32, nb, block int) float32")
	Pragma("noescape")
	Doc("dotI8F32AVX2 returns Σ_b sc[b] Σ_i q[b*block+i]*x[b*block+i] over nb blocks, block a multiple of 8.")
	q, x, sc := Load(Param("q"), GP64()), Load(Param("x"), GP64()), Load(Param("sc"), GP64())
	nb, block := Load(Param("nb"), GP64()), Load(Param("block"), GP64())
	acc := YMM()
	VXORPS(acc, acc, acc)
	Label("i8f32block")
	TESTQ(nb, nb)
	JZ(LabelRef("i8f32done"))
	b0, b1 := YMM(), YMM()
	VXORPS(b0, b0, b0)
	VXORPS(b1, b1, b1)
	k := GP64()
	MOVQ(block, k)
	Label("i8f32loop16")
	CMPQ(k, Imm(16))
	JL(LabelRef("i8f32loop8"))
	for h, b := range []VecVirtual{b0, b1} {
		t := YMM()
		VPMOVSXBD(Mem{Base: q, Disp: 8 * h}, t)
		VCVTDQ2PS(t, t)
		VFMADD231PS(Mem{Base: x, Disp: 32 * h}, t, b)
	}
	ADDQ(Imm(16), q)
	ADDQ(Imm(64), x)
	SUBQ(Imm(16), k)
	JMP(LabelRef("i8f32loop16"))
	Label("i8f32loop8")
	CMPQ(k, Imm(8))
	JL(LabelRef("i8f32next"))
	t := YMM()
	VPMOVSXBD(Mem{Base: q}, t)
	VCVTDQ2PS(t, t)
	VFMADD231PS(Mem{Base: x}, t, b0)
	ADDQ(Imm(8), q)
	ADDQ(Imm(32), x)
	SUBQ(Imm(8), k)
	JMP(LabelRef("i8f32loop8"))
	Label("i8f32next")
	VADDPS(b1, b0, b0)
	s := YMM()
	VBROADCASTSS(Mem{Base: sc}, s)
	VFMADD231PS(b0, s, acc)
	ADDQ(Imm(4), sc)
	DECQ(nb)
	JMP(LabelRef("i8f32block"))
	Label("i8f32done")
	hsum(acc)
	VZEROUPPER()
	Store(acc.AsX(), ReturnIndex(0))
	RET()
}

// broadcastB fills y with the byte v.
func broadcastB(v int, y VecVirtual) {
	r := GP32()
	MOVL(U32(uint32(v)*0x01010101), r)
	VMOVD(r, y.AsX())
	VPBROADCASTB(y.AsX(), y)
}

// broadcastW fills y with the 16-bit word v.
func broadcastW(v int, y VecVirtual) {
	r := GP32()
	MOVL(U32(uint32(v)*0x00010001), r)
	VMOVD(r, y.AsX())
	VPBROADCASTW(y.AsX(), y)
}

// unpackI4 turns the 16 bytes at m (32 two's complement nibbles, element
// 2i in the low nibble of byte i) into 32 signed bytes in element order:
// lo holds elements 0..15, hi elements 16..31. mask is 0x0f in every byte,
// eight 8 in every byte.
func unpackI4(m Mem, mask, eight VecVirtual, lo, hi VecVirtual) {
	b, l, h := XMM(), XMM(), XMM()
	VMOVDQU(m, b)
	VPAND(mask.AsX(), b, l)
	VPSRLW(Imm(4), b, h)
	VPAND(mask.AsX(), h, h)
	// (v ^ 8) - 8 sign-extends a nibble.
	VPXOR(eight.AsX(), l, l)
	VPSUBB(eight.AsX(), l, l)
	VPXOR(eight.AsX(), h, h)
	VPSUBB(eight.AsX(), h, h)
	VPUNPCKLBW(h, l, lo)
	VPUNPCKHBW(h, l, hi)
}

// dotI4F32 is the exact int4 kernel: nibbles sign-extended and widened to
// f32, each block's sum scaled once.
func dotI4F32() {
	TEXT("dotI4F32AVX2", NOSPLIT, "func(q *byte, x *float32, sc *float32, nb, block int) float32")
	Pragma("noescape")
	Doc("dotI4F32AVX2 returns Σ_b sc[b] Σ_i w[b*block+i]*x[b*block+i] over nb blocks of int4 weights w packed two per byte (element 0 in the low nibble), block a multiple of 32.")
	q, x, sc := Load(Param("q"), GP64()), Load(Param("x"), GP64()), Load(Param("sc"), GP64())
	nb, block := Load(Param("nb"), GP64()), Load(Param("block"), GP64())
	mask, eight := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(8, eight)
	acc := YMM()
	VXORPS(acc, acc, acc)
	Label("i4f32block")
	TESTQ(nb, nb)
	JZ(LabelRef("i4f32done"))
	b0, b1 := YMM(), YMM()
	VXORPS(b0, b0, b0)
	VXORPS(b1, b1, b1)
	k := GP64()
	MOVQ(block, k)
	Label("i4f32loop32")
	CMPQ(k, Imm(32))
	JL(LabelRef("i4f32next"))
	lo, hi := XMM(), XMM()
	unpackI4(Mem{Base: q}, mask, eight, lo, hi)
	for h, v := range []VecVirtual{lo, hi} {
		for p := range 2 {
			src := v
			if p == 1 {
				src = XMM()
				VPSHUFD(Imm(0xee), v, src)
			}
			t := YMM()
			VPMOVSXBD(src, t)
			VCVTDQ2PS(t, t)
			VFMADD231PS(Mem{Base: x, Disp: 64*h + 32*p}, t, []VecVirtual{b0, b1}[p])
		}
	}
	ADDQ(Imm(16), q)
	ADDQ(Imm(128), x)
	SUBQ(Imm(32), k)
	JMP(LabelRef("i4f32loop32"))
	Label("i4f32next")
	VADDPS(b1, b0, b0)
	s := YMM()
	VBROADCASTSS(Mem{Base: sc}, s)
	VFMADD231PS(b0, s, acc)
	ADDQ(Imm(4), sc)
	DECQ(nb)
	JMP(LabelRef("i4f32block"))
	Label("i4f32done")
	hsum(acc)
	VZEROUPPER()
	Store(acc.AsX(), ReturnIndex(0))
	RET()
}

// halfScale broadcasts the binary16 value at m into y as f32.
func halfScale(m Mem, y VecVirtual) {
	r := GP32()
	MOVWLZX(m, r)
	VMOVD(r, y.AsX())
	VCVTPH2PS(y.AsX(), y.AsX())
	VBROADCASTSS(y.AsX(), y)
}

// signedDot adds to acc the 32-element integer dot product of the signed
// bytes w and x, scaled by d: |w| (unsigned) times x with w's sign
// (VPMADDUBSW cannot overflow: 2*128*127 < 2^15), pairs summed to int32 by
// VPMADDWD with ones, converted, multiplied and added.
func signedDot(w, x, ones, d, acc VecVirtual) {
	u, s := YMM(), YMM()
	VPABSB(w, u)
	VPSIGNB(w, x, s)
	VPMADDUBSW(s, u, u)
	VPMADDWD(ones, u, u)
	VCVTDQ2PS(u, u)
	VFMADD231PS(u, d, acc)
}

// dynamic emits the common frame of the dynamic-range kernels: ng weight
// groups of per 32-element blocks, one binary16 weight scale per group,
// one f32 activation scale per block; body adds one block to acc.
func dynamic(name string, wStep int, body func(w, x Register, d, acc VecVirtual)) {
	w, ws := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	x, xd := Load(Param("x"), GP64()), Load(Param("xd"), GP64())
	ng, per := Load(Param("ng"), GP64()), Load(Param("per"), GP64())
	acc := YMM()
	VXORPS(acc, acc, acc)
	dw := YMM()
	Label(name + "group")
	TESTQ(ng, ng)
	JZ(LabelRef(name + "done"))
	halfScale(Mem{Base: ws}, dw)
	k := GP64()
	MOVQ(per, k)
	Label(name + "block")
	d := YMM()
	VMULPS(Mem{Base: xd}, dw, d) // lane 0 only matters before the broadcast
	VBROADCASTSS(d.AsX(), d)
	body(w, x, d, acc)
	ADDQ(Imm(uint64(wStep)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	DECQ(k)
	JNZ(LabelRef(name + "block"))
	ADDQ(Imm(2), ws)
	DECQ(ng)
	JMP(LabelRef(name + "group"))
	Label(name + "done")
	hsum(acc)
	VZEROUPPER()
	Store(acc.AsX(), ReturnIndex(0))
	RET()
}

func dotQ8Q8() {
	TEXT("dotQ8Q8AVX2", NOSPLIT, "func(w *int8, ws *uint16, x *int8, xd *float32, ng, per int) float32")
	Pragma("noescape")
	Doc("dotQ8Q8AVX2 returns Σ_g ws[g] Σ_{j<per} xd[b] Σ_{i<32} w[32b+i]*x[32b+i] (b = g*per+j) over ng groups of per blocks: int8 weights with binary16 scales times int8 activations with f32 block scales. per >= 1.")
	ones := YMM()
	broadcastW(1, ones)
	dynamic("q8q8", 32, func(w, x Register, d, acc VecVirtual) {
		wv, xv := YMM(), YMM()
		VMOVDQU(Mem{Base: w}, wv)
		VMOVDQU(Mem{Base: x}, xv)
		signedDot(wv, xv, ones, d, acc)
	})
}

func dotQ4Q8() {
	TEXT("dotQ4Q8AVX2", NOSPLIT, "func(w *byte, ws *uint16, x *int8, xd *float32, ng, per int) float32")
	Pragma("noescape")
	Doc("dotQ4Q8AVX2 is dotQ8Q8AVX2 for int4 weights (two per byte, element 0 in the low nibble); each block of x must be stored evens first (x[0], x[2], ..., x[30], x[1], x[3], ..., x[31]) so that the low nibbles meet the first half.")
	ones, mask, eight := YMM(), YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x0f, mask)
	broadcastB(8, eight)
	dynamic("q4q8", 16, func(w, x Register, d, acc VecVirtual) {
		wv, xv := YMM(), YMM()
		nib4(Mem{Base: w}, mask, eight, wv)
		VMOVDQU(Mem{Base: x}, xv)
		signedDot(wv, xv, ones, d, acc)
	})
}

// nib4 loads 16 bytes of int4 pairs into y as 32 signed bytes: the low
// nibbles (even elements) in the low half, the high nibbles in the high half.
func nib4(m Mem, mask, eight, y VecVirtual) {
	b, h := XMM(), XMM()
	VMOVDQU(m, b)
	VPSRLW(Imm(4), b, h)
	VINSERTI128(Imm(1), h, b.AsY(), y)
	VPAND(mask, y, y)
	VPXOR(eight, y, y)
	VPSUBB(eight, y, y)
}

// dotQ8Q8x4 is the prefill form of dotQ8Q8: one weight row against four
// token rows, |w| computed once per block for the four.
func dotQ8Q8x4() {
	dynamicX4("dotQ8Q8", "q8q8", "*int8", 32, func() func(m Mem, wv VecVirtual) {
		return func(m Mem, wv VecVirtual) { VMOVDQU(m, wv) }
	})
}

// dotQ4Q8x4 is the prefill form of dotQ4Q8: one weight row against four
// token rows, each weight block unpacked once for four products.
func dotQ4Q8x4() {
	dynamicX4("dotQ4Q8", "q4q8", "*byte", 16, func() func(m Mem, wv VecVirtual) {
		mask, eight := YMM(), YMM()
		broadcastB(0x0f, mask)
		broadcastB(8, eight)
		return func(m Mem, wv VecVirtual) { nib4(m, mask, eight, wv) }
	})
}

// dynamicX4 emits name+"x4AVX2", the four-token form of the dynamic-range
// kernel name+"AVX2" (dynamic): each weight block loaded once (by the
// function weights returns, after setting up what it needs) and its |w|
// taken once for the four token rows; wStep is the weight bytes of a
// block, tag prefixes the labels.
func dynamicX4(name, tag, wType string, wStep int, weights func() func(m Mem, wv VecVirtual)) {
	TEXT(name+"x4AVX2", NOSPLIT, "func(w "+wType+", ws *uint16, x *int8, xd *float32, ng, per, xstride, dstride int, out *float32)")
	Pragma("noescape")
	Doc(name + "x4AVX2 sets out[j] to " + name + "AVX2 of the weights with token row j (x + j*xstride, xd + j*dstride) for j < 4.")
	w, ws := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	x, xd := Load(Param("x"), GP64()), Load(Param("xd"), GP64())
	ng, per := Load(Param("ng"), GP64()), Load(Param("per"), GP64())
	xs, ds := Load(Param("xstride"), GP64()), Load(Param("dstride"), GP64())
	SHLQ(Imm(2), ds)
	ones := YMM()
	broadcastW(1, ones)
	load := weights()
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	dw := YMM()
	Label(tag + "x4group")
	TESTQ(ng, ng)
	JZ(LabelRef(tag + "x4done"))
	halfScale(Mem{Base: ws}, dw)
	k := GP64()
	MOVQ(per, k)
	Label(tag + "x4block")
	wv, u := YMM(), YMM()
	load(Mem{Base: w}, wv)
	VPABSB(wv, u)
	xp, dp := GP64(), GP64()
	MOVQ(x, xp)
	MOVQ(xd, dp)
	for j := range 4 {
		if j > 0 {
			ADDQ(xs, xp)
			ADDQ(ds, dp)
		}
		s, d := YMM(), YMM()
		VMOVDQU(Mem{Base: xp}, s)
		VPSIGNB(wv, s, s)
		VPMADDUBSW(s, u, s)
		VPMADDWD(ones, s, s)
		VCVTDQ2PS(s, s)
		VMULPS(Mem{Base: dp}, dw, d)
		VBROADCASTSS(d.AsX(), d)
		VFMADD231PS(s, d, acc[j])
	}
	ADDQ(Imm(uint64(wStep)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	DECQ(k)
	JNZ(LabelRef(tag + "x4block"))
	ADDQ(Imm(2), ws)
	DECQ(ng)
	JMP(LabelRef(tag + "x4group"))
	Label(tag + "x4done")
	out := Load(Param("out"), GP64())
	for j := range 4 {
		hsum(acc[j])
		VMOVSS(acc[j].AsX(), Mem{Base: out, Disp: 4 * j})
	}
	VZEROUPPER()
	RET()
}

// weightedSum is attention's value sum: out = Σ_i w[i] * row i of v, rows
// stride elements apart, each column chunk's sums held in registers over
// all rows.
func weightedSum(name string, size int, doc string, load func(m Mem, y VecVirtual)) {
	typ := "float32"
	if size == 2 {
		typ = "uint16"
	}
	TEXT(name, NOSPLIT, "func(out *float32, v *"+typ+", stride int, w *float32, n, d int)")
	Pragma("noescape")
	Doc(name + " sets out[j] = Σ_{i<n} w[i]*v[i*stride+j] for j < d (d a multiple of 8, n >= 1) over " + doc)
	out, v := Load(Param("out"), GP64()), Load(Param("v"), GP64())
	stride, w := Load(Param("stride"), GP64()), Load(Param("w"), GP64())
	n, d := Load(Param("n"), GP64()), Load(Param("d"), GP64())
	if size == 4 {
		SHLQ(Imm(2), stride)
	} else {
		SHLQ(Imm(1), stride)
	}
	// Columns in chunks of 32 while they last, then of 8.
	for _, c := range []struct {
		cols int
		tag  string
	}{{32, "32"}, {8, "8"}} {
		nacc := c.cols / 8
		Label(name + "chunk" + c.tag)
		CMPQ(d, Imm(uint64(c.cols)))
		JL(LabelRef(name + "after" + c.tag))
		acc := make([]VecVirtual, nacc)
		for a := range acc {
			acc[a] = YMM()
			VXORPS(acc[a], acc[a], acc[a])
		}
		p, wp, i := GP64(), GP64(), GP64()
		MOVQ(v, p)
		MOVQ(w, wp)
		MOVQ(n, i)
		Label(name + "row" + c.tag)
		b := YMM()
		VBROADCASTSS(Mem{Base: wp}, b)
		for a := range acc {
			t := YMM()
			load(Mem{Base: p, Disp: 8 * size * a}, t)
			VFMADD231PS(t, b, acc[a])
		}
		ADDQ(stride, p)
		ADDQ(Imm(4), wp)
		DECQ(i)
		JNZ(LabelRef(name + "row" + c.tag))
		for a := range acc {
			VMOVUPS(acc[a], Mem{Base: out, Disp: 32 * a})
		}
		ADDQ(Imm(uint64(4*c.cols)), out)
		ADDQ(Imm(uint64(size*c.cols)), v)
		SUBQ(Imm(uint64(c.cols)), d)
		JMP(LabelRef(name + "chunk" + c.tag))
		Label(name + "after" + c.tag)
	}
	VZEROUPPER()
	RET()
}

// blockScaled emits the decode kernels for one weight scale per 32-element
// block (per = 1, GGUF Q8_0 / Q4_0): eight blocks per iteration, their eight
// combined scales (weight half times activation scale) converted and
// multiplied as one vector and kept on the stack, so each block reads its
// scale with one broadcast load; two accumulators alternate so the FMA
// latency chain does not bound the loop. wStep is the weight bytes of a
// block; body adds block j (its weights at w+j*wStep, activations at
// x+32j) times the scale d to acc.
// blockPrefetch is how far ahead (bytes of weights) blockScaled
// prefetches.
const blockPrefetch = 2048

func blockScaled(name string, wStep int, rows bool, body func(w, x Register, j int, d, acc VecVirtual)) {
	w, ws := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	x0, xd0 := Load(Param("x"), GP64()), Load(Param("xd"), GP64())
	nb0 := Load(Param("nb"), GP64())
	var nrows, out, wsRow, wsStride Register
	if rows {
		nrows, out = Load(Param("rows"), GP64()), Load(Param("out"), GP64())
		wsStride = Load(Param("wsstride"), GP64())
		wsRow = GP64()
		MOVQ(ws, wsRow)
	}
	scales := AllocLocal(32)
	x, xd, nb := x0, xd0, nb0
	if rows {
		x, xd, nb = GP64(), GP64(), GP64()
	}
	acc := [2]VecVirtual{YMM(), YMM()}
	// With rows, each row restarts at the activations, the weights of the
	// next row follow those of the last (w runs on) and its scales are
	// wsstride bytes further (0: every row shares them).
	Label(name + "row")
	if rows {
		TESTQ(nrows, nrows)
		JZ(LabelRef(name + "end"))
		MOVQ(x0, x)
		MOVQ(xd0, xd)
		MOVQ(nb0, nb)
		MOVQ(wsRow, ws)
		ADDQ(wsStride, wsRow)
	}
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	Label(name + "eight")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "tail"))
	// Weights and scales some way ahead, for the memory to stream ahead
	// of the hardware prefetcher (decode reads every row once).
	for off := 0; off < 8*wStep; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: blockPrefetch + off})
	}
	PREFETCHT0(Mem{Base: ws, Disp: blockPrefetch / wStep * 2})
	sv := YMM()
	VCVTPH2PS(Mem{Base: ws}, sv)
	VMULPS(Mem{Base: xd}, sv, sv)
	VMOVUPS(sv, scales)
	for j := range 8 {
		d := YMM()
		VBROADCASTSS(scales.Offset(4*j), d)
		body(w, x, j, d, acc[j%2])
	}
	ADDQ(U32(uint32(8*wStep)), w)
	ADDQ(U32(256), x)
	ADDQ(Imm(32), xd)
	ADDQ(Imm(16), ws)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "eight"))
	Label(name + "tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "done"))
	dw, d := YMM(), YMM()
	halfScale(Mem{Base: ws}, dw)
	VMULPS(Mem{Base: xd}, dw, d) // lane 0 only matters before the broadcast
	VBROADCASTSS(d.AsX(), d)
	body(w, x, 0, d, acc[0])
	ADDQ(Imm(uint64(wStep)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	ADDQ(Imm(2), ws)
	DECQ(nb)
	JMP(LabelRef(name + "tail"))
	Label(name + "done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0])
	if !rows {
		VZEROUPPER()
		Store(acc[0].AsX(), ReturnIndex(0))
		RET()
		return
	}
	VMOVSS(acc[0].AsX(), Mem{Base: out})
	ADDQ(Imm(4), out)
	DECQ(nrows)
	JMP(LabelRef(name + "row"))
	Label(name + "end")
	VZEROUPPER()
	RET()
}

func dotQ8Q8Blocks(rows bool) {
	if rows {
		TEXT("dotQ8Q8BlocksRowsAVX2", NOSPLIT, "func(w *int8, ws *uint16, x *int8, xd *float32, nb, rows int, out *float32, wsstride int)")
		Pragma("noescape")
		Doc("dotQ8Q8BlocksRowsAVX2 sets out[i] = dotQ8Q8BlocksAVX2 of weight row i for i < rows, the rows consecutive in w, row i's scales at ws + i*wsstride bytes.")
	} else {
		TEXT("dotQ8Q8BlocksAVX2", NOSPLIT, "func(w *int8, ws *uint16, x *int8, xd *float32, nb int) float32")
		Pragma("noescape")
		Doc("dotQ8Q8BlocksAVX2 is dotQ8Q8AVX2 with per = 1 and ng = nb: one binary16 weight scale per 32-element block.")
	}
	ones := YMM()
	broadcastW(1, ones)
	name := "q8b"
	if rows {
		name = "q8r"
	}
	blockScaled(name, 32, rows, func(w, x Register, j int, d, acc VecVirtual) {
		wv, u, s := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: 32 * j}, wv)
		VPABSB(wv, u)
		VMOVDQU(Mem{Base: x, Disp: 32 * j}, s)
		VPSIGNB(wv, s, s)
		VPMADDUBSW(s, u, u)
		VPMADDWD(ones, u, u)
		VCVTDQ2PS(u, u)
		VFMADD231PS(u, d, acc)
	})
}

func dotQ4Q8Blocks(rows bool) {
	if rows {
		TEXT("dotQ4Q8BlocksRowsAVX2", NOSPLIT, "func(w *byte, ws *uint16, x *int8, xd *float32, nb, rows int, out *float32, wsstride int)")
		Pragma("noescape")
		Doc("dotQ4Q8BlocksRowsAVX2 sets out[i] = dotQ4Q8BlocksAVX2 of weight row i for i < rows, the rows consecutive in w, row i's scales at ws + i*wsstride bytes.")
	} else {
		TEXT("dotQ4Q8BlocksAVX2", NOSPLIT, "func(w *byte, ws *uint16, x *int8, xd *float32, nb int) float32")
		Pragma("noescape")
		Doc("dotQ4Q8BlocksAVX2 is dotQ4Q8AVX2 with per = 1 and ng = nb. Each nibble n becomes u = n XOR 8 (0..15, the value plus 8), multiplied unsigned by x with VPMADDUBSW, and 8*x is subtracted from the pair sums.")
	}
	ones, mask, eight := YMM(), YMM(), YMM()
	broadcastW(1, ones)
	broadcastB(0x0f, mask)
	broadcastB(8, eight)
	name := "q4b"
	if rows {
		name = "q4r"
	}
	blockScaled(name, 16, rows, func(w, x Register, j int, d, acc VecVirtual) {
		b, h, u, p, c := XMM(), XMM(), YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: w, Disp: 16 * j}, b)
		VPSRLW(Imm(4), b, h)
		VINSERTI128(Imm(1), h, b.AsY(), u)
		VPAND(mask, u, u)
		VPXOR(eight, u, u)
		VPMADDUBSW(Mem{Base: x, Disp: 32 * j}, u, p)
		VPMADDUBSW(Mem{Base: x, Disp: 32 * j}, eight, c)
		VPSUBW(c, p, p)
		VPMADDWD(ones, p, p)
		VCVTDQ2PS(p, p)
		VFMADD231PS(p, d, acc)
	})
}

// blockScaledX4 is blockScaled for the prefill forms: one weight row
// against four token rows (x + j*xstride, xd + j*dstride). Per eight
// blocks the weight scales are converted once and multiplied by each
// token's eight activation scales into a 4x8 table on the stack; per
// block, load decodes the weights into w and abs into |w| once for the
// four tokens.
func blockScaledX4(name string, wStep int, load func(w Register, j int, wv, u VecVirtual)) {
	w, ws := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	x, xd := Load(Param("x"), GP64()), Load(Param("xd"), GP64())
	nb := Load(Param("nb"), GP64())
	xs, ds := Load(Param("xstride"), GP64()), Load(Param("dstride"), GP64())
	SHLQ(Imm(2), ds)
	ones := YMM()
	broadcastW(1, ones)
	scales := AllocLocal(4 * 32)
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, r := range acc {
		VXORPS(r, r, r)
	}
	block := func(j int, scale func(t int, d VecVirtual)) {
		wv, u := YMM(), YMM()
		load(w, j, wv, u)
		xp := GP64()
		MOVQ(x, xp)
		for t := range 4 {
			if t > 0 {
				ADDQ(xs, xp)
			}
			s, d := YMM(), YMM()
			VMOVDQU(Mem{Base: xp, Disp: 32 * j}, s)
			VPSIGNB(wv, s, s)
			VPMADDUBSW(s, u, s)
			VPMADDWD(ones, s, s)
			VCVTDQ2PS(s, s)
			scale(t, d)
			VFMADD231PS(s, d, acc[t])
		}
	}
	Label(name + "eight")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "tail"))
	wsv := YMM()
	VCVTPH2PS(Mem{Base: ws}, wsv)
	dp := GP64()
	MOVQ(xd, dp)
	for t := range 4 {
		if t > 0 {
			ADDQ(ds, dp)
		}
		sv := YMM()
		VMULPS(Mem{Base: dp}, wsv, sv)
		VMOVUPS(sv, scales.Offset(32*t))
	}
	for j := range 8 {
		block(j, func(t int, d VecVirtual) { VBROADCASTSS(scales.Offset(32*t+4*j), d) })
	}
	ADDQ(U32(uint32(8*wStep)), w)
	ADDQ(U32(256), x)
	ADDQ(Imm(32), xd)
	ADDQ(Imm(16), ws)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "eight"))
	Label(name + "tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "done"))
	dw := YMM()
	halfScale(Mem{Base: ws}, dw)
	tp := GP64()
	MOVQ(xd, tp)
	block(0, func(t int, d VecVirtual) {
		if t > 0 {
			ADDQ(ds, tp)
		}
		VMULPS(Mem{Base: tp}, dw, d)
		VBROADCASTSS(d.AsX(), d)
	})
	ADDQ(Imm(uint64(wStep)), w)
	ADDQ(Imm(32), x)
	ADDQ(Imm(4), xd)
	ADDQ(Imm(2), ws)
	DECQ(nb)
	JMP(LabelRef(name + "tail"))
	Label(name + "done")
	out := Load(Param("out"), GP64())
	for t := range 4 {
		hsum(acc[t])
		VMOVSS(acc[t].AsX(), Mem{Base: out, Disp: 4 * t})
	}
	VZEROUPPER()
	RET()
}

func dotQ8Q8x4Blocks() {
	TEXT("dotQ8Q8x4BlocksAVX2", NOSPLIT, "func(w *int8, ws *uint16, x *int8, xd *float32, nb, xstride, dstride int, out *float32)")
	Pragma("noescape")
	Doc("dotQ8Q8x4BlocksAVX2 is dotQ8Q8x4AVX2 with per = 1 and ng = nb.")
	blockScaledX4("q8x4b", 32, func(w Register, j int, wv, u VecVirtual) {
		VMOVDQU(Mem{Base: w, Disp: 32 * j}, wv)
		VPABSB(wv, u)
	})
}

func dotQ4Q8x4Blocks() {
	TEXT("dotQ4Q8x4BlocksAVX2", NOSPLIT, "func(w *byte, ws *uint16, x *int8, xd *float32, nb, xstride, dstride int, out *float32)")
	Pragma("noescape")
	Doc("dotQ4Q8x4BlocksAVX2 is dotQ4Q8x4AVX2 with per = 1 and ng = nb.")
	mask, eight := YMM(), YMM()
	broadcastB(0x0f, mask)
	broadcastB(8, eight)
	blockScaledX4("q4x4b", 16, func(w Register, j int, wv, u VecVirtual) {
		nib4(Mem{Base: w, Disp: 16 * j}, mask, eight, wv)
		VPABSB(wv, u)
	})
}

// The constants of simd.Exp (exp.go), each repeated in eight lanes.
var expConsts = []float64{
	-87.0, 88.3, 1.44269504088896341, 0.693359375, -2.12194440e-4,
	1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
	1, math.Inf(1),
}

const (
	cLo = iota
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

var expTable Mem

// expConst returns the vector of constant c.
func expConst(c int) Mem {
	if expTable.Symbol.Name == "" {
		expTable = GLOBL("expconsts", RODATA|NOPTR)
		for i, v := range expConsts {
			for l := range 8 {
				DATA(32*i+4*l, U32(math.Float32bits(float32(v))))
			}
		}
	}
	return expTable.Offset(32 * c)
}

// expVec emits y = simd.Exp(x) lane by lane, with the same f32 operations
// in the same order, so the bits agree with the Go form.
func expVec(x, y VecVirtual) {
	c, n, r, t, p := YMM(), YMM(), YMM(), YMM(), YMM()
	VMAXPS(expConst(cLo), x, c) // NaN lanes are fixed at the end
	VMINPS(expConst(cHi), c, c)
	VMULPS(expConst(cLog2e), c, n)
	VROUNDPS(Imm(0), n, n) // to nearest even
	VMULPS(expConst(cLn2Hi), n, t)
	VSUBPS(t, c, r)
	VMULPS(expConst(cLn2Lo), n, t)
	VSUBPS(t, r, r)
	VMULPS(expConst(cP0), r, p)
	for _, k := range []int{cP1, cP2, cP3, cP4} {
		VADDPS(expConst(k), p, p)
		VMULPS(r, p, p)
	}
	VADDPS(expConst(cP5), p, p)
	VMULPS(r, r, t)
	VMULPS(t, p, p)
	VADDPS(r, p, p)
	VADDPS(expConst(cOne), p, y)
	VCVTPS2DQ(n, n) // n is integral: exact
	VPSLLD(Imm(23), n, n)
	VPADDD(n, y, y)
	// x < lo: 0; x > hi: +Inf; NaN: x.
	VCMPPS(Imm(0x11), expConst(cLo), x, t) // LT_OQ
	VANDNPS(y, t, y)
	VCMPPS(Imm(0x1e), expConst(cHi), x, t) // GT_OQ
	VBLENDVPS(t, expConst(cInf), y, y)
	VCMPPS(Imm(3), x, x, t) // UNORD_Q
	VBLENDVPS(t, x, y, y)
}

// elementwise emits a loop over n floats (a multiple of 8), 8 per
// iteration: body reads lanes at offset off of its inputs and stores out.
func elementwise(name string, out, n Register, ins []Register, body func(in []Mem, o Mem)) {
	Label(name + "loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "done"))
	ms := make([]Mem, len(ins))
	for i, r := range ins {
		ms[i] = Mem{Base: r}
	}
	body(ms, Mem{Base: out})
	ADDQ(Imm(32), out)
	for _, r := range ins {
		ADDQ(Imm(32), r)
	}
	SUBQ(Imm(8), n)
	JMP(LabelRef(name + "loop"))
	Label(name + "done")
	VZEROUPPER()
	RET()
}

func expSub() {
	TEXT("expSubF32AVX2", NOSPLIT, "func(out, in *float32, sub float32, n int)")
	Pragma("noescape")
	Doc("expSubF32AVX2 sets out[i] = Exp(in[i] - sub) for i < n (a multiple of 8).")
	out, in := Load(Param("out"), GP64()), Load(Param("in"), GP64())
	n := Load(Param("n"), GP64())
	sub := YMM()
	VBROADCASTSS(Load(Param("sub"), XMM()), sub)
	elementwise("exps", out, n, []Register{in}, func(m []Mem, o Mem) {
		x, y := YMM(), YMM()
		VMOVUPS(m[0], x)
		VSUBPS(sub, x, x)
		expVec(x, y)
		VMOVUPS(y, o)
	})
}

func swiglu() {
	TEXT("swigluF32AVX2", NOSPLIT, "func(out, gate, up *float32, n int)")
	Pragma("noescape")
	Doc("swigluF32AVX2 sets out[i] = gate[i] / (1 + Exp(-gate[i])) * up[i] for i < n (a multiple of 8).")
	out, g, u := Load(Param("out"), GP64()), Load(Param("gate"), GP64()), Load(Param("up"), GP64())
	n := Load(Param("n"), GP64())
	sign := YMM()
	broadcastD(0x80000000, sign)
	elementwise("swiglu", out, n, []Register{g, u}, func(m []Mem, o Mem) {
		x, e, y := YMM(), YMM(), YMM()
		VMOVUPS(m[0], x)
		VXORPS(sign, x, e)
		expVec(e, y)
		VADDPS(expConst(cOne), y, y)
		VDIVPS(y, x, y)
		VMULPS(m[1], y, y)
		VMOVUPS(y, o)
	})
}

// decayRank1 is the delta rule's state update: every row i of a matrix
// decays by gamma and gains k[i] times delta, in the Go form's two
// products and one sum (no FMA), so that it gives the same bits.
func decayRank1() {
	TEXT("decayRank1F32AVX2", NOSPLIT, "func(s, k, delta *float32, gamma float32, rows, d int)")
	Pragma("noescape")
	Doc("decayRank1F32AVX2 sets s[i*d+j] = gamma*s[i*d+j] + k[i]*delta[j] for i < rows, j < d (d a multiple of 8, rows >= 1).")
	sp, kp, dp := Load(Param("s"), GP64()), Load(Param("k"), GP64()), Load(Param("delta"), GP64())
	rows, d := Load(Param("rows"), GP64()), Load(Param("d"), GP64())
	g := YMM()
	VBROADCASTSS(Load(Param("gamma"), XMM()), g)
	Label("decayRow")
	kb := YMM()
	VBROADCASTSS(Mem{Base: kp}, kb)
	j, q := GP64(), GP64()
	MOVQ(d, j)
	MOVQ(dp, q)
	Label("decayCol")
	r, x := YMM(), YMM()
	VMULPS(Mem{Base: sp}, g, r)
	VMULPS(Mem{Base: q}, kb, x)
	VADDPS(x, r, r)
	VMOVUPS(r, Mem{Base: sp})
	ADDQ(Imm(32), sp)
	ADDQ(Imm(32), q)
	SUBQ(Imm(8), j)
	JNZ(LabelRef("decayCol"))
	ADDQ(Imm(4), kp)
	DECQ(rows)
	JNZ(LabelRef("decayRow"))
	VZEROUPPER()
	RET()
}

// broadcastD sets every 32-bit lane of y to v.
func broadcastD(v uint32, y VecVirtual) {
	r := GP32()
	MOVL(U32(v), r)
	VMOVD(r, y.AsX())
	VPBROADCASTD(y.AsX(), y)
}
