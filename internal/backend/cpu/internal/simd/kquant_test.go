package simd

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/tensors"
	"github.com/x448/float16"
)

// kTypes pairs each KQuant with the tensors type whose blocks it reads.
var kTypes = []struct {
	t  KQuant
	dt tensors.DType
}{{Q4K, tensors.Q4K}, {Q5K, tensors.Q5K}, {Q6K, tensors.Q6K}, {Q2K, tensors.Q2K}, {Q3K, tensors.Q3K}, {IQ4XS, tensors.IQ4_XS}, {IQ3S, tensors.IQ3_S}, {IQ3XXS, tensors.IQ3_XXS}, {IQ2XXS, tensors.IQ2_XXS}}

// kScaleOffsets are the byte offsets of a block's f16 scales (d, dmin).
var kScaleOffsets = map[KQuant][]int{Q4K: {0, 2}, Q5K: {0, 2}, Q6K: {208}, Q2K: {80, 82}, Q3K: {108}, IQ4XS: {0}, IQ3S: {0}, IQ3XXS: {0}, IQ2XXS: {0}}

// kScaleKinds are the f16 super-block scales the tests draw from: ordinary
// ones of both signs, zero, the smallest subnormal and the largest finite.
var kScaleKinds = []func(r *rand.Rand) uint16{
	func(r *rand.Rand) uint16 { return float16.Fromfloat32(float32(r.Float64()*0.01 + 1e-4)).Bits() },
	func(r *rand.Rand) uint16 { return float16.Fromfloat32(-float32(r.Float64()*0.01 + 1e-4)).Bits() },
	func(*rand.Rand) uint16 { return 0 },
	func(*rand.Rand) uint16 { return 1 },
	func(*rand.Rand) uint16 { return 0x7bff },
	func(r *rand.Rand) uint16 { return float16.Fromfloat32(float32(r.Float64() * 4)).Bits() },
}

// randKBlocks returns nb random blocks of t: random bits everywhere except
// the f16 scales, drawn from kScaleKinds (extreme ones with probability
// extreme).
func randKBlocks(r *rand.Rand, t KQuant, nb int, extreme float64) []byte {
	b := randBytes(r, nb*t.BlockBytes())
	for i := range nb {
		for _, o := range kScaleOffsets[t] {
			k := 0
			if r.Float64() < extreme {
				k = r.IntN(len(kScaleKinds))
			}
			binary.LittleEndian.PutUint16(b[i*t.BlockBytes()+o:], kScaleKinds[k](r))
		}
	}
	return b
}

// randActs returns n activations: normal values, or with extreme set a mix
// of large, tiny, zero and constant runs.
func randActs(r *rand.Rand, n int, extreme bool) []float32 {
	x := randF32(r, n)
	if !extreme {
		return x
	}
	for i := range x {
		switch r.IntN(6) {
		case 0:
			x[i] *= 1e30
		case 1:
			x[i] *= 1e-30
		case 2:
			x[i] = 0
		case 3:
			x[i] = -1
		}
	}
	return x
}

// quantK quantizes x with QuantizeQ8K into new buffers.
func quantK(x []float32) ([]int8, []float32, []int16) {
	q, d, s := make([]int8, len(x)), make([]float32, len(x)/QK), make([]int16, len(x)/QKSum)
	QuantizeQ8K(q, d, s, x)
	return q, d, s
}

