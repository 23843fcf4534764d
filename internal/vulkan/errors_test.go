//go:build cgo

package vulkan

import (
	"errors"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

func TestInvalidUseIsAnError(t *testing.T) {
	d := openTest(t, false)
	k := addKernel(t, d)
	p := params(t, d, 4, 1)
	data := newBuffer(t, d, 64)
	align := int64(d.Caps().StorageOffsetAlign)

	newList := func(t *testing.T) gpu.Commands {
		c, err := d.NewCommands()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		return c
	}
	released := func(t *testing.T) gpu.Buffer {
		b, err := d.NewBuffer(64)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		return b
	}
	cases := []struct {
		name string
		want error
		run  func(t *testing.T) error
	}{
		{"negative buffer size", ErrInvalid, func(t *testing.T) error { _, err := d.NewBuffer(-1); return err }},
		{"buffer above max allocation", ErrTooLarge, func(t *testing.T) error { _, err := d.NewBuffer(d.Caps().MaxBufferSize + 1); return err }},
		{"write past end", ErrInvalid, func(t *testing.T) error { return d.Write(data, 60, make([]byte, 5)) }},
		{"read at negative offset", ErrInvalid, func(t *testing.T) error { return d.Read(data, -1, make([]byte, 1)) }},
		{"write released buffer", ErrReleased, func(t *testing.T) error { return d.Write(released(t), 0, []byte{1}) }},
		{"read released buffer", ErrReleased, func(t *testing.T) error { return d.Read(released(t), 0, []byte{1}) }},
		{"dispatch released buffer", ErrReleased, func(t *testing.T) error {
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: released(t)}}, 1, 1, 1)
		}},
		{"copy from released buffer", ErrReleased, func(t *testing.T) error { return newList(t).Copy(data, 0, released(t), 0, 4) }},
		{"submit list whose buffer was released", ErrReleased, func(t *testing.T) error {
			b := newBuffer(t, d, 64)
			c := newList(t)
			if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: b}}, 1, 1, 1); err != nil {
				return err
			}
			if err := c.Finish(); err != nil {
				return err
			}
			b.Release()
			return d.Submit(c)
		}},
		{"dispatch released kernel", ErrReleased, func(t *testing.T) error {
			k2 := addKernel(t, d)
			k2.Release()
			return newList(t).Dispatch(k2, []gpu.Binding{{Buf: p}, {Buf: data}}, 1, 1, 1)
		}},
		{"wrong binding count", ErrInvalid, func(t *testing.T) error {
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: data}}, 1, 1, 1)
		}},
		{"misaligned binding offset", ErrInvalid, func(t *testing.T) error {
			if align < 2 {
				return ErrInvalid // every offset is aligned on this device
			}
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data, Offset: align / 2}}, 1, 1, 1)
		}},
		{"binding window past the end", ErrInvalid, func(t *testing.T) error {
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data, Offset: 0, Size: 65}}, 1, 1, 1)
		}},
		{"uniform window above maxUniformBufferRange", ErrTooLarge, func(t *testing.T) error {
			big := newBuffer(t, d, d.DeviceInfo().MaxUniformBinding+4)
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: big}, {Buf: data}}, 1, 1, 1)
		}},
		{"storage window above maxStorageBufferRange", ErrTooLarge, func(t *testing.T) error {
			big := newBuffer(t, d, d.Caps().MaxStorageBinding+4)
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: big}}, 1, 1, 1)
		}},
		{"negative workgroups", ErrInvalid, func(t *testing.T) error {
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, -1, 1, 1)
		}},
		{"too many workgroups", ErrInvalid, func(t *testing.T) error {
			return newList(t).Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, 1, d.DeviceInfo().MaxWorkgroupCount[1]+1, 1)
		}},
		{"overlapping copy", ErrInvalid, func(t *testing.T) error { return newList(t).Copy(data, 4, data, 0, 8) }},
		{"submit unfinished list", ErrInvalid, func(t *testing.T) error { return d.Submit(newList(t)) }},
		{"record after finish", ErrInvalid, func(t *testing.T) error {
			c := newList(t)
			if err := c.Finish(); err != nil {
				return err
			}
			return c.Copy(data, 0, data, 32, 4)
		}},
		{"submit released list", ErrReleased, func(t *testing.T) error {
			c := newList(t)
			if err := c.Finish(); err != nil {
				return err
			}
			c.Release()
			return d.Submit(c)
		}},
		{"timestamp slot out of range", ErrInvalid, func(t *testing.T) error { return newList(t).Timestamp(-1) }},
		{"SPIR-V not whole words", ErrInvalid, func(t *testing.T) error {
			_, err := d.NewKernel(shaders.KernelSpec{Name: "bad", SPIRV: make([]byte, 22)})
			return err
		}},
		{"SPIR-V without magic", ErrInvalid, func(t *testing.T) error {
			_, err := d.NewKernel(shaders.KernelSpec{Name: "bad", SPIRV: make([]byte, 40)})
			return err
		}},
		{"unknown binding kind", ErrInvalid, func(t *testing.T) error {
			spv := words(spirvMagic, 0x10300, 0, 10, 0)
			_, err := d.NewKernel(shaders.KernelSpec{Name: "bad", SPIRV: spv, Bindings: []shaders.BindingKind{9}})
			return err
		}},
		{"foreign buffer", ErrInvalid, func(t *testing.T) error { return d.Write(foreignBuffer{}, 0, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(t); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

type foreignBuffer struct{}

func (foreignBuffer) Size() int64 { return 1 << 20 }
func (foreignBuffer) Release()    {}

func TestUseAfterClose(t *testing.T) {
	d := openTest(t, false)
	b := newBuffer(t, d, 16)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
	}{
		{"Write", d.Write(b, 0, []byte{1})},
		{"Read", d.Read(b, 0, []byte{1})},
		{"Wait", d.Wait()},
		{"NewBuffer", func() error { _, err := d.NewBuffer(4); return err }()},
		{"NewCommands", func() error { _, err := d.NewCommands(); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, ErrClosed) && !errors.Is(c.err, ErrReleased) {
			t.Errorf("%s after Close: got %v, want ErrClosed or ErrReleased", c.name, c.err)
		}
	}
	b.Release() // no-op, no crash
}
