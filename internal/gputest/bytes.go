package gputest

import (
	"encoding/binary"
	"math"
)

// F32Bytes is v as little-endian float32 bytes, the layout device buffers
// hold, for writing test inputs.
func F32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
