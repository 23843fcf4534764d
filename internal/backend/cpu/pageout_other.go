//go:build !linux

package cpu

// pageOut is a hint that b will rarely be read again (see the Linux
// form); elsewhere it does nothing.
func pageOut(b []byte) {}
