package hf

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

func TestAddOne(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dtype tensors.DType
		data  []byte
		want  []float32
	}{
		// f16 0x3800 = 0.5, 0xb400 = -0.25, 0x0000 = 0
		{"f16", tensors.F16, []byte{0x00, 0x38, 0x00, 0xb4, 0x00, 0x00}, []float32{1.5, 0.75, 1}},
		// bf16 0x3f80 = 1.0, 0xbf00 = -0.5
		{"bf16", tensors.BF16, []byte{0x80, 0x3f, 0x00, 0xbf}, []float32{2, 0.5}},
		// f32 0x3e800000 = 0.25
		{"f32", tensors.F32, []byte{0, 0, 0x80, 0x3e}, []float32{1.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &tensors.Tensor{Name: "n", DType: tc.dtype, Shape: []int{len(tc.want)}, Data: tc.data}
			out, err := addOne(in)
			if err != nil {
				t.Fatal(err)
			}
			if out.DType != tensors.F32 || out.Check() != nil {
				t.Fatalf("out %s %v", out.DType, out.Check())
			}
			for i, w := range tc.want {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(out.Data[4*i:])); got != w {
					t.Errorf("[%d] = %v, want %v", i, got, w)
				}
			}
		})
	}
	if _, err := addOne(&tensors.Tensor{Name: "n", DType: tensors.I32, Shape: []int{1}, Data: make([]byte, 4)}); err == nil {
		t.Error("int32 norm accepted")
	}
}
