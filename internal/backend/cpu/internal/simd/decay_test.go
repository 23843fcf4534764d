package simd

import (
	"math/rand/v2"
	"testing"
)

// TestDecayRank1Parity requires every implementation's DecayRank1 to give
// the bits of the scalar formula written out here (gamma·s + k·δ, two
// products and a sum), over row lengths with and without a vector kernel
// and state offsets that move its alignment.
func TestDecayRank1Parity(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 1))
	for _, k := range Impls() {
		for _, d := range []int{8, 16, 24, 128, 256, 5, 13} {
			for _, rows := range []int{1, 3, 16} {
				for off := range 3 {
					s := make([]float32, off+rows*d)
					kv, delta := make([]float32, rows), make([]float32, d)
					for i := range s {
						s[i] = r.Float32()*4 - 2
					}
					for i := range kv {
						kv[i] = r.Float32()*2 - 1
					}
					for i := range delta {
						delta[i] = r.Float32()*2 - 1
					}
					gamma := r.Float32()
					want := append([]float32(nil), s...)
					for i := range rows {
						for j := range d {
							want[off+i*d+j] = float32(gamma*want[off+i*d+j]) + float32(kv[i]*delta[j])
						}
					}
					k.DecayRank1(s[off:], kv, delta, gamma)
					for i := range s {
						if !sameBits(s[i], want[i]) {
							t.Fatalf("%s d=%d rows=%d off=%d [%d] = %g, want %g", k.Name, d, rows, off, i, s[i], want[i])
						}
					}
				}
			}
		}
	}
}
