package tensors

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randomMatrix fills rows x cols with values of varying magnitude per row,
// with row zeroRow all zero to exercise the zero-scale rule.
func randomMatrix(rng *rand.Rand, rows, cols, zeroRow int) []float32 {
	data := make([]float32, rows*cols)
	for r := range rows {
		if r == zeroRow {
			continue
		}
		mag := float32(math.Pow(10, rng.Float64()*6-4))
		for c := range cols {
			data[r*cols+c] = float32(rng.NormFloat64()) * mag
		}
	}
	return data
}

func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 5, 256
	data := randomMatrix(rng, rows, cols, 2)
	data[cols+7] = 0x1p-140 // subnormal-only values elsewhere do not matter; keep one
	for _, dt := range []DType{I8, I4} {
		for _, block := range []int{0, 32, 64, 128} {
			for _, st := range []DType{F32, F16} {
				t.Run(fmt.Sprintf("%s/block%d/%s", dt, block, st), func(t *testing.T) {
					q, err := Quantize("w", []int{rows, cols}, data, dt, block, st)
					if err != nil {
						t.Fatal(err)
					}
					if err := q.Check(); err != nil {
						t.Fatal(err)
					}
					wantBlock := block
					if block == 0 {
						wantBlock = cols
					}
					if q.BlockSize() != wantBlock || q.Scales.DType != st || q.Scales.Name != "w_quantized_scale" {
						t.Fatalf("block %d scales %s %q", q.BlockSize(), q.Scales.DType, q.Scales.Name)
					}
					if got := len(q.Data); got != rows*cols*dt.Bits()/8 {
						t.Fatalf("%d data bytes", got)
					}
					deq, err := q.Float32()
					if err != nil {
						t.Fatal(err)
					}
					scales, err := q.Scales.Float32()
					if err != nil {
						t.Fatal(err)
					}
					qmax := float32(127)
					if dt == I4 {
						qmax = 7
					}
					for g, s := range scales {
						vals := data[g*wantBlock : (g+1)*wantBlock]
						var maxabs float32
						for _, v := range vals {
							maxabs = max(maxabs, float32(math.Abs(float64(v))))
						}
						// The stored scale is maxabs/qmax, rounded up by at most
						// one unit of the scale type.
						rel := float32(1e-6)
						if st == F16 {
							rel = 1.0 / 1024
						}
						if maxabs == 0 && s != 0 || s*qmax < maxabs*(1-1e-6) || (maxabs > 1e-3 && s*qmax > maxabs*(1+rel)) {
							t.Fatalf("group %d: scale %g for maxabs %g", g, s, maxabs)
						}
						for i, v := range vals {
							d := deq[g*wantBlock+i]
							if err := math.Abs(float64(v - d)); err > float64(s)/2*(1+1e-6) {
								t.Fatalf("group %d elem %d: %g -> %g, error %g > scale/2 = %g", g, i, v, d, err, s/2)
							}
						}
					}
					row := make([]float32, cols)
					for r := range rows {
						if err := q.RowFloat32(r, row); err != nil {
							t.Fatal(err)
						}
						for c, v := range row {
							if v != deq[r*cols+c] {
								t.Fatalf("row %d col %d: %g vs %g", r, c, v, deq[r*cols+c])
							}
						}
					}
				})
			}
		}
	}
}

// Values on the quantization grid survive exactly; the extremes use +-qmax.
func TestQuantizeExactGrid(t *testing.T) {
	for _, tc := range []struct {
		dt   DType
		in   []float32
		want []byte
	}{
		{I8, []float32{127, -127, 0, 1, -64}, []byte{127, 0x81, 0, 1, 0xc0}},
		{I4, []float32{7, -7, 0, 1, -3, 2}, []byte{0x97, 0x10, 0x2d}},
	} {
		q, err := Quantize("g", []int{1, len(tc.in)}, tc.in, tc.dt, 0, F16)
		if err != nil {
			t.Fatal(err)
		}
		if string(q.Data) != string(tc.want) {
			t.Errorf("%s: % x, want % x", tc.dt, q.Data, tc.want)
		}
		if s, _ := q.Scales.Float32(); s[0] != 1 {
			t.Errorf("%s: scale %g, want 1", tc.dt, s[0])
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		n     int
		dt    DType
		block int
		st    DType
		want  error
	}{
		{"odd int4 row", []int{2, 3}, 6, I4, 0, F16, ErrShape},
		{"odd int4 block", []int{1, 6}, 6, I4, 3, F16, ErrShape},
		{"block not dividing", []int{2, 48}, 96, I8, 32, F32, ErrShape},
		{"block too big", []int{2, 32}, 64, I8, 64, F32, ErrShape},
		{"negative block", []int{2, 32}, 64, I8, -32, F32, ErrShape},
		{"count", []int{2, 32}, 63, I8, 0, F32, ErrShape},
		{"empty", []int{0, 32}, 0, I8, 0, F32, ErrShape},
		{"f16 target", []int{2, 32}, 64, F16, 0, F32, ErrDType},
		{"bf16 scales", []int{2, 32}, 64, I8, 0, BF16, ErrDType},
	} {
		if _, err := Quantize(tc.name, tc.shape, make([]float32, tc.n), tc.dt, tc.block, tc.st); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		if _, err := Quantize("bad", []int{2}, []float32{1, v}, I8, 0, F32); !errors.Is(err, ErrRange) {
			t.Errorf("%g: %v, want ErrRange", v, err)
		}
	}
	if _, err := Quantize("huge", []int{2}, []float32{1e9, 1}, I8, 0, F16); !errors.Is(err, ErrRange) {
		t.Errorf("f16 scale overflow: %v, want ErrRange", err)
	}
}
