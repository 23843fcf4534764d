package tensors

import (
	"bytes"
	"errors"
	"testing"
)

func TestFromF32(t *testing.T) {
	vals := []float32{1, -2, 0.5, 65504, 0x1p-24, 3.140625}
	for _, tc := range []struct {
		dt   DType
		want []byte // little-endian encoding written from the format definitions
	}{
		{F32, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x3f, 0, 0xe0, 0x7f, 0x47, 0, 0, 0x80, 0x33, 0, 0, 0x49, 0x40}},
		{F16, []byte{0, 0x3c, 0, 0xc0, 0, 0x38, 0xff, 0x7b, 1, 0, 0x48, 0x42}},
		{BF16, []byte{0x80, 0x3f, 0, 0xc0, 0, 0x3f, 0x80, 0x47, 0x80, 0x33, 0x49, 0x40}},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			ts, err := FromF32("x", []int{2, 3}, vals, tc.dt)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ts.Data, tc.want) {
				t.Fatalf("data % x, want % x", ts.Data, tc.want)
			}
			if err := ts.Check(); err != nil {
				t.Fatal(err)
			}
			got, err := ts.Float32()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				// 65504 is not a bfloat16 value: 8 mantissa bits round it to 65536.
				want := v
				if tc.dt == BF16 && v == 65504 {
					want = 65536
				}
				if got[i] != want {
					t.Errorf("[%d] = %g, want %g", i, got[i], want)
				}
			}
			row := make([]float32, 3)
			if err := ts.RowFloat32(1, row); err != nil {
				t.Fatal(err)
			}
			if row[0] != got[3] || row[2] != got[5] {
				t.Errorf("row 1 = %v, want %v", row, got[3:])
			}
		})
	}
}

func TestFromF32Errors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		n     int
		dt    DType
		want  error
	}{
		{"count", []int{2, 3}, 5, F32, ErrShape},
		{"negative", []int{-2, -3}, 6, F32, ErrShape},
		{"int8", []int{6}, 6, I8, ErrDType},
		{"int32", []int{6}, 6, I32, ErrDType},
		{"overflow", []int{1 << 30, 1 << 30}, 0, F16, ErrShape},
	} {
		if _, err := FromF32(tc.name, tc.shape, make([]float32, tc.n), tc.dt); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestFromI32(t *testing.T) {
	ts, err := FromI32("ids", []int{3}, []int32{-1, 0, 1 << 24})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}; !bytes.Equal(ts.Data, want) {
		t.Fatalf("data % x, want % x", ts.Data, want)
	}
	got, err := ts.Float32()
	if err != nil || got[0] != -1 || got[2] != 1<<24 {
		t.Fatalf("Float32 = %v, %v", got, err)
	}
}

// Hand-packed quantized tensors, decoded by the definitions in tensor.go:
// value = q * scale, int4 low nibble first, two's complement.
func TestDequantizeHandPacked(t *testing.T) {
	f16s := func(v ...float32) *Tensor {
		s, _ := FromF32("s", []int{len(v)}, v, F16)
		return s
	}
	for _, tc := range []struct {
		name string
		t    *Tensor
		want []float32
	}{
		{"int8 per row", &Tensor{DType: I8, Shape: []int{2, 2}, Data: []byte{0x7f, 0x81, 0x80, 0x02},
			Scales: f16s(0.5, 2)}, []float32{63.5, -63.5, -256, 4}},
		{"int4 per row", &Tensor{DType: I4, Shape: []int{1, 4}, Data: []byte{0x8f, 0x71},
			Scales: f16s(0.25)}, []float32{-0.25, -2, 0.25, 1.75}},
		{"int4 blocks", &Tensor{DType: I4, Shape: []int{1, 4}, Data: []byte{0x21, 0xe3},
			Scales: &Tensor{DType: F32, Shape: []int{1, 2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0x20, 0x41}}},
			[]float32{1, 2, 30, -20}},
		{"zero scale", &Tensor{DType: I8, Shape: []int{3}, Data: []byte{5, 6, 7}, Scales: f16s(0)}, []float32{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.t.Float32()
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestRowFloat32Errors(t *testing.T) {
	ts, _ := FromF32("x", []int{2, 3}, make([]float32, 6), F32)
	for _, tc := range []struct {
		r, n int
	}{{-1, 3}, {2, 3}, {0, 2}, {0, 4}} {
		if err := ts.RowFloat32(tc.r, make([]float32, tc.n)); !errors.Is(err, ErrShape) {
			t.Errorf("row %d into %d: %v", tc.r, tc.n, err)
		}
	}
	bad := &Tensor{DType: F32, Shape: []int{2, 3}, Data: make([]byte, 23)}
	if _, err := bad.Float32(); !errors.Is(err, ErrShape) {
		t.Errorf("short data: %v", err)
	}
	if err := bad.RowFloat32(0, make([]float32, 3)); !errors.Is(err, ErrShape) {
		t.Errorf("short data row: %v", err)
	}
}