// TestQuantizeQ8K checks QuantizeQ8K's blocks against llama.cpp's Q8_K
// contract: the value of largest magnitude becomes -127, every q is x/d
// rounded to the nearest integer within [-127, 127], the sums are the sums
// of q, and an all-zero block is all zero.
func TestQuantizeQ8K(t *testing.T) {
	r := rngFor(t)
	for _, extreme := range []bool{false, true} {
		for _, nb := range []int{1, 2, 5} {
			x := randActs(r, nb*QK, extreme)
			if nb == 2 {
				clear(x[QK : 2*QK])
			}
			q, d, s := quantK(x)
			for b := range nb {
				xb, qb := x[b*QK:(b+1)*QK], q[b*QK:(b+1)*QK]
				im := 0
				for i, v := range xb {
					if math.Abs(float64(v)) > math.Abs(float64(xb[im])) {
						im = i
					}
				}
				if xb[im] == 0 {
					if d[b] != 0 || qb[im] != 0 {
						t.Errorf("zero block %d: d %g, q %d", b, d[b], qb[im])
					}
					continue
				}
				if qb[im] != -127 {
					t.Errorf("block %d: the largest value %g quantized to %d, want -127", b, xb[im], qb[im])
				}
				for i, v := range xb {
					exact := float64(v) / float64(d[b])
					if math.Abs(float64(qb[i])-exact) > 0.5+1e-4 || qb[i] < -127 {
						t.Errorf("block %d value %d: %g quantized to %d (x/d = %g)", b, i, v, qb[i], exact)
					}
				}
				for j := range QK / QKSum {
					var sum int
					for _, v := range qb[QKSum*j : QKSum*(j+1)] {
						sum += int(v)
					}
					if int(s[b*QK/QKSum+j]) != sum {
						t.Errorf("block %d sum %d: %d, want %d", b, j, s[b*QK/QKSum+j], sum)
					}
				}
			}
		}
	}
}

// TestKQuantReference checks the pure-Go kernels against the weights
// dequantized by tensors.DecodeBlocks (which TestMixDequantizationMatchesLlamaCpp
// holds to llama.cpp's own dequantization bit for bit) dotted in float64
// with the dequantized activations q*d.
func TestKQuantReference(t *testing.T) {
	r := rngFor(t)
	for _, kt := range kTypes {
		for _, nb := range []int{1, 3} {
			for trial := range 20 {
				extreme := trial%2 == 1
				w := randKBlocks(r, kt.t, nb, map[bool]float64{false: 0, true: 0.5}[extreme])
				x := randActs(r, nb*QK, extreme)
				q, d, s := quantK(x)
				wf := make([]float32, nb*QK)
				if err := tensors.DecodeBlocks(kt.dt, w, wf); err != nil {
					t.Fatal(err)
				}
				var want, mag float64
				for i, v := range wf {
					p := float64(v) * float64(q[i]) * float64(d[i/QK])
					want += p
					mag += math.Abs(p)
				}
				got := Generic.DotK(kt.t, w, q, d, s)
				if !(mag < math.MaxFloat32) {
					continue // extreme scales times extreme activations overflow float32
				}
				if math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
					t.Errorf("%s nb=%d trial %d: %g, want %g (Σ|w·x| %g)", kt.t, nb, trial, got, want, mag)
				}
			}
		}
	}
}

// TestKParity checks every implementation against the pure-Go kernels bit
// for bit (the integer sums are exact and the per-block float operations
// the same), one row, several rows and four token rows, at every alignment
// of weights and activations within a vector.
func TestKParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range asm(t) {
		for _, kt := range kTypes {
			for _, nb := range []int{1, 2, 3, 5} {
				for off := range 8 {
					t.Run(fmt.Sprintf("%s/%s/nb=%d/off=%d", k.Name, kt.t, nb, off), func(t *testing.T) {
						checkKParity(t, k, kt.t, r, nb, off, off%2 == 1)
					})
				}
			}
		}
	}
}

func checkKParity(t *testing.T, k *Impl, kt KQuant, r *rand.Rand, nb, off int, extreme bool) {
	const rows = 9 // two groups of the four-row kernels and one row more
	n := nb * QK
	ext := 0.0
	if extreme {
		ext = 0.3
	}
	w := randKBlocks(r, kt, rows*nb+1, ext)[off : off+rows*nb*kt.BlockBytes()]
	xs := n + QK // the four token rows do not touch
	q0, d, s := quantK(randActs(r, 4*xs+QK, extreme))
	q := make([]int8, len(q0)+off)[off:] // misaligned by off
	copy(q, q0)
	same := func(a, b float32) bool { return a == b || a != a && b != b }
	rb := nb * kt.BlockBytes()
	out := make([]float32, rows)
	k.DotKRows(kt, w, q, d[:nb], s, out)
	for i := range rows {
		want := Generic.DotK(kt, w[i*rb:], q, d[:nb], s)
		if got := k.DotK(kt, w[i*rb:], q, d[:nb], s); !same(got, want) {
			t.Errorf("DotK row %d: %g, want exactly %g", i, got, want)
		}
		if !same(out[i], want) {
			t.Errorf("DotKRows row %d: %g, want exactly %g", i, out[i], want)
		}
	}
	var got4 [4]float32
	k.DotKx4(kt, w[:rb], q, d, s, xs, &got4)
	for j := range 4 {
		o := j * xs
		if want := Generic.DotK(kt, w[:rb], q[o:], d[o/QK:o/QK+nb], s[o/QKSum:]); !same(got4[j], want) {
			t.Errorf("DotKx4 token %d: %g, want exactly %g", j, got4[j], want)
		}
	}
}

