//go:build cgo || js

package webgpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

func open(t testing.TB) *Device {
	t.Helper()
	d, err := OpenDevice(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	t.Cleanup(func() { d.Close() })
	gputest.CheckDriver(t, d.Info().Name, d.Info().Driver)
	return d
}

func TestOpenPicksVulkan(t *testing.T) {
	d := open(t)
	info, caps := d.Info(), d.Caps()
	if info.Backend != "webgpu" || info.Name == "" {
		t.Fatalf("info %+v", info)
	}
	// The adapter must be Vulkan: the GL fallback lacks what the kernels need.
	if d.adapter.GetInfo().BackendType.String() != "vulkan" {
		t.Fatalf("backend %s", d.adapter.GetInfo().BackendType)
	}
	if caps.MaxStorageBinding < 128<<20 || caps.MaxBufferSize < caps.MaxStorageBinding {
		t.Errorf("limits: binding %d buffer %d", caps.MaxStorageBinding, caps.MaxBufferSize)
	}
	ads, err := Adapters()
	if err != nil {
		t.Fatal(err)
	}
	usable := 0
	for _, a := range ads {
		if a.Usable {
			usable++
			if a.Limits["maxStorageBufferBindingSize"] == 0 {
				t.Errorf("%s: no limits", a.Name)
			}
		}
	}
	if usable == 0 {
		t.Errorf("Adapters lists no usable adapter: %+v", ads)
	}
}

func TestWriteRead(t *testing.T) {
	d := open(t)
	tests := []struct {
		name      string
		size, off int64
		n         int
	}{
		{"aligned", 64, 0, 64},
		{"unaligned start", 64, 3, 10},
		{"unaligned end", 63, 60, 3},
		{"odd size buffer", 7, 1, 5},
		{"one byte", 5, 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := d.NewBuffer(tc.size)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			data := make([]byte, tc.n)
			for i := range data {
				data[i] = byte(i*7 + 1)
			}
			if err := d.Write(b, tc.off, data); err != nil {
				t.Fatal(err)
			}
			all := make([]byte, tc.size)
			if err := d.Read(b, 0, all); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, tc.size) // zero-filled around the write
			copy(want[tc.off:], data)
			if !bytes.Equal(all, want) {
				t.Fatalf("read %v, want %v", all, want)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	d := open(t)
	b, err := d.NewBuffer(16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewBuffer(0); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("NewBuffer(0): %v", err)
	}
	if _, err := d.NewBuffer(1 << 62); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("huge NewBuffer: %v", err)
	}
	if err := d.Write(b, 12, make([]byte, 8)); err == nil {
		t.Error("write past the end accepted")
	}
	if err := d.Read(b, -1, make([]byte, 2)); err == nil {
		t.Error("negative read offset accepted")
	}
	k := mustKernel(t, d, "add")
	defer k.Release()
	cmds, _ := d.NewCommands()
	defer cmds.Release()
	if err := cmds.Dispatch(k, []gpu.Binding{{Buf: b}}, 1, 1, 1); err == nil {
		t.Error("wrong binding count accepted")
	}
	if err := cmds.Dispatch(k, []gpu.Binding{{Buf: b}, {Buf: b}, {Buf: b}, {Buf: b}, {Buf: b}}, 1, 1, 1); err == nil {
		t.Error("writable aliasing accepted")
	}
	if err := cmds.Copy(b, 0, b, 4, 4); err == nil {
		t.Error("copy within a buffer accepted")
	}
	if err := d.Submit(cmds); !errors.Is(err, ErrNotFinished) {
		t.Errorf("submit unfinished: %v", err)
	}
	if _, err := d.NewKernel(shaders.KernelSpec{Name: "broken", WGSL: "fn nope( {"}); err == nil {
		t.Error("broken WGSL compiled")
	}
	// A released buffer makes a recorded list fail to submit instead of aborting.
	c, d2 := mustBuf(t, d, 16), mustBuf(t, d, 16)
	cp, _ := d.NewCommands()
	defer cp.Release()
	if err := cp.Copy(c, 0, d2, 0, 16); err != nil {
		t.Fatal(err)
	}
	if err := cp.Finish(); err != nil {
		t.Fatal(err)
	}
	d2.Release()
	if err := d.Submit(cp); err == nil {
		t.Error("submit with a released buffer accepted")
	}
	if d.Caps().Timestamps {
		ts, _ := d.NewCommands()
		defer ts.Release()
		for _, slot := range []int{-1, timestampSlots} {
			if err := ts.Timestamp(slot); err == nil {
				t.Errorf("timestamp slot %d accepted", slot)
			}
		}
		for _, n := range []int{-1, timestampSlots + 1} {
			if _, err := d.ReadTimestamps(n); err == nil {
				t.Errorf("ReadTimestamps(%d) accepted", n)
			}
		}
	}
	b.Release()
	if err := d.Write(b, 0, []byte{1, 2, 3, 4}); err == nil {
		t.Error("write to a released buffer accepted")
	}
}

func mustBuf(t *testing.T, d *Device, n int64) gpu.Buffer {
	t.Helper()
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustKernel compiles the shaders package's kernel name on d; the caller
// releases it.
func mustKernel(t *testing.T, d *Device, name string) gpu.Kernel {
	t.Helper()
	spec, err := shaders.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := d.NewKernel(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDispatchReplay runs the add kernel from a list recorded once and
// submitted several times with new inputs, with timestamps around it.
func TestDispatchReplay(t *testing.T) {
	d := open(t)
	k := mustKernel(t, d, "add")
	defer k.Release()
	const cols, rows = 100, 3
	// elementwise.wgsl's uniform block, encoded from its Go type (f32
	// operands: the f16 flags 0).
	p, err := shaders.Encode(shaders.EltParams{Cols: cols, NRows: rows})
	if err != nil {
		t.Fatal(err)
	}
	params := mustBuf(t, d, int64(len(p)))
	step := mustBuf(t, d, 16)
	a, b, out := mustBuf(t, d, cols*rows*4), mustBuf(t, d, cols*rows*4), mustBuf(t, d, cols*rows*4)
	if err := d.Write(params, 0, p); err != nil {
		t.Fatal(err)
	}
	cmds, err := d.NewCommands()
	if err != nil {
		t.Fatal(err)
	}
	defer cmds.Release()
	ts := d.Caps().Timestamps
	if ts {
		if err := cmds.Timestamp(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmds.Dispatch(k, []gpu.Binding{{Buf: params}, {Buf: step}, {Buf: a}, {Buf: b}, {Buf: out}}, (cols+63)/64, rows, 1); err != nil {
		t.Fatal(err)
	}
	if ts {
		if err := cmds.Timestamp(1); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmds.Finish(); err != nil {
		t.Fatal(err)
	}
	for rep, T := range []uint32{3, 1, 2} {
		av, bv := make([]float32, cols*rows), make([]float32, cols*rows)
		for i := range av {
			av[i], bv[i] = float32(i*(rep+1)), float32(-2*i)+0.5
		}
		if err := d.Write(a, 0, gputest.F32Bytes(av)); err != nil {
			t.Fatal(err)
		}
		if err := d.Write(b, 0, gputest.F32Bytes(bv)); err != nil {
			t.Fatal(err)
		}
		if err := d.Write(out, 0, make([]byte, cols*rows*4)); err != nil {
			t.Fatal(err)
		}
		if err := d.Write(step, 0, []byte{0, 0, 0, 0, byte(T), 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if err := d.Submit(cmds); err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, cols*rows*4)
		if err := d.Read(out, 0, raw); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < cols*rows; i++ {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			want := float32(0) // rows >= T are untouched
			if i < int(T)*cols {
				want = av[i] + bv[i]
			}
			if got != want {
				t.Fatalf("rep %d T %d: out[%d] = %v, want %v", rep, T, i, got, want)
			}
		}
	}
	if ts {
		v, err := d.ReadTimestamps(2)
		if err != nil {
			t.Fatal(err)
		}
		if v[1] < v[0] {
			t.Errorf("timestamps go backwards: %v", v)
		}
	}
}

// TestDeviceEnv: GPURUN_DEVICE picks Open's adapter by a part of its name;
// a name no adapter has is an error, not a fallback.
func TestDeviceEnv(t *testing.T) {
	name := open(t).Info().Name
	t.Setenv(gpu.DeviceEnv, name[:min(len(name), 8)])
	d, err := OpenDevice(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Info().Name; got != name {
		t.Errorf("opened %q, want %q", got, name)
	}
	d.Close()
	t.Setenv(gpu.DeviceEnv, "no such adapter anywhere")
	if _, err := OpenDevice(context.Background()); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("err = %v, want ErrNoDevice", err)
	}
}
