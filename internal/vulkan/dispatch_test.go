//go:build cgo

package vulkan

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
)

func TestDispatchAffine(t *testing.T) {
	cases := []struct {
		name         string
		n            int
		scale, shift float32
	}{
		{"one", 1, 2, 1},
		{"partial group", 63, -0.5, 3},
		{"exact group", 64, 1.5, 0},
		{"many groups", 1000, 0.25, -7},
	}
	memoryModes(t, func(t *testing.T, d *Device) {
		k := testKernel(t, d, "affine", shaders.Uniform, shaders.StorageRead, shaders.StorageRW)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(tc.n), 2))
				in := make([]float32, tc.n)
				for i := range in {
					in[i] = r.Float32()*200 - 100
				}
				p := newBuffer(t, d, 16)
				if err := d.Write(p, 0, words(uint32(tc.n), math.Float32bits(tc.scale), math.Float32bits(tc.shift))); err != nil {
					t.Fatal(err)
				}
				src := newBuffer(t, d, int64(4*tc.n))
				if err := d.Write(src, 0, gputest.F32Bytes(in)); err != nil {
					t.Fatal(err)
				}
				// One spare element past n must stay untouched.
				dst := newBuffer(t, d, int64(4*tc.n+4))
				c := record(t, d, func(c gpu.Commands) error {
					return c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: src}, {Buf: dst}}, groups(tc.n), 1, 1)
				})
				if err := d.Submit(c); err != nil {
					t.Fatal(err)
				}
				got := readU32(t, d, dst, 0, tc.n+1)
				for i, x := range in {
					want := float64(x)*float64(tc.scale) + float64(tc.shift)
					g := float64(math.Float32frombits(got[i]))
					if math.Abs(g-want) > 1e-6*math.Max(1, math.Abs(want)) {
						t.Fatalf("dst[%d] = %v, want %v", i, g, want)
					}
				}
				if got[tc.n] != 0 {
					t.Errorf("element past n written: %x", got[tc.n])
				}
			})
		}
	})
}

// TestResubmit records one list and submits it many times, separately and
// in one Submit call: each run must add once.
func TestResubmit(t *testing.T) {
	const n, add = 100, 3
	cases := []struct {
		name          string
		rounds, batch int
	}{
		{"once", 1, 1},
		{"separate submits", 7, 1},
		{"one batched submit", 1, 5},
		{"mixed", 3, 4},
	}
	memoryModes(t, func(t *testing.T, d *Device) {
		k := addKernel(t, d)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := params(t, d, n, add)
				data := newBuffer(t, d, 4*n)
				start := make([]uint32, n)
				for i := range start {
					start[i] = uint32(i * 1000)
				}
				if err := d.Write(data, 0, words(start...)); err != nil {
					t.Fatal(err)
				}
				c := record(t, d, func(c gpu.Commands) error {
					return c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, groups(n), 1, 1)
				})
				batch := make([]gpu.Commands, tc.batch)
				for i := range batch {
					batch[i] = c
				}
				for range tc.rounds {
					if err := d.Submit(batch...); err != nil {
						t.Fatal(err)
					}
				}
				if err := d.Wait(); err != nil {
					t.Fatal(err)
				}
				runs := uint32(tc.rounds * tc.batch)
				for i, v := range readU32(t, d, data, 0, n) {
					if want := start[i] + runs*add; v != want {
						t.Fatalf("data[%d] = %d after %d runs, want %d", i, v, runs, want)
					}
				}
			})
		}
	})
}

