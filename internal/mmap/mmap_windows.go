//go:build windows

package mmap

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Open maps the file at path read-only through a file mapping object, as
// mmap does on unix: the view stays valid after the file and the mapping
// handle are closed, until UnmapViewOfFile. An empty file gives an empty
// Map (CreateFileMapping rejects zero-length files).
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
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY, uint32(uint64(size)>>32), uint32(size), nil)
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: CreateFileMapping: %w", path, err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	windows.CloseHandle(h) // the view keeps the mapping alive
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: MapViewOfFile: %w", path, err)
	}
	// The view is memory Go did not allocate: read its address as a
	// pointer without the uintptr conversion vet rightly distrusts.
	data := unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), int(size))
	return &Map{data: data, closer: func(b []byte) error {
		return windows.UnmapViewOfFile(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	}}, nil
}
