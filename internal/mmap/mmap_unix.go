//go:build unix

package mmap

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Open maps the file at path read-only. An empty file gives an empty Map
// (mmap rejects zero-length mappings).
func Open(path string) (*Map, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mmap: %s is not a regular file", path)
	}
	if size == 0 {
		return &Map{data: []byte{}, closer: func([]byte) error { return nil }}, nil
	}
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, fmt.Errorf("mmap: %s: size %d does not fit in memory", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, err)
	}
	return &Map{data: data, closer: unix.Munmap}, nil
}