// FuzzDotK runs every implementation on arbitrary block bytes (NaN and
// infinite scales included) and activations: no panics, and the same bits
// as the pure-Go kernels.
func FuzzDotK(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3}, int64(1))
	f.Add(uint8(2), make([]byte, 2*210), int64(2))
	f.Add(uint8(4), []byte("\xff\xff\x7c\x00 any bytes at all"), int64(3))
	f.Fuzz(func(t *testing.T, typ uint8, blocks []byte, seed int64) {
		kt := KQuant(int(typ) % int(NumKQuant))
		nb := min(len(blocks)/kt.BlockBytes(), 4)
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		q, d, s := quantK(randActs(r, nb*QK, seed%2 == 0))
		w := blocks[:nb*kt.BlockBytes()]
		want := Generic.DotK(kt, w, q, d, s)
		for _, k := range Impls() {
			if got := k.DotK(kt, w, q, d, s); got != want && !(got != got && want != want) {
				t.Errorf("%s %s: %g, want exactly %g", k.Name, kt, got, want)
			}
		}
	})
}

// q32Types pairs each Q32 with the tensors type whose blocks it reads and
// its f16 scale offsets (d, m).
var q32Types = []struct {
	t      Q32
	dt     tensors.DType
	scales []int
}{{Q4_1, tensors.Q4_1, []int{0, 2}}, {Q5_0, tensors.Q5_0, []int{0}}, {Q5_1, tensors.Q5_1, []int{0, 2}}, {Q8_0, tensors.Q8_0, []int{0}}, {MXFP4, tensors.MXFP4, nil}, {IQ4_NL, tensors.IQ4_NL, []int{0}}}

// randQ32Blocks is randKBlocks for the 32-value types.
// MXFP4's exponent bytes are 2^-10 ... 2^-4 halves (weights up to about
// 0.75), or when extreme the edges of ggml_e8m0_to_fp32_half (subnormal
// for 0 and 1, 255 infinite with the largest codes) half the time and any
// byte at all the other half.
func randQ32Blocks(r *rand.Rand, t Q32, scales []int, nb int, extreme float64) []byte {
	b := randBytes(r, nb*t.BlockBytes())
	for i := range nb {
		if t == MXFP4 {
			e := &b[i*t.BlockBytes()]
			switch {
			case r.Float64() >= extreme:
				*e = byte(118 + r.IntN(7))
			case r.IntN(2) == 0:
				*e = []byte{0, 1, 2, 3, 254, 255}[r.IntN(6)]
			}
		}
		for _, o := range scales {
			k := 0
			if r.Float64() < extreme {
				k = r.IntN(len(kScaleKinds))
			}
			binary.LittleEndian.PutUint16(b[i*t.BlockBytes()+o:], kScaleKinds[k](r))
		}
	}
	return b
}

// quant32 quantizes x with QuantizeQ8 (natural order) into new buffers.
func quant32(x []float32) ([]int8, []float32) {
	q, d := make([]int8, len(x)), make([]float32, len(x)/QBlock)
	QuantizeQ8(q, d, x, false)
	return q, d
}

// TestQ32Reference is TestKQuantReference for Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4.
func TestQ32Reference(t *testing.T) {
	r := rngFor(t)
	for _, qt := range q32Types {
		for _, nb := range []int{1, 5} {
			for trial := range 20 {
				extreme := trial%2 == 1
				w := randQ32Blocks(r, qt.t, qt.scales, nb, map[bool]float64{false: 0, true: 0.5}[extreme])
				q, d := quant32(randActs(r, nb*QBlock, extreme))
				wf := make([]float32, nb*QBlock)
				if err := tensors.DecodeBlocks(qt.dt, w, wf); err != nil {
					t.Fatal(err)
				}
				var want, mag float64
				for i, v := range wf {
					p := float64(v) * float64(q[i]) * float64(d[i/QBlock])
					want += p
					mag += math.Abs(p)
				}
				got := Generic.DotQ32(qt.t, w, q, d)
				if !(mag < math.MaxFloat32) {
					continue
				}
				if math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
					t.Errorf("%s nb=%d trial %d: %g, want %g (Σ|w·x| %g)", qt.t, nb, trial, got, want, mag)
				}
			}
		}
	}
}

