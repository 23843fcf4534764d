//go:build cgo

package vulkan

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// TestF16Kernel runs a shader with 16-bit storage and f16 arithmetic, the
// features Open enables through the features chain. Inputs are multiples of
// 1/8 below 64 and the scale is 0.5, so every f16 result is exact.
func TestF16Kernel(t *testing.T) {
	d := openTest(t, false)
	if info := d.DeviceInfo(); !info.ShaderFloat16 || !info.Storage16Bit {
		t.Skip("device lacks f16 arithmetic or 16-bit storage")
	}
	k := testKernel(t, d, "half", shaders.Uniform, shaders.StorageRead, shaders.StorageRW)
	const n = 101 // odd: the last half shares a word with padding
	in := make([]byte, 2*n)
	want := make([]float32, n)
	for i := range n {
		x := float32(i%97)/8 - 6
		binary.LittleEndian.PutUint16(in[2*i:], tensors.F16Bits(x))
		want[i] = x*0.5 + x
	}
	p := newBuffer(t, d, 16)
	if err := d.Write(p, 0, words(n, math.Float32bits(0.5))); err != nil {
		t.Fatal(err)
	}
	src, dst := newBuffer(t, d, 2*n), newBuffer(t, d, 2*n)
	if err := d.Write(src, 0, in); err != nil {
		t.Fatal(err)
	}
	c := record(t, d, func(c gpu.Commands) error {
		return c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: src}, {Buf: dst}}, groups(n), 1, 1)
	})
	if err := d.Submit(c); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 2*n)
	if err := d.Read(dst, 0, out); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got := tensors.F16Float(binary.LittleEndian.Uint16(out[2*i:])); got != want[i] {
			t.Fatalf("dst[%d] = %v, want %v", i, got, want[i])
		}
	}
}
