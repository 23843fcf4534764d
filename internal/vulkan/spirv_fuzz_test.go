//go:build cgo

package vulkan

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSPIRVWords: any byte string is either rejected with ErrInvalid or
// decoded into exactly len/4 little-endian words starting with the magic.
func FuzzSPIRVWords(f *testing.F) {
	for _, name := range []string{"add.spv", "affine.spv"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x03, 0x02, 0x23, 0x07})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := spirvWords(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(w)*4 != len(b) || w[0] != spirvMagic {
			t.Fatalf("decoded %d words from %d bytes, first %#x", len(w), len(b), w[0])
		}
		for i, v := range w {
			if v != binary.LittleEndian.Uint32(b[4*i:]) {
				t.Fatalf("word %d = %#x", i, v)
			}
		}
	})
}