// TestQ32Parity is TestKParity for Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4.
func TestQ32Parity(t *testing.T) {
	r := rngFor(t)
	same := func(a, b float32) bool { return a == b || a != a && b != b }
	for _, k := range asm(t) {
		for _, qt := range q32Types {
			for _, nb := range []int{1, 2, 3, 8, 9} {
				for off := range 8 {
					const rows = 3
					bb := qt.t.BlockBytes()
					w := randQ32Blocks(r, qt.t, qt.scales, rows*nb+1, 0.3*float64(off%2))[off : off+rows*nb*bb]
					xs := nb*QBlock + QBlock
					q0, d := quant32(randActs(r, 4*xs, off%2 == 1))
					q := make([]int8, len(q0)+off)[off:]
					copy(q, q0)
					rb := nb * bb
					out := make([]float32, rows)
					k.DotQ32Rows(qt.t, w, q, d[:nb], out)
					// The Go form's bits, or (a kernel summing in
					// vector lanes) its value within rounding and the
					// bits of k's own one-row form.
					exact := k.Q32Exact(qt.t)
					check := func(what string, got float32, w []byte, q []int8, d []float32) {
						t.Helper()
						want := Generic.DotQ32(qt.t, w, q, d)
						if exact && !same(got, want) {
							t.Errorf("%s %s nb=%d off=%d %s: %g, want exactly %g", k.Name, qt.t, nb, off, what, got, want)
						}
						// (With infinite or NaN weights the sum
						// depends on the order: only the forms'
						// agreement below is checked.)
						if mag := q32Magnitude(qt.dt, w[:nb*bb], q, d); !exact && mag < math.MaxFloat32 && !withinQ32(got, want, nb, mag) {
							t.Errorf("%s %s nb=%d off=%d %s: %g, want %g within rounding", k.Name, qt.t, nb, off, what, got, want)
						}
						if one := k.DotQ32(qt.t, w, q, d); !same(got, one) {
							t.Errorf("%s %s nb=%d off=%d %s: %g, its DotQ32 %g", k.Name, qt.t, nb, off, what, got, one)
						}
					}
					for i := range rows {
						check(fmt.Sprintf("DotQ32Rows row %d", i), out[i], w[i*rb:], q, d[:nb])
					}
					var got4 [4]float32
					k.DotQ32x4(qt.t, w[:rb], q, d, xs, &got4)
					for j := range 4 {
						o := j * xs
						check(fmt.Sprintf("DotQ32x4 token %d", j), got4[j], w[:rb], q[o:], d[o/QBlock:o/QBlock+nb])
					}
				}
			}
		}
	}
}

// FuzzDotQ32 is FuzzDotK for Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4.
func FuzzDotQ32(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3}, int64(1))
	f.Add(uint8(1), make([]byte, 3*22), int64(2))
	f.Add(uint8(2), []byte("\xff\xff\x7c\x00\xff\xff\xff\xff any bytes at all"), int64(3))
	f.Add(uint8(3), make([]byte, 2*34), int64(4))
	f.Add(uint8(4), []byte("\x7f\x01\x23\x45\x67\x89\xab\xcd\xef\xfe\xdc\xba\x98\x76\x54\x32\x10\x00\x88\x88\x88\x88\x88\x88\x88\x88\x77\x77\x77\x77\x77\x77\x77\x77\xff\xff\xff"), int64(5))
	f.Fuzz(func(t *testing.T, typ uint8, blocks []byte, seed int64) {
		qt := Q32(int(typ) % int(NumQ32))
		nb := min(len(blocks)/qt.BlockBytes(), 9)
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		q, d := quant32(randActs(r, nb*QBlock, seed%2 == 0))
		w := blocks[:nb*qt.BlockBytes()]
		want := Generic.DotQ32(qt, w, q, d)
		for _, k := range Impls() {
			got := k.DotQ32(qt, w, q, d)
			if !k.Q32Exact(qt) {
				// Summed in vector lanes: within rounding, unless
				// the weights hold infinities or NaNs (whose sums
				// depend on the order).
				if mag := q32Magnitude(q32Types[qt].dt, w, q, d); mag < math.MaxFloat32 && !withinQ32(got, want, nb, mag) {
					t.Errorf("%s %s: %g, want %g within rounding", k.Name, qt, got, want)
				}
				continue
			}
			if got != want && !(got != got && want != want) {
				t.Errorf("%s %s: %g, want exactly %g", k.Name, qt, got, want)
			}
		}
	})
}

