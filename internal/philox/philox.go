// Package philox is the Philox4x32-10 counter-based random generator of
// Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3" (SC11): a
// pure function of a 128-bit counter and a 64-bit key, so a sampler on the
// host and a kernel on the device draw the same numbers for the same
// (seed, step) without sharing any state. shaders/wgsl/sample.wgsl has the
// same rounds in WGSL.
package philox

import "math/bits"

const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9 // the key schedule's Weyl increments
	w1 = 0xBB67AE85
)

// Block returns Philox4x32-10 of counter ctr under key.
func Block(ctr [4]uint32, key [2]uint32) [4]uint32 {
	for r := 0; r < 10; r++ {
		if r > 0 {
			key[0] += w0
			key[1] += w1
		}
		hi0, lo0 := bits.Mul32(m0, ctr[0])
		hi1, lo1 := bits.Mul32(m1, ctr[2])
		ctr = [4]uint32{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0}
	}
	return ctr
}

// Uniform is the draw of a sampling step: the top 24 bits of the first
// word of the block at counter (step, 0, 0, 0) under the key made of seed's
// low and high words, scaled into [0, 1). It is exact in float32.
func Uniform(seed uint64, step uint32) float32 {
	b := Block([4]uint32{step, 0, 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float32(b[0]>>8) * (1.0 / (1 << 24))
}
