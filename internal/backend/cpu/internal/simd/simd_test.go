package simd

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/x448/float16"
)

// The parity tests run every implementation the CPU supports against the
// pure-Go reference over odd lengths and every start offset (alignment) of
// the inputs within a vector. Float kernels may sum in another order, so
// they must agree within a bound relative to Σ|a_i x_i|; the integer part
// of the dynamic kernels must agree exactly.

func rngFor(t testing.TB) *rand.Rand { return rand.New(rand.NewPCG(7, uint64(len(t.Name())))) }

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// within reports whether got is within a few rounding errors of want for
// a sum of n products whose magnitudes add up to mag.
func within(got, want float32, n int, mag float64) bool {
	return math.Abs(float64(got)-float64(want)) <= 1e-6*float64(n+8)*mag+1e-30
}

var lengths = []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 129, 255, 257, 1000}

func asm(t *testing.T) []*Impl {
	t.Helper()
	ks := Impls()[1:]
	if len(ks) == 0 {
		t.Logf("no assembly implementation for this CPU; only the pure-Go kernels run")
	}
	return ks
}

func TestImplsCoverCPU(t *testing.T) {
	names := []string{}
	for _, k := range Impls() {
		names = append(names, k.Name)
	}
	t.Logf("implementations on this CPU: %v (best %s)", names, Best().Name)
	if Impls()[0] != Generic {
		t.Fatal("the pure-Go implementation must come first")
	}
}

func TestFloatParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range asm(t) {
		for _, n := range lengths {
			for off := range 8 {
				a, x := randF32(r, n+off)[off:], randF32(r, n+off+3)[off:]
				h, bf := make([]uint16, n+off)[off:], make([]uint16, n+off)[off:]
				for i, v := range a {
					h[i] = float16.Fromfloat32(v).Bits()
					bf[i] = uint16(math.Float32bits(v) >> 16)
				}
				var mag, magH, magB float64
				for i := range a {
					mag += math.Abs(float64(a[i] * x[i]))
					magH += math.Abs(float64(F16ToF32[h[i]] * x[i]))
					magB += math.Abs(float64(math.Float32frombits(uint32(bf[i])<<16) * x[i]))
				}
				if got, want := k.DotF32(a, x), Generic.DotF32(a, x); !within(got, want, n, mag) {
					t.Errorf("%s DotF32 n=%d off=%d: %g, want %g", k.Name, n, off, got, want)
				}
				if got, want := k.DotF16(h, x), Generic.DotF16(h, x); !within(got, want, n, magH) {
					t.Errorf("%s DotF16 n=%d off=%d: %g, want %g", k.Name, n, off, got, want)
				}
				if got, want := k.DotBF16(bf, x), Generic.DotBF16(bf, x); !within(got, want, n, magB) {
					t.Errorf("%s DotBF16 n=%d off=%d: %g, want %g", k.Name, n, off, got, want)
				}
				// Four token rows with a stride that is not a multiple of 8.
				stride := n + 5
				xs := randF32(r, 4*stride+off)[off:]
				var got, want [4]float32
				k.DotF32x4(a, xs, stride, &got)
				Generic.DotF32x4(a, xs, stride, &want)
				for j := range 4 {
					var m float64
					for i := range a {
						m += math.Abs(float64(a[i] * xs[j*stride+i]))
					}
					if !within(got[j], want[j], n, m) || !within(got[j], Generic.DotF32(a, xs[j*stride:]), n, m) {
						t.Errorf("%s DotF32x4 n=%d off=%d row %d: %g, want %g", k.Name, n, off, j, got[j], want[j])
					}
				}
			}
		}
	}
}