// TestQuantizeQ8KVectorBits: QuantizeQ8K's vector form (where the CPU has
// it) gives the Go block form's bits: blocks of several magnitudes, a zero
// block, a block whose largest magnitude appears twice with both signs
// (the first one sets the sign of the scale), ties, denormals whose
// inverse scale overflows.
func TestQuantizeQ8KVectorBits(t *testing.T) {
	if best.quantQ8K == nil {
		t.Skipf("%s has no vector QuantizeQ8K", best.Name)
	}
	r := rand.New(rand.NewPCG(13, 14))
	const nb = 40
	x := make([]float32, nb*QK)
	for b := range nb {
		scale := float32(math.Pow(10, float64(r.IntN(12)-6)))
		for i := range QK {
			x[b*QK+i] = float32(r.NormFloat64()) * scale
		}
	}
	for i := range QK {
		x[QK+i] = 0                             // block 1: zeros
		x[2*QK+i] = float32(i%16) - 7.5         // block 2: ties
		x[3*QK+i] = float32(i%5) * 1e-45        // block 3: denormals
		x[4*QK+i] = float32(i%7-3) * (1.0 / 64) // block 4: the largest, -3/64 and 3/64, first negative
	}
	x[5*QK+200], x[5*QK+9] = 1e3, -1e3 // block 5: the largest twice, the first one negative
	q, d, s := make([]int8, len(x)), make([]float32, nb), make([]int16, nb*QK/QKSum)
	QuantizeQ8K(q, d, s, x)
	wq, wd, ws := make([]int8, len(x)), make([]float32, nb), make([]int16, nb*QK/QKSum)
	for b := range nb {
		quantizeQ8KBlock(wq[b*QK:], &wd[b], ws[b*QK/QKSum:], x[b*QK:])
	}
	for b := range nb {
		if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
			t.Fatalf("block %d: d = %g, want %g", b, d[b], wd[b])
		}
		for i := range QK {
			if q[b*QK+i] != wq[b*QK+i] {
				t.Fatalf("block %d: q[%d] = %d, want %d", b, i, q[b*QK+i], wq[b*QK+i])
			}
		}
		for i := range QK / QKSum {
			if s[b*QK/QKSum+i] != ws[b*QK/QKSum+i] {
				t.Fatalf("block %d: sum %d = %d, want %d", b, i, s[b*QK/QKSum+i], ws[b*QK/QKSum+i])
			}
		}
	}
}

// q32Magnitude is Σ|w·x| over the blocks of w (type dt) against the
// quantized activations (q, d), in float64: the scale of the rounding
// error of a sum of those products in float32.
func q32Magnitude(dt tensors.DType, w []byte, q []int8, d []float32) float64 {
	wf := make([]float32, len(d)*QBlock)
	if err := tensors.DecodeBlocks(dt, w[:dt.ByteSize(len(wf))], wf); err != nil {
		panic(err)
	}
	var mag float64
	for i, v := range wf {
		mag += math.Abs(float64(v) * float64(q[i]) * float64(d[i/QBlock]))
	}
	return mag
}

// withinQ32 is within for a sum over nb blocks (NaN equals NaN).
func withinQ32(got, want float32, nb int, mag float64) bool {
	if got != got || want != want {
		return got != got && want != want
	}
	return within(got, want, nb*QBlock, mag)
}

// TestIQ4NLValues: the kernels' IQ4_NL table is the one tensors
// generated from llama.cpp's header.
func TestIQ4NLValues(t *testing.T) {
	if IQ4NLValues != tensors.IQ4NLValues() {
		t.Errorf("simd.IQ4NLValues %v, tensors' %v", IQ4NLValues, tensors.IQ4NLValues())
	}
}