// TestDependentDispatches chains dispatches in one list: each must see the
// previous one's writes (the barriers between them).
func TestDependentDispatches(t *testing.T) {
	d := openTest(t, false)
	k := testKernel(t, d, "affine", shaders.Uniform, shaders.StorageRead, shaders.StorageRW)
	const n, steps = 256, 6
	p := newBuffer(t, d, 16)
	if err := d.Write(p, 0, words(n, math.Float32bits(2), math.Float32bits(1))); err != nil {
		t.Fatal(err)
	}
	a, b := newBuffer(t, d, 4*n), newBuffer(t, d, 4*n)
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i % 7)
	}
	if err := d.Write(a, 0, gputest.F32Bytes(in)); err != nil {
		t.Fatal(err)
	}
	c := record(t, d, func(c gpu.Commands) error {
		for s := range steps {
			src, dst := a, b
			if s%2 == 1 {
				src, dst = b, a
			}
			if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: src}, {Buf: dst}}, groups(n), 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err := d.Submit(c); err != nil {
		t.Fatal(err)
	}
	final := a // an even number of steps ends in a
	got := readU32(t, d, final, 0, n)
	for i, x := range in {
		want := float64(x)
		for range steps {
			want = want*2 + 1
		}
		if g := float64(math.Float32frombits(got[i])); g != want {
			t.Fatalf("element %d = %v, want %v", i, g, want)
		}
	}
}

// TestBindingWindows binds aligned windows of one buffer to separate
// dispatches; each window changes and nothing outside it does.
func TestBindingWindows(t *testing.T) {
	memoryModes(t, func(t *testing.T, d *Device) {
		k := addKernel(t, d)
		align := int64(d.Caps().StorageOffsetAlign)
		window := max(align, 64) // bytes per window, a multiple of align
		const windows = 4
		buf := newBuffer(t, d, window*windows+window) // last window stays unbound
		n := uint32(window / 4)
		ps := make([]gpu.Buffer, windows)
		for w := range windows {
			ps[w] = params(t, d, n, uint32(w+1))
		}
		c := record(t, d, func(c gpu.Commands) error {
			for w := range windows {
				b := gpu.Binding{Buf: buf, Offset: int64(w) * window, Size: window}
				if err := c.Dispatch(k, []gpu.Binding{{Buf: ps[w]}, b}, groups(int(n)), 1, 1); err != nil {
					return err
				}
			}
			return nil
		})
		if err := d.Submit(c); err != nil {
			t.Fatal(err)
		}
		got := readU32(t, d, buf, 0, int(window*(windows+1)/4))
		for i, v := range got {
			w := i / int(n)
			want := uint32(0)
			if w < windows {
				want = uint32(w + 1)
			}
			if v != want {
				t.Fatalf("word %d (window %d) = %d, want %d", i, w, v, want)
			}
		}
	})
}

// TestWindowToEnd: Size 0 binds from Offset to the end of the buffer.
func TestWindowToEnd(t *testing.T) {
	d := openTest(t, false)
	k := addKernel(t, d)
	off := int64(d.Caps().StorageOffsetAlign) * 2
	const total = 256
	buf := newBuffer(t, d, total)
	// The shader's bound comes from params: exactly the window's words.
	n := uint32((total - off) / 4)
	p := params(t, d, n, 9)
	c := record(t, d, func(c gpu.Commands) error {
		return c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: buf, Offset: off}}, groups(int(n)), 1, 1)
	})
	if err := d.Submit(c); err != nil {
		t.Fatal(err)
	}
	for i, v := range readU32(t, d, buf, 0, total/4) {
		want := uint32(0)
		if int64(4*i) >= off {
			want = 9
		}
		if v != want {
			t.Fatalf("word %d = %d, want %d", i, v, want)
		}
	}
}

