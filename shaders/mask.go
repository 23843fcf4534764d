package shaders

import (
	"encoding/binary"
	"math"
)

// The token mask of a decode program that picks its token on the device
// (the argmax and sample kernels, wgsl/lib/token_mask.wgsl): a header of
// TokenMaskHeader words (1 while a mask is set; the bits of -inf), then
// one bit per token, bit i % 32 of word TokenMaskHeader + i / 32.
const TokenMaskHeader = 2

// TokenMaskBytes is the size of the mask buffer of a vocabulary of n
// tokens: the header and whole 64-bit words of token bits.
func TokenMaskBytes(n int) int64 {
	return 4 * (TokenMaskHeader + 2*int64((n+63)/64))
}

// EncodeTokenMask returns the mask buffer's contents for a vocabulary of n
// tokens, in dst's storage when it is large enough (a decode loop setting
// a mask each step reuses one slice): allowed nil sets no mask (every
// token may be picked), else bit i % 64 of allowed[i / 64] allows token i
// (len(allowed) is (n + 63) / 64, which the caller checks). Little-endian
// 64-bit words are the 32-bit words the kernels index, low word first.
func EncodeTokenMask(dst []byte, n int, allowed []uint64) []byte {
	b := dst[:0]
	if size := int(TokenMaskBytes(n)); cap(b) >= size {
		b = b[:size]
		clear(b)
	} else {
		b = make([]byte, size)
	}
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(math.Inf(-1))))
	if allowed == nil {
		return b
	}
	binary.LittleEndian.PutUint32(b[0:], 1)
	for i, w := range allowed {
		binary.LittleEndian.PutUint64(b[4*TokenMaskHeader+8*i:], w)
	}
	return b
}
