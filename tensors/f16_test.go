package tensors

import (
	"math"
	"testing"
)

// Bit patterns from the IEEE 754 binary16 and bfloat16 definitions.
func TestF16Bits(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		bits uint16
	}{
		{0, 0x0000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff}, // largest finite
		{float32(math.Inf(1)), 0x7c00},
		{1e6, 0x7c00},            // overflows to +inf
		{0x1p-24, 0x0001},        // smallest subnormal
		{0x1p-14, 0x0400},        // smallest normal
		{1 + 0x1p-11, 0x3c00},    // tie between 1 and next: to even (1)
		{1 + 3*0x1p-11, 0x3c02},  // tie between 1+2^-10 and 1+2^-9: to even
		{0.333251953125, 0x3555}, // exactly representable
	} {
		if got := F16Bits(tc.f); got != tc.bits {
			t.Errorf("F16Bits(%g) = %#04x, want %#04x", tc.f, got, tc.bits)
		}
		if tc.bits != 0x7c00 && tc.f == float32(int32(tc.f)) {
			if back := F16Float(tc.bits); back != tc.f {
				t.Errorf("F16Float(%#04x) = %g, want %g", tc.bits, back, tc.f)
			}
		}
	}
	if v := F16Float(0x7e00); v == v {
		t.Errorf("F16Float(NaN pattern) = %g", v)
	}
}

func TestBF16Bits(t *testing.T) {
	for _, tc := range []struct {
		in   uint32 // float32 bits
		bits uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0xc0000000, 0xc000}, // -2
		{0x3f808000, 0x3f80}, // tie, keeps even 0x3f80
		{0x3f818000, 0x3f82}, // tie, rounds up to even 0x3f82
		{0x3f808001, 0x3f81}, // above tie
		{0x7f7fffff, 0x7f80}, // max float32 rounds to +inf
		{0x7f800000, 0x7f80}, // +inf
		{0x00000001, 0x0000}, // tiny subnormal rounds to zero
	} {
		if got := BF16Bits(math.Float32frombits(tc.in)); got != tc.bits {
			t.Errorf("BF16Bits(%#08x) = %#04x, want %#04x", tc.in, got, tc.bits)
		}
	}
	nan := BF16Bits(math.Float32frombits(0x7f800001)) // signalling NaN whose payload sits in the low half
	if v := BF16Float(nan); v == v {
		t.Errorf("NaN became %g (%#04x)", v, nan)
	}
	if got := BF16Float(0x4049); got != 3.140625 {
		t.Errorf("BF16Float(0x4049) = %g, want 3.140625", got)
	}
}
