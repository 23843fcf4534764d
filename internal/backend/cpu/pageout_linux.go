package cpu

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageOut tells the kernel that b, a tensor's stored bytes that a repacked
// copy now stands in for, will rarely be read again: the whole pages
// inside b are reclaimed (MADV_PAGEOUT). For bytes memory-mapped from a
// model file that drops them from the resident set, and a later read (an
// embedding row, a fallback path) faults them in from the file again; for
// heap memory the kernel may swap them out. Either way the contents stay
// as they were, so it is only a hint, and its errors (kernels before Linux
// 5.4 do not know MADV_PAGEOUT) are ignored.
func pageOut(b []byte) {
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + page - 1) &^ (page - 1)
	end := (start + uintptr(len(b))) &^ (page - 1)
	if len(b) == 0 || end <= first {
		return
	}
	_ = unix.Madvise(b[first-start:end-start], unix.MADV_PAGEOUT)
}
