package cpu

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func pageOutBytes() []byte {
	b := make([]byte, 5<<16+123)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestPageOutKeepsHeapBytes: pageOut is only a hint; heap bytes read the
// same afterwards, aligned or not.
func TestPageOutKeepsHeapBytes(t *testing.T) {
	want := pageOutBytes()
	heap := bytes.Clone(want)
	for _, off := range []int{0, 1, 4095, 4096, len(heap) - 10, len(heap)} {
		pageOut(heap[off:])
	}
	if !bytes.Equal(heap, want) {
		t.Fatal("heap bytes changed")
	}
}
