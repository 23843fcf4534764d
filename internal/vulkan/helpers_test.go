//go:build cgo

package vulkan

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

// openTest opens the default device, or a device whose buffers go through
// the staging path even on unified memory when staging is set.
func openTest(t testing.TB, staging bool) *Device {
	t.Helper()
	d, err := openDevice(context.Background(), -1, staging)
	gputest.NoDevice(t, "vulkan", err)
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// memoryModes runs fn on a mapped device and on a staging device.
func memoryModes(t *testing.T, fn func(t *testing.T, d *Device)) {
	for _, staging := range []bool{false, true} {
		name := "mapped"
		if staging {
			name = "staging"
		}
		t.Run(name, func(t *testing.T) { fn(t, openTest(t, staging)) })
	}
}

// testKernel loads a committed test shader (see generate.go).
func testKernel(t testing.TB, d *Device, name string, bindings ...shaders.BindingKind) gpu.Kernel {
	t.Helper()
	spv, err := os.ReadFile(filepath.Join("testdata", name+".spv"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := d.NewKernel(shaders.KernelSpec{Name: name, SPIRV: spv, Bindings: bindings})
	if err != nil {
		t.Fatalf("NewKernel(%s): %v", name, err)
	}
	t.Cleanup(k.Release)
	return k
}

func addKernel(t testing.TB, d *Device) gpu.Kernel {
	return testKernel(t, d, "add", shaders.Uniform, shaders.StorageRW)
}

func newBuffer(t testing.TB, d *Device, size int64) gpu.Buffer {
	t.Helper()
	b, err := d.NewBuffer(size)
	if err != nil {
		t.Fatalf("NewBuffer(%d): %v", size, err)
	}
	t.Cleanup(b.Release)
	return b
}

// words encodes u32 values little-endian, the layout shaders see.
func words(vs ...uint32) []byte {
	out := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	return out
}

func readU32(t testing.TB, d *Device, b gpu.Buffer, off int64, n int) []uint32 {
	t.Helper()
	raw := make([]byte, 4*n)
	if err := d.Read(b, off, raw); err != nil {
		t.Fatalf("Read: %v", err)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return out
}

// params builds the add kernel's uniform buffer {n, add}.
func params(t testing.TB, d *Device, n, add uint32) gpu.Buffer {
	t.Helper()
	b := newBuffer(t, d, 16)
	if err := d.Write(b, 0, words(n, add)); err != nil {
		t.Fatal(err)
	}
	return b
}

// record builds a finished command list with fn.
func record(t testing.TB, d *Device, fn func(c gpu.Commands) error) gpu.Commands {
	t.Helper()
	c, err := d.NewCommands()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if err := fn(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	return c
}

func groups(n int) int { return (n + 63) / 64 }