// TestMXFP4Exponents: one-block MXFP4 products for every exponent byte (0
// and 1 give ggml_e8m0_to_fp32_half's subnormal scales, 255 2^127) in
// every implementation, against llama.cpp's formula
// float32(float32(dx*h)*Σ fp4[q]·x) with h = 2^(e-128) from math.Ldexp and
// the codes' values from tensors: exactly where Impl.Q32Exact, else
// within rounding (a few subnormal steps apart for tiny sums).
func TestMXFP4Exponents(t *testing.T) {
	r := rngFor(t)
	fp4 := tensors.MXFP4Values()
	for e := range 256 {
		blk := randBytes(r, MXFP4.BlockBytes())
		blk[0] = byte(e)
		q, d := quant32(randActs(r, QBlock, false))
		var sumi int32
		var mag float64
		for j, c := range blk[1:] {
			lo, hi := int32(fp4[c&15])*int32(q[j]), int32(fp4[c>>4])*int32(q[j+16])
			sumi += lo + hi
			mag += math.Abs(float64(lo)) + math.Abs(float64(hi))
		}
		h := float32(math.Ldexp(1, e-128))
		want := float32(float32(d[0]*h) * float32(sumi))
		mag *= float64(d[0]) * float64(h)
		for _, k := range Impls() {
			got := k.DotQ32(MXFP4, blk, q, d)
			if k.Q32Exact(MXFP4) {
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%s e=%d: %g, want exactly %g", k.Name, e, got, want)
				}
				continue
			}
			// Lane sums near the float32 limit overflow in their own order.
			if mag < math.MaxFloat32/16 && math.Abs(float64(got)-float64(want)) > 1e-6*40*mag+8*math.Ldexp(1, -149) {
				t.Errorf("%s e=%d: %g, want %g within rounding", k.Name, e, got, want)
			}
		}
	}
}

// TestMXFP4MatchesLlamaCpp: rows of 1 to 9 MXFP4 blocks against Q8_0
// activation blocks (f16 d, 32 int8), against llama.cpp's own
// ggml_vec_dot_mxfp4_q8_0_generic (testdata/mxfp4_dot.golden.json, written
// by scripts/mxfp4-golden.py; a fifth of the rows with extreme exponent
// bytes). llama.cpp's build fuses each block's "sumf += d*sumi" into an
// FMA where our forms round the product first (the C source's order), so
// every implementation is held within rounding; rows whose products reach
// the float32 limit (where fused and separate roundings overflow
// differently) are left out, and the rest must be most of them.
func TestMXFP4MatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "mxfp4_dot.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		LlamaCpp string `json:"llama_cpp"`
		Rows     []struct{ W, X, Dot string }
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	checked := 0
	for i, row := range g.Rows {
		w, xb, dot := unhex(row.W), unhex(row.X), unhex(row.Dot)
		nb := len(w) / 17
		if nb == 0 || len(w) != 17*nb || len(xb) != 34*nb || len(dot) != 4 {
			t.Fatalf("row %d: %d weight bytes, %d activation bytes", i, len(w), len(xb))
		}
		x, xd := make([]int8, 32*nb), make([]float32, nb)
		for b := range nb {
			xd[b] = float16.Frombits(binary.LittleEndian.Uint16(xb[34*b:])).Float32()
			for j := range 32 {
				x[32*b+j] = int8(xb[34*b+2+j])
			}
		}
		want := math.Float32frombits(binary.LittleEndian.Uint32(dot))
		if mag := q32Magnitude(tensors.MXFP4, w, x, xd); !(mag < math.MaxFloat32/16) {
			continue
		}
		checked++
		for _, k := range Impls() {
			// (The sum's magnitude: within 1e-6*(n+8) of Σ|w·x|.)
			if got := k.DotQ32(MXFP4, w, x, xd); !withinQ32(got, want, nb, q32Magnitude(tensors.MXFP4, w, x, xd)) {
				t.Errorf("%s row %d (%d blocks): %g, llama.cpp %s gives %g", k.Name, i, nb, got, g.LlamaCpp, want)
			}
		}
	}
	if checked < len(g.Rows)*3/4 {
		t.Errorf("%d of %d golden rows checked", checked, len(g.Rows))
	}
}