// TestWeightedSumParity covers attention's value sums over row counts,
// column counts (head sizes) and alignments.
func TestWeightedSumParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range asm(t) {
		for _, d := range []int{1, 7, 8, 24, 32, 40, 64, 80, 96, 128, 130} {
			for _, rows := range []int{0, 1, 2, 5, 33} {
				for off := range 8 {
					stride := d + 3
					v := randF32(r, rows*stride+off)[off:]
					h := make([]uint16, len(v))
					for i, x := range v {
						h[i] = float16.Fromfloat32(x).Bits()
					}
					w := randF32(r, rows)
					got, want := make([]float32, d), make([]float32, d)
					for _, half := range []bool{false, true} {
						for i := range got {
							got[i], want[i] = 99, 99 // must be overwritten
						}
						if half {
							k.WeightedSumF16(got, h, stride, w)
							Generic.WeightedSumF16(want, h, stride, w)
						} else {
							k.WeightedSum(got, v, stride, w)
							Generic.WeightedSum(want, v, stride, w)
						}
						for j := range d {
							var mag float64
							for i := range rows {
								mag += math.Abs(float64(w[i] * v[i*stride+j]))
							}
							if !within(got[j], want[j], rows, mag+0.01*float64(rows)) {
								t.Fatalf("%s WeightedSum(f16=%v) d=%d rows=%d off=%d col %d: %g, want %g", k.Name, half, d, rows, off, j, got[j], want[j])
							}
						}
					}
				}
			}
		}
	}
}

func randI8(r *rand.Rand, n int) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = int8(r.IntN(256) - 128)
	}
	return v
}

func randBytes(r *rand.Rand, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(r.IntN(256))
	}
	return v
}

func TestBlockParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range asm(t) {
		for _, block := range []int{2, 8, 24, 32, 64, 96, 128} {
			for _, nb := range []int{1, 2, 3, 7} {
				for off := range 8 {
					n := nb * block
					sc := randF32(r, nb+off)[off:]
					x := randF32(r, n+off)[off:]
					q8 := randI8(r, n+off)[off:]
					q4 := randBytes(r, n/2+off)[off:]
					var m8, m4 float64
					for i := range n {
						s := math.Abs(float64(sc[i/block]))
						m8 += s * math.Abs(float64(q8[i])*float64(x[i]))
						m4 += s * 8 * math.Abs(float64(x[i]))
					}
					if got, want := k.DotI8(q8, sc, block, x), Generic.DotI8(q8, sc, block, x); !within(got, want, n, m8) {
						t.Errorf("%s DotI8 block=%d nb=%d off=%d: %g, want %g", k.Name, block, nb, off, got, want)
					}
					if got, want := k.DotI4(q4, sc, block, x), Generic.DotI4(q4, sc, block, x); !within(got, want, n, m4) {
						t.Errorf("%s DotI4 block=%d nb=%d off=%d: %g, want %g", k.Name, block, nb, off, got, want)
					}
				}
			}
		}
	}
}

// TestDynamicParity checks the integer dot products exactly (unit scales
// keep every sum an integer below 2^24) and the scaled ones within
// rounding, for every grouping of blocks under one weight scale.
func TestDynamicParity(t *testing.T) {
	r := rngFor(t)
	one := float16.Fromfloat32(1).Bits()
	for _, k := range asm(t) {
		for _, per := range []int{1, 2, 4, 5} {
			for _, ng := range []int{1, 2, 3, 9, 17} {
				for off := range 8 {
					n := ng * per * QBlock
					w8, x := randI8(r, n+off)[off:], randI8(r, 4*(n+QBlock)+off)[off:]
					for i := range x {
						x[i] = max(x[i], -127) // QuantizeQ8's range
					}
					w4 := randBytes(r, n/2+off)[off:]
					units, unitD := make([]uint16, ng), make([]float32, 4*(n+QBlock)/QBlock)
					for i := range units {
						units[i] = one
					}
					for i := range unitD {
						unitD[i] = 1
					}
					if got, want := k.DotQ8(w8, units, per, x, unitD), Generic.DotQ8(w8, units, per, x, unitD); got != want {
						t.Errorf("%s DotQ8 per=%d ng=%d off=%d: %g, want exactly %g", k.Name, per, ng, off, got, want)
					}
					if got, want := k.DotQ4(w4, units, per, x, unitD), Generic.DotQ4(w4, units, per, x, unitD); got != want {
						t.Errorf("%s DotQ4 per=%d ng=%d off=%d: %g, want exactly %g", k.Name, per, ng, off, got, want)
					}
					ws := make([]uint16, ng)
					for i := range ws {
						ws[i] = float16.Fromfloat32(float32(r.Float64()*0.02 + 0.001)).Bits()
					}
					xd := make([]float32, 4*(n+QBlock)/QBlock)
					for i := range xd {
						xd[i] = float32(r.Float64() * 0.05)
					}
					mag := 127 * 128 * 0.02 * 0.05 * float64(n)
					if got, want := k.DotQ8(w8, ws, per, x, xd), Generic.DotQ8(w8, ws, per, x, xd); !within(got, want, n/QBlock, mag) {
						t.Errorf("%s DotQ8 scaled per=%d ng=%d off=%d: %g, want %g", k.Name, per, ng, off, got, want)
					}
					if got, want := k.DotQ4(w4, ws, per, x, xd), Generic.DotQ4(w4, ws, per, x, xd); !within(got, want, n/QBlock, mag) {
						t.Errorf("%s DotQ4 scaled per=%d ng=%d off=%d: %g, want %g", k.Name, per, ng, off, got, want)
					}
					// Four token rows, xstride = n + QBlock (the rows do not touch).
					var got, want [4]float32
					k.DotQ4x4(w4, units, per, x, unitD, n+QBlock, &got)
					Generic.DotQ4x4(w4, units, per, x, unitD, n+QBlock, &want)
					if got != want {
						t.Errorf("%s DotQ4x4 per=%d ng=%d off=%d: %v, want exactly %v", k.Name, per, ng, off, got, want)
					}
					k.DotQ8x4(w8, units, per, x, unitD, n+QBlock, &got)
					Generic.DotQ8x4(w8, units, per, x, unitD, n+QBlock, &want)
					if got != want || got[3] != Generic.DotQ8(w8, units, per, x[3*(n+QBlock):], unitD[3*(n+QBlock)/QBlock:]) {
						t.Errorf("%s DotQ8x4 per=%d ng=%d off=%d: %v, want exactly %v", k.Name, per, ng, off, got, want)
					}
				}
			}
		}
	}
}

