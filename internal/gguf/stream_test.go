package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

// TestParseHeadStreams checks that a header-only parse imports the same
// checkpoint as a whole-file parse, every tensor deferred and read (once
// it is filled) to the same bytes and scales, across the architecture
// files (fused QKV and gate/up splits, Q8_0 and Q4_0 conversions among
// them), and that each fill reads only its own tensor's bytes.
func TestParseHeadStreams(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(archDir(t), "*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no GGUF files in %s: %v", archDir(t), err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := whole.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			var read int64
			readAt := func(off, n int64) ([]byte, error) {
				if off < whole.DataOffset || off+n > int64(len(data)) {
					t.Errorf("read [%d, %d) outside the data section [%d, %d)", off, off+n, whole.DataOffset, len(data))
				}
				read += n
				return bytes.Clone(data[off : off+n]), nil
			}
			// Too short a head asks for more.
			if _, err := ParseHead(data[:whole.DataOffset/2], int64(len(data)), readAt); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("half a header: %v, want io.ErrUnexpectedEOF", err)
			}
			f, err := ParseHead(data[:whole.DataOffset], int64(len(data)), readAt)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			if read != 0 && len(got.Config.RopeFactors) == 0 {
				t.Errorf("the import read %d tensor bytes before any fill", read)
			}
			if len(got.Tensors) != len(want.Tensors) {
				t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
			}
			for i, g := range got.Tensors {
				w := want.Tensors[i]
				if !g.Deferred() {
					t.Fatalf("%s is not deferred", g.Name)
				}
				if g.Name != w.Name || g.DType != w.DType || !equalInts(g.Shape, w.Shape) {
					t.Fatalf("deferred %s %s %v, want %s %s %v", g.Name, g.DType, g.Shape, w.Name, w.DType, w.Shape)
				}
				if err := g.Fill(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(g.Data, w.Data) || !sameScales(g.Scales, w.Scales) {
					t.Errorf("%s: filled bytes or scales differ from the whole-file import", g.Name)
				}
				g.Drop()
				if !g.Deferred() {
					t.Errorf("%s: not deferred after Drop", g.Name)
				}
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameScales(a, b *tensors.Tensor) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.DType == b.DType && equalInts(a.Shape, b.Shape) && bytes.Equal(a.Data, b.Data)
}

// TestParseHeadErrors: a read that fails or comes back short is an error
// at fill time, and a head longer than the file is refused.
func TestParseHeadErrors(t *testing.T) {
	data := tinyLlama()
	whole, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHead(data, int64(len(data))-1, func(int64, int64) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrFormat) {
		t.Errorf("head over the size: %v, want ErrFormat", err)
	}
	for name, read := range map[string]ReadFunc{
		"failing": func(int64, int64) ([]byte, error) { return nil, io.ErrClosedPipe },
		"short":   func(off, n int64) ([]byte, error) { return make([]byte, n-1), nil },
	} {
		f, err := ParseHead(data[:whole.DataOffset], int64(len(data)), read)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := f.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := ck.Tensors[0].Fill(); err == nil {
			t.Errorf("%s read: Fill succeeded", name)
		}
	}
}
