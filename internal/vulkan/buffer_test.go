//go:build cgo

package vulkan

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

func TestBufferRoundTrip(t *testing.T) {
	cases := []struct {
		name        string
		size        int64
		off, length int
	}{
		{"one byte", 1, 0, 1},
		{"odd size", 7, 2, 5},
		{"word", 4, 0, 4},
		{"unaligned middle", 1003, 17, 901},
		{"page plus", 4099, 4000, 99},
		{"empty read", 16, 16, 0},
	}
	memoryModes(t, func(t *testing.T, d *Device) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				b := newBuffer(t, d, tc.size)
				if b.Size() != tc.size {
					t.Fatalf("Size() = %d, want %d", b.Size(), tc.size)
				}
				zero := make([]byte, tc.size)
				got := make([]byte, tc.size)
				if err := d.Read(b, 0, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, zero) {
					t.Fatalf("new buffer not zero-filled: %x", got)
				}
				data := pattern(tc.length, uint64(tc.size))
				if err := d.Write(b, int64(tc.off), data); err != nil {
					t.Fatal(err)
				}
				want := append([]byte(nil), zero...)
				copy(want[tc.off:], data)
				if err := d.Read(b, 0, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("whole buffer after write at %d:\n got %x\nwant %x", tc.off, got, want)
				}
				part := make([]byte, tc.length)
				if err := d.Read(b, int64(tc.off), part); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(part, data) {
					t.Fatalf("window read: got %x, want %x", part, data)
				}
			})
		}
	})
}

// TestLargeStagedTransfer crosses the staging chunk boundary.
func TestLargeStagedTransfer(t *testing.T) {
	d := openTest(t, true)
	n := stagingChunk + 12345
	b := newBuffer(t, d, int64(n)+8)
	data := pattern(n, 9)
	if err := d.Write(b, 3, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.Read(b, 3, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("staged round trip differs")
	}
}

func TestCopy(t *testing.T) {
	cases := []struct {
		name                 string
		dstOff, srcOff, size int64
		sameBuffer           bool
	}{
		{"whole", 0, 0, 64, false},
		{"odd offsets and size", 5, 3, 29, false},
		{"single byte", 63, 0, 1, false},
		{"within one buffer", 40, 1, 20, true},
		{"empty", 10, 10, 0, false},
	}
	memoryModes(t, func(t *testing.T, d *Device) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				src := newBuffer(t, d, 64)
				dst := src
				if !tc.sameBuffer {
					dst = newBuffer(t, d, 64)
				}
				srcData := pattern(64, 3)
				if err := d.Write(src, 0, srcData); err != nil {
					t.Fatal(err)
				}
				want := make([]byte, 64)
				if tc.sameBuffer {
					copy(want, srcData)
				}
				copy(want[tc.dstOff:tc.dstOff+tc.size], srcData[tc.srcOff:tc.srcOff+tc.size])
				c := record(t, d, func(c gpu.Commands) error { return c.Copy(dst, tc.dstOff, src, tc.srcOff, tc.size) })
				if err := d.Submit(c); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, 64)
				if err := d.Read(dst, 0, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("got %x\nwant %x", got, want)
				}
			})
		}
	})
}