// TestRowsParity checks the several-rows forms against one call per row
// (bit for bit: the same arithmetic in the same order) and against the
// pure-Go reference, with scales per row and shared by the rows.
func TestRowsParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, nb := range []int{1, 7, 8, 9, 24, 33} {
			for _, rows := range []int{1, 2, 5, 64} {
				for _, shared := range []bool{false, true} {
					for off := range 3 {
						n := nb * QBlock
						w8 := randI8(r, rows*n+off)[off:]
						w4 := randBytes(r, rows*n/2+off)[off:]
						x := randI8(r, n+off)[off:]
						for i := range x {
							x[i] = max(x[i], -127)
						}
						nws := rows * nb
						if shared {
							nws = nb
						}
						ws := make([]uint16, nws+off)[off:]
						for i := range ws {
							ws[i] = float16.Fromfloat32(float32(r.Float64()*0.02 + 0.001)).Bits()
						}
						xd := make([]float32, nb+off)[off:]
						for i := range xd {
							xd[i] = float32(r.Float64() * 0.05)
						}
						mag := 127 * 128 * 0.02 * 0.05 * float64(n)
						got8, got4 := make([]float32, rows), make([]float32, rows)
						k.DotQ8Rows(w8, ws, x, xd, got8)
						k.DotQ4Rows(w4, ws, x, xd, got4)
						for i := range rows {
							wsi := ws[:nb]
							if !shared {
								wsi = ws[i*nb : (i+1)*nb]
							}
							if want := k.DotQ8(w8[i*n:], wsi, 1, x, xd); got8[i] != want {
								t.Errorf("%s DotQ8Rows nb=%d rows=%d shared=%v off=%d row %d: %g, want exactly %g", k.Name, nb, rows, shared, off, i, got8[i], want)
							}
							if want := k.DotQ4(w4[i*n/2:], wsi, 1, x, xd); got4[i] != want {
								t.Errorf("%s DotQ4Rows nb=%d rows=%d shared=%v off=%d row %d: %g, want exactly %g", k.Name, nb, rows, shared, off, i, got4[i], want)
							}
							if want := Generic.DotQ4(w4[i*n/2:], wsi, 1, x, xd); !within(got4[i], want, nb, mag) {
								t.Errorf("%s DotQ4Rows nb=%d rows=%d row %d: %g, want %g (reference)", k.Name, nb, rows, i, got4[i], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestF32RowsParity: DotF32Rows gives DotF32's bits row by row.
func TestF32RowsParity(t *testing.T) {
	r := rngFor(t)
	for _, k := range Impls() {
		for _, n := range []int{0, 1, 7, 8, 24, 40, 64, 100, 768} {
			for _, rows := range []int{0, 1, 3, 64} {
				a, x := randF32(r, rows*n+1)[1:], randF32(r, n+3)[3:]
				got := make([]float32, rows)
				k.DotF32Rows(a, x, got)
				for i := range rows {
					if want := k.DotF32(a[i*n:(i+1)*n], x); got[i] != want {
						t.Errorf("%s DotF32Rows n=%d rows=%d row %d: %g, want exactly %g", k.Name, n, rows, i, got[i], want)
					}
				}
			}
		}
	}
}

// TestQ4Reference checks the pure-Go int4 kernels against a plain
// unpacking of the nibbles, so the reference itself can fail.
func TestQ4Reference(t *testing.T) {
	r := rngFor(t)
	w := randBytes(r, 16*3)
	x := randF32(r, 96)
	var want float64
	vals := make([]int32, 96)
	for i := range 96 {
		c := w[i/2]
		if i%2 == 1 {
			c >>= 4
		}
		v := int32(c & 15)
		if v >= 8 {
			v -= 16
		}
		vals[i] = v
		want += float64(v) * float64(x[i])
	}
	one := []float32{1, 1, 1}
	if got := Generic.DotI4(w, one, 32, x); math.Abs(float64(got)-want) > 1e-4 {
		t.Errorf("DotI4 = %g, want %g", got, want)
	}
	q, d := make([]int8, 96), make([]float32, 3)
	QuantizeQ8(q, d, x, true)
	var wantQ float64
	for b := range 3 {
		var s int32
		for i := range 16 {
			s += vals[32*b+2*i]*int32(q[32*b+i]) + vals[32*b+2*i+1]*int32(q[32*b+16+i])
		}
		wantQ += float64(d[b]) * float64(s)
	}
	h := float16.Fromfloat32(1).Bits()
	if got := Generic.DotQ4(w, []uint16{h, h, h}, 1, q, d); math.Abs(float64(got)-wantQ) > 1e-4 {
		t.Errorf("DotQ4 = %g, want %g", got, wantQ)
	}
	// Quantized activations approximate the float product.
	if got := Generic.DotQ4(w, []uint16{h, h, h}, 1, q, d); math.Abs(float64(got)-want) > 0.02*math.Abs(want)+0.5 {
		t.Errorf("DotQ4 of quantized activations = %g, far from %g", got, want)
	}
}

func TestQuantizeQ8(t *testing.T) {
	x := make([]float32, 64)
	for i := range 32 {
		x[i] = float32(i) - 15.5
	}
	x[5] = -31.75 // amax of block 0
	q, d := make([]int8, 64), make([]float32, 2)
	QuantizeQ8(q, d, x, false)
	if want := float16.Fromfloat32(31.75 / 127).Float32(); d[0] != want || d[1] != 0 {
		t.Fatalf("scales %v, want [%g 0]", d, want)
	}
	if q[5] != -127 || q[31] != int8(math.RoundToEven(15.5*127/31.75)) {
		t.Errorf("q[5]=%d q[31]=%d", q[5], q[31])
	}
	for i := 32; i < 64; i++ {
		if q[i] != 0 {
			t.Fatalf("zero block quantized to %d", q[i])
		}
	}
	qe := make([]int8, 64)
	QuantizeQ8(qe, d, x, true)
	for i := range 16 {
		if qe[i] != q[2*i] || qe[16+i] != q[2*i+1] {
			t.Fatalf("evensFirst order wrong at %d", i)
		}
	}
}

// TestGeneratedCurrent regenerates the assembly with avo and compares it
// with the committed files (the first line, which records the command's
// arguments, aside).
func TestGeneratedCurrent(t *testing.T) {
	checkGenerated(t, "gen", "amd64", dropLine)
}

// TestGeneratedARM64Current does the same for the arm64 kernels (genarm64
// writes no arguments into its files, so they must match exactly).
func TestGeneratedARM64Current(t *testing.T) {
	checkGenerated(t, "genarm64", "arm64", func(b []byte) []byte { return b })
}

// checkGenerated runs the generator ./GEN into a temporary folder and
// compares its dot_ARCH.s and dot_ARCH_stubs.go, through keep, with the
// committed ones.
func checkGenerated(t *testing.T, gen, arch string, keep func([]byte) []byte) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	dir := t.TempDir()
	asm, stubs := "dot_"+arch+".s", "dot_"+arch+"_stubs.go"
	cmd := exec.Command(goTool, "run", "./"+gen, "-out", filepath.Join(dir, asm), "-stubs", filepath.Join(dir, stubs), "-pkg", "simd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	for _, f := range []string{asm, stubs} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(keep(got), keep(want)) {
			t.Errorf("%s is not what %s writes: run go generate ./internal/backend/cpu/internal/simd", f, gen)
		}
	}
}

func dropLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// TestPackageUsesBest guards the start-up selection: the package-level
// functions must run the implementation Best names.
func TestPackageUsesBest(t *testing.T) {
	if best != Best() {
		t.Fatalf("package functions use %s, Best is %s", best.Name, Best().Name)
	}
}

// TestKernelsAllocateNothing: the wrappers keep their scratch (scale
// buffers, partial sums) on the stack, for every grouping of blocks.
func TestKernelsAllocateNothing(t *testing.T) {
	r := rngFor(t)
	const ng, per = 5, 8
	n := ng * per * QBlock
	w8, w4, x := randI8(r, n), randBytes(r, n/2), randI8(r, 4*n)
	ws, xd := make([]uint16, ng*per), randF32(r, 4*n/QBlock)
	a, xf := randF32(r, n), randF32(r, 4*n)
	out := new([4]float32)
	for _, k := range Impls() {
		for _, p := range []int{1, per} {
			wsp := ws[:len(ws)/p]
			if allocs := testing.AllocsPerRun(10, func() {
				k.DotQ8(w8, wsp, p, x, xd)
				k.DotQ4(w4, wsp, p, x, xd)
				k.DotQ8x4(w8, wsp, p, x, xd, n, out)
				k.DotQ4x4(w4, wsp, p, x, xd, n, out)
				k.DotF32(a, xf)
				k.DotF32x4(a, xf, n, out)
				k.WeightedSum(a[:64], xf, 64, a[:16])
			}); allocs != 0 {
				t.Errorf("%s per=%d: %v allocations per run, want 0", k.Name, p, allocs)
			}
		}
	}
}

// TestQuantizeQ8VectorBits: QuantizeQ8's vector passes (where the CPU has
// them) give the Go form's bits: random blocks of several magnitudes, ties
// to even (values at half steps), an all-zero block, a block of one value,
// tiny blocks whose inverse scale overflows, and more blocks than one
// batch of the passes (64).
func TestQuantizeQ8VectorBits(t *testing.T) {
	if best.quantQ8 == nil {
		t.Skipf("%s has no vector QuantizeQ8", best.Name)
	}
	r := rand.New(rand.NewPCG(11, 12))
	const nb = 150
	x := make([]float32, nb*QBlock)
	for b := range nb {
		scale := float32(math.Pow(10, float64(r.IntN(12)-6)))
		for i := range QBlock {
			x[b*QBlock+i] = float32(r.NormFloat64()) * scale
		}
	}
	for i := range QBlock {
		x[QBlock+i] = 0                                   // block 1: zeros
		x[2*QBlock+i] = float32(i%8) - 3.5                // block 2: halves (127/3.5 scaled)
		x[3*QBlock+i] = 127                               // block 3: one value
		x[4*QBlock+i] = float32(i) * 1e-45                // block 4: denormals, id overflows
		x[5*QBlock+i] = float32(i%3-1) * 3e-38            // block 5: id near the limit
		x[70*QBlock+i] = float32(int(i)-16) * (0.5 / 127) // block 70: exact half steps
	}
	q, d := make([]int8, len(x)), make([]float32, nb)
	QuantizeQ8(q, d, x, false)
	wq, wd := make([]int8, len(x)), make([]float32, nb)
	for b := range nb {
		quantizeQ8Block(wq[b*QBlock:], &wd[b], x[b*QBlock:], false)
	}
	for b := range nb {
		if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
			t.Fatalf("block %d: d = %g, want %g", b, d[b], wd[b])
		}
		for i := range QBlock {
			if q[b*QBlock+i] != wq[b*QBlock+i] {
				t.Fatalf("block %d: q[%d] = %d, want %d (x %g)", b, i, q[b*QBlock+i], wq[b*QBlock+i], x[b*QBlock+i])
			}
		}
	}
}
