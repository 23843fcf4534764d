package philox

import "testing"

// TestKnownAnswers holds Block to the Philox4x32-10 known-answer vectors
// published with Random123 (kat_vectors: counter, key, expected output).
func TestKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		if got := Block(tc.ctr, tc.key); got != tc.want {
			t.Errorf("Block(%08x, %08x) = %08x, want %08x", tc.ctr, tc.key, got, tc.want)
		}
	}
}

func TestUniformRange(t *testing.T) {
	var sum float64
	const n = 1 << 14
	for s := uint32(0); s < n; s++ {
		u := Uniform(42, s)
		if !(u >= 0 && u < 1) {
			t.Fatalf("Uniform(42, %d) = %v, outside [0, 1)", s, u)
		}
		sum += float64(u)
	}
	if m := sum / n; m < 0.49 || m > 0.51 {
		t.Errorf("mean of %d draws = %v, want about 0.5", n, m)
	}
	if Uniform(1, 7) == Uniform(2, 7) && Uniform(1, 8) == Uniform(2, 8) {
		t.Error("the seed does not change the draws")
	}
}
