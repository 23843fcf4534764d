package cpu

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPageOutKeepsMappedBytes: a file's read-only shared mapping (how a
// GGUF's tensors are held) reads the same after pageOut.
func TestPageOutKeepsMappedBytes(t *testing.T) {
	want := pageOutBytes()
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	for _, off := range []int{0, 7, 8192} {
		pageOut(data[off:])
		if !bytes.Equal(data, want) {
			t.Fatalf("mapped bytes changed after pageOut at offset %d", off)
		}
	}
}
