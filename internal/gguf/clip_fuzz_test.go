package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzClip: any bytes given as a vision projector (seeded with the lfm2
// mmproj of testdata/vision/lfm2, whole, cut short and with a byte of its
// keys or tensor infos changed) give a Clip or an error, never a panic;
// a Clip's tensors hold the values its shape says.
func FuzzClip(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vision", "lfm2", "mmproj-lfm2.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(data[:2000])
	for _, at := range []int{100, 300, 700, 1500, 2500} {
		b := append([]byte(nil), data...)
		b[at] ^= 0x5a
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		c, err := p.Clip()
		if err != nil {
			return
		}
		for _, w := range c.Tensors {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			if xs, err := w.Float32(); err == nil && len(xs) != n {
				t.Fatalf("%s: %d values for shape %v", w.Name, len(xs), w.Shape)
			}
		}
	})
}