func TestTimestamps(t *testing.T) {
	d := openTest(t, false)
	if !d.Caps().Timestamps {
		t.Skip("device has no timestamps")
	}
	k := addKernel(t, d)
	const n = 1 << 14
	p := params(t, d, n, 1)
	data := newBuffer(t, d, 4*n)
	c := record(t, d, func(c gpu.Commands) error {
		if err := c.Timestamp(0); err != nil {
			return err
		}
		for i := 1; i <= 3; i++ {
			for range 4 {
				if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, groups(n), 1, 1); err != nil {
					return err
				}
			}
			if err := c.Timestamp(i); err != nil {
				return err
			}
		}
		return nil
	})
	for round := range 2 {
		if err := d.Submit(c); err != nil {
			t.Fatal(err)
		}
		ts, err := d.ReadTimestamps(4)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				t.Errorf("round %d: timestamps not increasing: %v", round, ts)
			}
		}
	}
	if _, err := d.ReadTimestamps(timestampSlots + 1); err == nil {
		t.Error("reading more slots than the pool holds succeeded")
	}
	// Slot 7 was never written on this device.
	if _, err := d.ReadTimestamps(8); err == nil {
		t.Error("reading an unwritten slot succeeded")
	}
}

// TestManyDispatchesInOneList records more dispatches than one descriptor
// pool block holds, so the list must grow new pools.
func TestManyDispatchesInOneList(t *testing.T) {
	d := openTest(t, false)
	k := addKernel(t, d)
	const n, dispatches = 8, 2*poolSets + 37
	// Each dispatch binds its own parameter buffer: a dispatch bound as
	// an earlier one would reuse that one's set (TestRepeatedDispatchesShareSets).
	ps := make([]gpu.Buffer, dispatches)
	for i := range ps {
		ps[i] = params(t, d, n, 2)
	}
	data := newBuffer(t, d, 4*n)
	c := record(t, d, func(c gpu.Commands) error {
		for _, p := range ps {
			if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, 1, 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if got := len(c.(*commands).desc); got < 3 {
		t.Errorf("%d dispatches used %d descriptor pools, want at least 3 blocks of %d sets", dispatches, got, poolSets)
	}
	for round := 1; round <= 2; round++ {
		if err := d.Submit(c); err != nil {
			t.Fatal(err)
		}
		for i, v := range readU32(t, d, data, 0, n) {
			if want := uint32(round * dispatches * 2); v != want {
				t.Fatalf("round %d: data[%d] = %d, want %d", round, i, v, want)
			}
		}
	}
}

// TestRepeatedDispatchesShareSets: a list that repeats dispatches with the
// same kernel and bound windows (as a multi-step decode list repeats a
// step's) writes one descriptor set per distinct dispatch and binds it
// again for the repeats; a different window or kernel gets its own set,
// and every dispatch still runs.
func TestRepeatedDispatchesShareSets(t *testing.T) {
	d := openTest(t, false)
	k := addKernel(t, d)
	k2 := testKernel(t, d, "add", shaders.Uniform, shaders.StorageRW) // same source, another kernel
	const n, rounds = 8, 50
	// one adds 1 to every word; three adds 3 to the first half.
	one, three := params(t, d, n, 1), params(t, d, n/2, 3)
	data := newBuffer(t, d, 4*n)
	c := record(t, d, func(c gpu.Commands) error {
		for range rounds {
			for _, b := range []gpu.Binding{{Buf: one}, {Buf: three}} {
				if err := c.Dispatch(k, []gpu.Binding{b, {Buf: data}}, 1, 1, 1); err != nil {
					return err
				}
			}
			if err := c.Dispatch(k2, []gpu.Binding{{Buf: one}, {Buf: data}}, 1, 1, 1); err != nil {
				return err
			}
			// Bound as the second dispatch but for the window: the first
			// half of data only.
			if err := c.Dispatch(k, []gpu.Binding{{Buf: three}, {Buf: data, Size: 4 * n / 2}}, 1, 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if got := len(c.(*commands).sets); got != 4 {
		t.Errorf("%d dispatches wrote %d descriptor sets, want 4 (one per distinct kernel and windows)", 4*rounds, got)
	}
	if err := d.Submit(c); err != nil {
		t.Fatal(err)
	}
	for i, v := range readU32(t, d, data, 0, n) {
		want := uint32(rounds * 2)
		if i < n/2 {
			want += rounds * (3 + 3)
		}
		if v != want {
			t.Fatalf("data[%d] = %d, want %d", i, v, want)
		}
	}
}
